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
  the path must still name the opened file after (lstat, fstat), so nothing is ever written
  through a link, but a link planted between the two checks can make the open create an empty
  file where it points (creating links needs rights ordinary Windows users lack). On Linux, where there is no
  msvcrt, "windows" locks the same byte with an open-file-description lock (F_OFD_SETLK),
  which has msvcrt's semantics (per handle, dropped on close and on death), so the suite runs
  the Windows implementation's code here (tests/index/store/test_portable_locks.py).

A lock file its last holder removes (core.files.folder_lock): `removes_held_file` says how. flock's
holder unlinks it while still holding it; Windows refuses to delete an open file, so its holder
unlocks, closes, then tries to delete it (`remove_closed`), which Windows refuses while another
process has it open: that one keeps it. Linux deletes open files, so the "windows" stand-in
emulates that refusal (WindowsLock.opening).

Processes: `pid_alive` (os.kill(pid, 0) would *terminate* the process on Windows),
`process_argv` (Linux /proc; None elsewhere: the caller names the pid only). Also the CPU's name,
the CPUs a process may use, the umask without /proc, a read-only mount without statvfs, and the
signals that stop a command (Ctrl-C everywhere, SIGTERM where the OS delivers it).
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
    removes_held_file = True   # a held file may be unlinked: the lock goes on with the open file

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

    def opening(self, path) -> None:
        """Nothing to do: a held file is unlinked by its holder (removes_held_file)."""

    def closed(self) -> None:
        pass


class WindowsLock:
    """One byte at RANGE_START, locked by msvcrt.locking (Linux stand-in: an OFD lock)."""
    name = "windows"
    follows_links = True       # no O_NOFOLLOW: open_nofollow checks before and after instead
    removes_held_file = False  # Windows refuses to delete an open file: remove after closing

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

    # Windows will not delete a file while any handle on it is open (the C runtime opens
    # without FILE_SHARE_DELETE): remove_closed's delete fails then, which keeps a lock file
    # that another process is taking. Linux deletes open files, so its stand-in gives every
    # handle a shared flock on the file's folder while it is open, and deletes only under an
    # exclusive one (refused while any handle is open, as Windows refuses): the same guarantee,
    # coarser (any such handle in the folder keeps the file).
    _folder_fd: int | None = None

    def opening(self, path) -> None:
        """Before opening `path` as a lock file its holder will remove."""
        if msvcrt_module() is not None or self._folder_fd is not None:
            return
        import fcntl
        fd = os.open(str(Path(path).parent), os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except BaseException:
            os.close(fd)
            raise
        self._folder_fd = fd

    def closed(self) -> None:
        """After the handle opened since `opening` was closed without deleting the file."""
        if self._folder_fd is not None:
            fd, self._folder_fd = self._folder_fd, None
            os.close(fd)

    def remove_closed(self, path, identity: tuple[int, int]) -> None:
        """After its handle is closed: delete the lock file if it is still the one held
        (`identity`: st_dev, st_ino) and no handle is open on it (Windows refuses: it is kept)."""
        if self._folder_fd is None:
            _remove_if(path, identity)
            return
        import fcntl
        try:
            fcntl.flock(self._folder_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return self.closed()       # another handle is open: Windows' refusal
        try:
            _remove_if(path, identity)
        finally:
            self.closed()


def _remove_if(path, identity: tuple[int, int]) -> None:
    """Delete `path` if it is the file `identity` names, unless Windows refuses (another handle
    has it open: PermissionError) or it is gone: both leave it to whoever has it. Any other
    failure leaves it too: the next holder takes it as it is."""
    try:
        now = os.lstat(str(path))
        if (now.st_dev, now.st_ino) == identity:
            os.remove(str(path))
    except OSError:
        pass


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


class ReplacedWhileOpening(OSError):
    """Where the OS lacks O_NOFOLLOW: the path no longer named the file just opened (removed,
    or replaced by another file or a link). An ELOOP as before; a removing lock (core.files.folder_lock)
    takes it as its file having been removed by its last holder, and tries again."""


def open_nofollow(path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a link in the last component: O_NOFOLLOW where the OS has it
    (OSError ELOOP on a link, as the OS gives), else an lstat before (a link there: ELOOP) and,
    after the open, an fstat and an lstat that must name the same regular file
    (ReplacedWhileOpening, an ELOOP, when they do not: a link planted in between, or the file
    removed or replaced; a file replaced before the open by another regular one is the one
    opened, which is no link)."""
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
    except FileNotFoundError:
        os.close(fd)
        raise ReplacedWhileOpening(errno.ELOOP, "was removed while being opened", path) from None
    except OSError:
        os.close(fd)
        raise
    if stat.S_ISLNK(now.st_mode):
        os.close(fd)
        raise OSError(errno.ELOOP, "is a symbolic link", path)
    if (now.st_dev, now.st_ino) != (after.st_dev, after.st_ino):
        os.close(fd)
        raise ReplacedWhileOpening(errno.ELOOP, "was replaced while being opened", path)
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


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity where the platform has one (Linux), else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


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
