"""The desktop app (the only package that imports Qt / pyqtgraph)."""
from . import pyside_fix  # noqa: F401  - before any Qt call: see app/pyside_fix.py
