"""What differs between Linux, macOS and Windows, in one place: the only module that imports a
POSIX-only module (fcntl), and only inside a function, so every other module imports on Windows.

File locks: one interface (`file_lock()`: try_lock(fd) -> bool, unlock(fd)) with two
implementations, chosen by the platform or, to test the other one, by $ENCODERSCOPE_FILE_LOCK:

- "posix" (Linux, macOS): flock on the whole file. The OS drops it when its process dies
  (kill -9 included); the file is opened with O_NOFOLLOW, so a link is never followed; the
  holder's record is written at the start of the file and anyone can read it.
- "windows": a lock on one byte far past the record (msvcrt.locking, LK_NBLCK), so the record
  stays readable (Windows locks are mandatory: a locked byte cannot even be read). Windows drops
  it when the process ends, kill included, but only "eventually" per its documentation (in
  practice at once). Windows has no O_NOFOLLOW: the file is lstat'ed before it is opened and
  the opened file must be that same file (fstat), so nothing is ever written through a link,
  but a link planted between the two checks can make the open create an empty file where it
  points (creating links needs rights ordinary Windows users lack). On Linux, where there is no
  msvcrt, "windows" locks the same byte with an open-file-description lock (F_OFD_SETLK),
  which has msvcrt's semantics (per handle, dropped on close and on death), so the suite runs
  the Windows implementation's code here (tests/index/store/test_portable_locks.py).

Processes: `pid_alive` (os.kill(pid, 0) would *terminate* the process on Windows),
`process_argv` (Linux /proc; None elsewhere: the caller names the pid only). Also the CPU's name
and the umask without /proc, a read-only mount without statvfs, and the signals that stop a
command (Ctrl-C everywhere, SIGTERM where the OS delivers it).
"""
from __future__ import annotations

import errno
import os
import platform
import signal
import stat
import struct
import sys
from pathlib import Path

LOCK_ENV = "ENCODERSCOPE_FILE_LOCK"      # posix | windows (default: this platform's)
RANGE_START = 1 << 30                    # the byte the "windows" lock takes, far past any record
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO opened for reading must not block (POSIX)
BINARY = getattr(os, "O_BINARY", 0)      # Windows: no newline translation on raw fds


def windows() -> bool:
    return sys.platform == "win32"


def lock_kind() -> str:
    chosen = os.environ.get(LOCK_ENV, "").strip().lower()
    if chosen in ("posix", "windows"):
        return chosen
    return "windows" if windows() else "posix"


class PosixLock:
    """flock on the whole file (Linux, macOS)."""
    name = "posix"
    follows_links = False

    def try_lock(self, fd: int) -> bool:
        import fcntl
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def unlock(self, fd: int) -> None:
        import fcntl
        fcntl.flock(fd, fcntl.LOCK_UN)


class WindowsLock:
    """One byte at RANGE_START, locked by msvcrt.locking (Linux stand-in: an OFD lock)."""
    name = "windows"
    follows_links = True       # no O_NOFOLLOW: open_nofollow checks before and after instead

    def try_lock(self, fd: int) -> bool:
        try:
            _range_lock(fd, True)
        except OSError as e:
            if e.errno in (errno.EACCES, errno.EAGAIN, errno.EDEADLK, errno.EWOULDBLOCK):
                return False
            raise
        return True

    def unlock(self, fd: int) -> None:
        _range_lock(fd, False)


def msvcrt_module():
    """Windows' msvcrt, or None (a test hands in its stand-in here)."""
    try:
        import msvcrt
    except ImportError:
        return None
    return msvcrt


def _range_lock(fd: int, take: bool) -> None:
    msvcrt = msvcrt_module()
    if msvcrt is not None:
        where = os.lseek(fd, 0, os.SEEK_CUR)
        os.lseek(fd, RANGE_START, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK if take else msvcrt.LK_UNLCK, 1)
        finally:
            os.lseek(fd, where, os.SEEK_SET)
        return
    # the stand-in where msvcrt is absent (Linux): same semantics
    import fcntl
    kind = fcntl.F_WRLCK if take else fcntl.F_UNLCK
    # struct flock: l_type, l_whence, l_start, l_len, l_pid (0 for OFD locks)
    fcntl.fcntl(fd, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, RANGE_START, 1, 0))


