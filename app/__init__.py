"""The app: the command line (app/cli/, Qt-free) and the desktop app (app/gui/, the only place
that imports Qt and pyqtgraph); app/main.py is the `encoderscope` entry point over both."""
