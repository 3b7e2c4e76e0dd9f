"""One writer at a time, by an OS lock on a file that names its holder: ExclusiveFile,
which the store's lock builds on too (index/store/durability.py), and one writer per output folder
(a training run's --out, an experiment's --out).

The output folder's lock is on `.<name>.writer` beside the folder, not inside it: a checkpoint
replaces the whole folder by a fresh copy, which would take a lock file inside with it. Its
holder removes it when done, so nothing is left beside the folder. The OS drops the lock when
its process dies (kill -9 included), so a stale file never blocks anyone (the next run takes
it, then removes it); while held, the file names the holder (pid, host, start time) for the
refusal message. The file is opened without following a link (O_NOFOLLOW, or checked where the
OS lacks it), so it never writes anywhere else. The OS lock itself is core.files.platform_os's (flock
on Linux and macOS, a byte lock on Windows; what each guarantees is said there).
"""
from __future__ import annotations

import errno
import json
import os
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path

from core.errors import EncoderscopeError, settings_fix
from core.files import platform_os

_HELD: dict[str, int] = {}     # lock file -> how many locks of this process hold it
_RETRIES = 100                 # tries to lock the file at the path while holders come and go


class LockBusy(Exception):
    """Another process holds the lock; `record` is what it wrote in the file (maybe empty)."""

    def __init__(self, record: bytes):
        super().__init__("held by another process")
        self.record = record


class NotRegularFile(Exception):
    """Something other than a regular file (a folder, a FIFO) is where the lock file belongs."""


class ExclusiveFile:
    """An exclusive, non-blocking OS lock (core.files.platform_os.file_lock) on one file, which names
    its holder.

    The OS drops the lock when its process dies (kill -9 included), so a stale file never
    blocks anyone. `open_fd(path, flags, mode)` opens the file (default: without following a
    link); its OSError, NotRegularFile and LockBusy are for the caller to word. Writing the
    holder's record is best effort: a full disk must not turn taking the lock into an error.

    With `remove`, release deletes the file (nothing is left beside an output folder). A lock
    counts only if, once taken, the path still names the file locked: else its last holder
    removed it in between, and whoever locked that old file goes on to the new one.
    """

    def __init__(self, path, open_fd: Callable[[str, int, int], int] | None = None,
                 remove: bool = False):
        self.path = Path(path)
        self._open = open_fd or platform_os.open_nofollow
        self._remove = remove
        self._lock = platform_os.file_lock()
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self, record: bytes) -> None:
        if self._fd is not None:
            return
        for _ in range(_RETRIES):
            fd = self._locked_fd()
            if fd is not None:
                break
        else:          # the file changed under every try: others keep taking it
            raise LockBusy(b"")
        try:
            platform_os.write_start(fd, record)
        except OSError:
            pass     # held all the same; only the holder's name is missing
        self._fd = fd

    def _locked_fd(self) -> int | None:
        """The file opened and locked, or None when it was not the file at the path any more
        once opened or locked (its last holder removed it in between: the caller tries again)."""
        if self._remove:
            self._lock.opening(self.path)
        try:
            fd = self._open(str(self.path), os.O_RDWR | os.O_CREAT | platform_os.NONBLOCK, 0o644)
        except platform_os.ReplacedWhileOpening:
            self._lock.closed()
            return None
        except BaseException:
            self._lock.closed()
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise NotRegularFile(str(self.path))
            taken = self._lock.try_lock(fd)
            current = taken and _names(self.path, fd)
        except BaseException:
            _close_quietly(fd)
            self._lock.closed()
            raise
        if taken and not current:
            try:
                self._lock.unlock(fd)
            finally:
                os.close(fd)
                self._lock.closed()
            return None
        if not taken:
            held_by = _read(fd)
            os.close(fd)
            self._lock.closed()
            raise LockBusy(held_by)
        return fd

    def release(self) -> None:
        """Give the lock back, the holder's record emptied first (a reader sees no holder);
        with `remove`, the file too: unlinked while still held where the OS allows it (flock),
        else after closing, unless another process has it open (Windows)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            mine = os.fstat(fd)
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            if self._remove and self._lock.removes_held_file and _names(self.path, fd):
                _unlink_quietly(self.path)
            self._lock.unlock(fd)
        finally:
            os.close(fd)
        if self._remove and not self._lock.removes_held_file:
            self._lock.remove_closed(self.path, (mine.st_dev, mine.st_ino))
        self._lock.closed()


def _names(path: Path, fd: int) -> bool:
    """Whether `path` is still the file open as `fd` (not removed, not replaced)."""
    try:
        now = os.lstat(path)
    except OSError:          # gone (or unreadable: not known to be it)
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass       # left for the next holder, who takes it as it is and removes it


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _read(fd: int) -> bytes:
    try:
        return platform_os.read_start(fd)
    except OSError:
        return b""


class FolderBusy(EncoderscopeError):
    """Another process writes the output folder; `holder` is what it recorded."""

    def __init__(self, message: str, holder: dict | None = None, fix: dict | None = None):
        super().__init__(message, fix=fix)
        self.holder = holder or {}


def lock_path(folder) -> Path:
    folder = Path(folder).expanduser().absolute()
    return folder.parent / f".{folder.name}.writer"


class OutputFolderLock:
    """`with OutputFolderLock(out, "train"):` -- FolderBusy when another process holds it."""

    def __init__(self, folder, what: str = "a run"):
        self.folder = Path(folder).expanduser()
        self.path = lock_path(self.folder)
        self.what = what
        self._file = ExclusiveFile(self.path, remove=True)
        self._nested = False

    def acquire(self) -> OutputFolderLock:
        """Take the lock; an experiment's command and its runs share one process's lock."""
        if self._file.held or self._nested:
            return self
        if _HELD.get(str(self.path)):
            _HELD[str(self.path)] += 1
            self._nested = True
            return self
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                  "what": self.what}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file.acquire(json.dumps(record).encode())
        except LockBusy as e:
            holder = _holder(e.record)
            raise FolderBusy(f"the output folder {self.folder} is being written by "
                             f"{describe(holder)}; one writer per folder: wait until it has "
                             "finished, or choose another output folder", holder,
                             fix=settings_fix(out=None)) from None
        except NotRegularFile:
            raise FolderBusy(f"{self.path} (the lock of the output folder {self.folder}) is not "
                             "a regular file: remove it and run again") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise FolderBusy(f"{self.path} (the lock of the output folder {self.folder}) is a "
                                 "symbolic link; nothing was written: remove it and run again") from None
            raise FolderBusy(f"cannot lock the output folder {self.folder}: {e.strerror} "
                             f"({self.path})") from None
        _HELD[str(self.path)] = 1
        return self

    def release(self) -> None:
        if self._nested:
            _HELD[str(self.path)] -= 1
            self._nested = False
            return
        if not self._file.held:
            return
        _HELD.pop(str(self.path), None)
        self._file.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def describe(holder: dict) -> str:
    if not holder.get("pid"):
        return "another process"
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("started", 0)))
    what = f"`encoderscope {holder['what']}`, " if holder.get("what") else ""
    return f"{what}process {holder['pid']} on {holder.get('host', '?')}, started {when}"


def _holder(raw: bytes) -> dict:
    try:
        d = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        return d if isinstance(d, dict) else {}
    except ValueError:
        return {}
