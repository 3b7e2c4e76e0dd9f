"""A stand-in for Windows' msvcrt.locking on Linux, for tests that make fcntl unimportable (as on
Windows) yet need the Windows lock to work: `install()` makes core.files.platform_os use it (not
sys.modules: the standard library takes an importable msvcrt to mean Windows).

msvcrt.locking(fd, mode, nbytes) locks `nbytes` from the file's current position, per handle,
dropped on close and when the process dies; so is a Linux open-file-description lock
(F_OFD_SETLK), which this uses through the real fcntl, taken before fcntl is blocked."""
from __future__ import annotations

import errno
import os
import struct
import types

LK_UNLCK, LK_LOCK, LK_NBLCK, LK_RLCK, LK_NBRLCK = 0, 1, 2, 3, 4


def install() -> types.ModuleType:
    import fcntl

    def locking(fd: int, mode: int, nbytes: int) -> None:
        start = os.lseek(fd, 0, os.SEEK_CUR)
        kind = fcntl.F_UNLCK if mode == LK_UNLCK else fcntl.F_WRLCK
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, start, nbytes, 0))
        except OSError as e:
            raise OSError(errno.EACCES, "Permission denied (locked by another handle)") from e

    module = types.ModuleType("msvcrt")
    module.locking = locking
    for name, value in (("LK_UNLCK", LK_UNLCK), ("LK_LOCK", LK_LOCK), ("LK_NBLCK", LK_NBLCK),
                        ("LK_RLCK", LK_RLCK), ("LK_NBRLCK", LK_NBRLCK)):
        setattr(module, name, value)
    from core.files import platform_os
    platform_os.msvcrt_module = lambda: module
    return module
