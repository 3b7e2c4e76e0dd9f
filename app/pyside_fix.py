"""Work around a reference-counting bug of PySide6 6.12 on Python < 3.12.

On CPython 3.11 with PySide6 6.12.0, every call of a C++ method that returns void (``setText``,
``processEvents``, ``QTimer.stop`` …) takes one reference from ``None`` without giving it, and
``Signal.emit()`` does the same to ``True``/``False``. After a few thousand UI updates the
interpreter aborts with "Fatal Python error: none_dealloc: deallocating None" (or bool_dealloc)
— a long ingest with a progress bar was enough. Python 3.12+ makes these objects immortal, so
the bug is harmless there; here we give them the same property by adding 2**40 to their counts
once, at import of the ``app`` package (before any Qt call).

Reproduce: ``sys.getrefcount(None)`` before and after ``for _ in range(1000): label.setText("a")``
drops by 1000. ``tests/test_app_workers.py::test_pyside_refcount_guard`` checks the guard.
"""
from __future__ import annotations

import ctypes
import sys

HEADROOM = 1 << 40


def make_singletons_immortal() -> bool:
    """Raise the reference counts of None, True and False far beyond reach (Python < 3.12)."""
    if sys.version_info >= (3, 12) or sys.implementation.name != "cpython":
        return False
    for obj in (None, True, False):
        count = ctypes.c_ssize_t.from_address(id(obj))   # ob_refcnt: the first field of PyObject
        if count.value < HEADROOM:
            count.value += HEADROOM
    return True


make_singletons_immortal()
