"""Crash-safe file writes: the one implementation in the tree (the store, exports, settings).

`atomic_write_with(path, fill)` lets `fill(tmp)` write a temporary file beside `path`, fsyncs
it, renames it over `path` with os.replace (atomic on POSIX) and fsyncs the folder, so a reader
or a crash sees either the old file or the new one, never a mix; a failed or cancelled write
leaves no temporary file and the old file untouched.
"""
from __future__ import annotations

import errno
import os
import secrets
from contextlib import contextmanager
from pathlib import Path

from core.files import platform_os

TEMP_GLOB = ".*.tmp"   # the temporary files' names: .<name>.<random>.tmp


def fsync_dir(folder: Path) -> None:
    """Make a rename in `folder` durable (a no-op where folders cannot be opened)."""
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


def new_temp(path: Path) -> str:
    """An empty, new `.<name>.<random>.tmp` beside `path`, created with mode 0o666 less the
    umask like any other file (tempfile.mkstemp's 0o600 would leave it unreadable to the people
    who can read its neighbours)."""
    path = Path(path)
    for _ in range(100):
        tmp = str(path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {path}")


def atomic_write_with(path, fill, durable: bool = True) -> int:
    """`fill(tmp_path)` writes the temporary file (e.g. a library writer that wants a file name);
    it then replaces `path`. durable=False skips the fsyncs (exports that need no crash
    guarantee, only no half-written file). Returns the size of the final file."""
    path = Path(path)
    tmp = new_temp(path)
    try:
        fill(tmp)
        if durable:
            platform_os.fsync_file(tmp)
        size = os.path.getsize(tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(path.parent)
    return size


def atomic_write(path, chunks, durable: bool = True) -> int:
    """Write `chunks` (bytes or an iterable of bytes-like objects) to `path` atomically.
    Returns the number of bytes written."""
    if isinstance(chunks, (bytes, bytearray, memoryview)):
        chunks = [chunks]

    def fill(tmp):
        with open(tmp, "wb") as f:
            f.writelines(chunks)

    return atomic_write_with(path, fill, durable)


def remove_stale_temps(folder: Path) -> None:
    """Temporary files left by a crash in the middle of an atomic write."""
    for p in Path(folder).glob(TEMP_GLOB):
        try:
            p.unlink()
        except OSError:
            pass


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (/proc), else by
    setting it and back."""
    return platform_os.current_umask()


def readable_as_umask_allows(path) -> None:
    """Give a file a library wrote with mode 0o600 (safetensors does) the mode any other new
    file gets, 0o666 less the umask: readable by the group and others where the user allows."""
    os.chmod(path, 0o666 & ~current_umask())


@contextmanager
def writing(path):
    """Around the writing of one file: its failure is an OSError that names `path` (an OSError
    raised by write() or close() names none, safetensors' own error is not an OSError), so a
    message can say which file could not be written."""
    try:
        yield
    except OSError as e:
        if e.filename is None:
            e.filename = str(path)
        raise
    except Exception as e:
        if type(e).__name__ != "SafetensorError":
            raise
        text = str(e)
        code = errno.ENOSPC if "No space left" in text or "os error 28" in text else errno.EIO
        raise OSError(code, text, str(path)) from e
