"""One writer per output folder (a training run's --out, an experiment's --out).

The lock is an OS lock (flock) on `.<name>.writer` beside the folder, not inside it: a
checkpoint replaces the whole folder by a fresh copy, which would take a lock file inside with
it. The OS drops the lock when its process dies (kill -9 included), so a stale file never blocks
anyone; while held, the file names the holder (pid, host, start time) for the refusal message.
The file is opened without following a link (O_NOFOLLOW), so it never writes anywhere else.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import stat
import time
from pathlib import Path

from core.errors import EncoderscopeError, settings_fix

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_HELD: dict[str, int] = {}     # lock file -> how many locks of this process hold it


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
        self._fd: int | None = None
        self._nested = False

    def acquire(self) -> OutputFolderLock:
        """Take the lock; an experiment's command and its runs share one process's lock."""
        if self._fd is not None or self._nested:
            return self
        if _HELD.get(str(self.path)):
            _HELD[str(self.path)] += 1
            self._nested = True
            return self
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | NOFOLLOW, 0o644)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise FolderBusy(f"{self.path} (the lock of the output folder {self.folder}) is a "
                                 "symbolic link; nothing was written: remove it and run again") from None
            raise FolderBusy(f"cannot lock the output folder {self.folder}: {e.strerror} "
                             f"({self.path})") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise FolderBusy(f"{self.path} (the lock of the output folder {self.folder}) is not "
                                 "a regular file: remove it and run again")
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_holder(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise FolderBusy(f"the output folder {self.folder} is being written by "
                                 f"{describe(holder)}; one writer per folder: wait until it has "
                                 "finished, or choose another output folder", holder,
                                 fix=settings_fix(out=None)) from None
            raise FolderBusy(f"cannot lock the output folder {self.folder}: {e.strerror}") from None
        except BaseException:
            os.close(fd)
            raise
        try:
            record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                      "what": self.what}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(record).encode(), 0)
        except OSError:
            pass     # held all the same (a full disk); only the holder's name is missing
        self._fd = fd
        _HELD[str(self.path)] = 1
        return self

    def release(self) -> None:
        if self._nested:
            _HELD[str(self.path)] -= 1
            self._nested = False
            return
        if self._fd is None:
            return
        _HELD.pop(str(self.path), None)
        try:
            try:
                os.ftruncate(self._fd, 0)
            except OSError:
                pass
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

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


def _read_holder(fd: int) -> dict:
    try:
        raw = os.pread(fd, 4096, 0)
        d = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}
