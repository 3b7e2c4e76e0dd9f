"""Files on disk: crash-safe writes, OS locks, what differs between platforms, opening text and
naming what a file is."""