def file_lock() -> PosixLock | WindowsLock:
    return WindowsLock() if lock_kind() == "windows" else PosixLock()


def open_nofollow(path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a link in the last component: O_NOFOLLOW where the OS has it
    (OSError ELOOP on a link, as the OS gives), else an lstat before and an fstat after that
    must name the same regular file (ELOOP too when they do not)."""
    path = str(path)
    if NOFOLLOW and not file_lock().follows_links:
        return os.open(path, flags | NOFOLLOW | CLOEXEC | BINARY, mode)
    try:
        before = os.lstat(path)
    except FileNotFoundError:
        before = None
    if before is not None and stat.S_ISLNK(before.st_mode):
        raise OSError(errno.ELOOP, "is a symbolic link", path)
    fd = os.open(path, flags | CLOEXEC | BINARY, mode)
    try:
        after = os.fstat(fd)
        now = os.lstat(path)
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISLNK(now.st_mode) or (now.st_dev, now.st_ino) != (after.st_dev, after.st_ino) \
            or (before is not None and (before.st_dev, before.st_ino) != (after.st_dev, after.st_ino)):
        os.close(fd)
        raise OSError(errno.ELOOP, "is a symbolic link", path)
    return fd


def fsync_file(path) -> None:
    """Flush a written file to disk. Windows flushes only through a handle that may write
    (FlushFileBuffers on a read-only one fails); POSIX needs no write access."""
    fd = os.open(str(path), (os.O_RDWR if windows() else os.O_RDONLY) | BINARY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_start(fd: int, limit: int = 4096) -> bytes:
    """The first `limit` bytes of an open file (os.pread is POSIX-only)."""
    os.lseek(fd, 0, os.SEEK_SET)
    return os.read(fd, limit)


def write_start(fd: int, data: bytes) -> None:
    """Replace an open file's contents by `data` (truncate, then write at 0)."""
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    while data:
        data = data[os.write(fd, data):]


def pid_alive(pid: int) -> bool:
    """Whether process `pid` of this machine runs (True when it cannot be told: another user's)."""
    if pid <= 0:
        return False
    if windows():
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True      # PermissionError: alive, another user's
    return True


def _windows_pid_alive(pid: int) -> bool:   # pragma: no cover - runs on Windows only
    import ctypes
    from ctypes import wintypes
    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    kernel32.GetExitCodeProcess.argtypes = (wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD))
    kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
    handle = kernel32.OpenProcess(0x1000, False, pid)     # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return ctypes.get_last_error() == 5              # access denied: it exists (another user's)
    try:
        code = wintypes.DWORD()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == 259                         # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def process_argv(pid: int) -> list[str] | None:
    """A process's command line where the OS shows it as a file (Linux /proc), else None."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what platform says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def current_umask() -> int:
    """The umask, read without changing it where Linux shows it (/proc), else set and back."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def path_of_fd(fd: int) -> str | None:
    """The file an open descriptor writes to where the OS says (/proc/self/fd), else None."""
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except (OSError, ValueError, AttributeError):
        return None
    return target if target.startswith("/") else None


def mounted_read_only(folder) -> bool:
    """Whether `folder`'s file system is mounted read-only (False where statvfs is missing)."""
    statvfs = getattr(os, "statvfs", None)
    if statvfs is None:
        return False
    try:
        return bool(statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def stop_signals() -> tuple[int, ...]:
    """The signals that stop a command as Ctrl-C does: SIGINT everywhere, SIGTERM where the OS
    delivers it (Windows defines the name but never sends it to a process)."""
    if windows() or not hasattr(signal, "SIGTERM"):
        return (signal.SIGINT,)
    return (signal.SIGINT, signal.SIGTERM)
