"""Crash-safe file writes and the single-writer lock.

`atomic_write` writes to a temporary file in the same folder, fsyncs it, renames it over the
target with os.replace (atomic on POSIX) and fsyncs the folder, so a reader or a crash sees
either the old file or the new one, never a mix.
"""
from __future__ import annotations

import errno
import fcntl
import os
import secrets
from pathlib import Path

from .errors import StoreLocked


def fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, chunks) -> int:
    """Write `chunks` (bytes or an iterable of bytes-like objects) to `path` atomically.

    Returns the number of bytes written.
    """
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        chunks = [chunks]

    def fill(tmp):
        with open(tmp, "wb") as f:
            for chunk in chunks:
                f.write(chunk)

    return atomic_write_with(path, fill)


def remove_stale_temps(folder: Path) -> None:
    """Temporary files left by a crash in the middle of atomic_write."""
    for p in Path(folder).glob(".*.tmp"):
        try:
            p.unlink()
        except OSError:
            pass


class WriterLock:
    """An exclusive, non-blocking OS lock (flock) on `<store>/lock`; the file names the holder.

    The OS releases the lock when the process dies (kill -9 included), so a stale lock file
    never blocks anyone.
    """

    def __init__(self, folder: Path):
        self.path = Path(folder) / "lock"
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "WriterLock":
        if self._fd is not None:
            return self
        fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_pid(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f"process {holder}" if holder else "another process"
                raise StoreLocked(
                    f"the store {self.path.parent} is being written by {who}; "
                    "wait for it to finish (only one writer at a time) and try again",
                    pid=holder) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _read_pid(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        raw = os.read(fd, 32).decode("ascii", "replace").strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def _new_temp(path: Path) -> str:
    """An empty, new `.<name>.<random>.tmp` beside `path`, created with mode 0o666 less the
    umask like any other file (tempfile.mkstemp's 0o600 would leave the index and manifest
    unreadable to the people who can read store.db)."""
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {path}")


def atomic_write_with(path: Path, fill) -> int:
    """Like atomic_write, but `fill(tmp_path)` writes the temporary file itself (e.g. a library
    writer that wants a file name). Returns the size of the final file."""
    path = Path(path)
    tmp = _new_temp(path)
    try:
        fill(tmp)
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        size = os.path.getsize(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(path.parent)
    return size
