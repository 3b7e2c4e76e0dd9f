"""The desktop app and the `encoderscope` composition root (the only package that imports Qt /
pyqtgraph, and only in the modules that draw)."""
