"""The store's file safety: crash-safe writes (core.files.atomic), the single-writer lock, reading
only regular files (a FIFO or a folder in place of a store file must give an error, never a
hang or a traceback), and OS write errors (disk full) turned into one clear StoreWriteFailed.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from core.files.atomic import atomic_write, atomic_write_with, fsync_dir, remove_stale_temps  # noqa: F401
from core.files.folder_lock import ExclusiveFile, LockBusy, NotRegularFile
from core.files.platform_os import BINARY, CLOEXEC, NONBLOCK, process_argv
from index.store.errors import StoreCorrupted, StoreError, StoreLocked, StoreWriteFailed
from index.store.files import open_own

INTACT = "the last saved snapshot and every sentence committed before are intact"


def write_failed(path, e: OSError, what: str = "") -> StoreWriteFailed:
    """One message for an OS error while writing `path`: the disk is full, or which error."""
    code = getattr(e, "errno", None)
    advice = ""
    if code in (errno.ENOSPC, errno.EDQUOT):
        why = "the disk is full (ENOSPC)" if code == errno.ENOSPC else "the disk quota is used up"
        advice = ". Free some space and run it again"
    else:
        name = errno.errorcode.get(code, "") if code else ""
        why = f"{e.strerror or e}" + (f" ({name})" if name else "")
        if code in (errno.EACCES, errno.EPERM, errno.EROFS):
            advice = ". Make the store folder writable and run it again"
    return StoreWriteFailed(f"could not write {what or path}: {why}; {INTACT}{advice}",
                            path=path, errno=code)


def move_aside(path: Path) -> Path | None:
    """Rename something that is not a regular file (a folder, a FIFO) out of a store file's
    way, to `<name>.not-a-file-<n>`; nothing is deleted. Returns the new name, or None."""
    try:
        if not os.path.lexists(path) or stat.S_ISREG(os.stat(path).st_mode):
            return None
    except OSError:
        pass
    for n in range(1, 1000):
        target = path.with_name(f"{path.name}.not-a-file-{n}")
        if not os.path.lexists(target):
            try:
                os.rename(path, target)
            except OSError as e:
                raise write_failed(path, e, f"{path} (moving it out of the way)") from None
            return target
    return None


def check_regular(path: Path, what: str = "store file", remedy: str = "repair") -> bool:
    """True when `path` is a regular file, False when it does not exist; StoreCorrupted when
    something else (a folder, a FIFO, a device) is in its place. remedy: "repair" (repair moves
    it aside and rebuilds what it should hold) or "restore" (its contents are lost)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise StoreCorrupted(f"cannot read the {what} {path}: {e.strerror}", path=path) from None
    if not stat.S_ISREG(st.st_mode):
        advice = "; restore it from a backup" if remedy == "restore" else ""
        raise StoreCorrupted(f"the {what} {path} is not a regular file ({_kind(st.st_mode)})"
                             + advice, path=path, remedy=remedy)
    return True


def read_regular(path: Path, limit: int, what: str = "store file") -> bytes | None:
    """The bytes of a regular file of at most `limit` bytes, or None if it does not exist.

    Opened with O_NONBLOCK (where the OS has it) and checked with fstat before reading, so a FIFO put in its place
    is refused at once instead of blocking the reader forever."""
    try:
        fd = os.open(path, os.O_RDONLY | NONBLOCK | CLOEXEC | BINARY)
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise StoreCorrupted(f"the {what} {path} is not a regular file (a folder)", path=path,
                             remedy="repair") from None
    except OSError as e:
        raise StoreCorrupted(f"cannot read the {what} {path}: {e.strerror}", path=path) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise StoreCorrupted(f"the {what} {path} is not a regular file "
                                 f"({_kind(st.st_mode)})", path=path, remedy="repair")
        if st.st_size > limit:
            raise StoreCorrupted(f"the {what} {path} is {st.st_size:,} bytes, far too big for "
                                 "what it should hold", path=path, remedy="repair")
        with os.fdopen(os.dup(fd), "rb") as f:
            return f.read(limit + 1)
    except OSError as e:
        raise StoreCorrupted(f"cannot read the {what} {path}: {e.strerror}", path=path) from None
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a file"


COMMANDS = ("ingest", "remove", "migrate", "info", "train")


def _words(pid: int) -> list[str] | None:
    argv = process_argv(pid)
    if argv is None:
        return None
    return [os.path.basename(a) for a in argv]


def command_of(pid: int) -> str | None:
    """What a process of this machine runs, as a word: "app" (the Encoderscope app), an
    `encoderscope` command ("ingest", ...), or None when it is something else or gone."""
    words = _words(pid)
    if not words:
        return None
    if "gui" in words or any(w in ("main.py", "app.gui.shell.main") for w in words):
        return "app"
    return next((w for w in words if w in COMMANDS), None)


def describe_holder(pid: int | None) -> str:
    """Which program holds a store, and what to do about it: an app keeps its corpus open
    until it closes, a command until it ends."""
    if not pid:
        return "another process: try again when it has finished"
    words = _words(pid)
    if words is None:
        return f"process {pid}: try again when it has finished"
    command = command_of(pid)
    if command == "app":
        return (f"the Encoderscope app (process {pid}), which keeps its corpus open: close "
                "the corpus or the app and try again")
    if command:
        return (f"`encoderscope {command}` (process {pid}): try again when it has finished")
    shown = " ".join(" ".join(words[:3]).split())[:80]     # one line, whatever argv holds
    return f"process {pid} ({shown}): try again when it has finished"


class WriterLock:
    """The store's single-writer lock: core's ExclusiveFile on `<store>/lock`, opened as a store
    file (never through a link), the holder's pid written in it; refusals worded for a store.

    The OS releases the lock when the process dies (kill -9 included), so a stale lock file
    never blocks anyone.
    """

    def __init__(self, folder: Path):
        self.path = Path(folder) / "lock"
        self._file = ExclusiveFile(self.path, open_own)

    @property
    def held(self) -> bool:
        return self._file.held

    def acquire(self) -> WriterLock:
        try:
            self._file.acquire(f"{os.getpid()}\n".encode())
        except LockBusy as e:
            holder = _pid(e.record)
            raise StoreLocked(f"the store {self.path.parent} is open for writing in "
                              f"{describe_holder(holder)} (only one writer at a time)",
                              pid=holder) from None
        except NotRegularFile:
            raise StoreError(f"cannot lock the store: {self.path} is not a regular file; "
                             "remove it") from None
        except IsADirectoryError:
            raise StoreError(f"cannot lock the store: {self.path} is a folder, not the lock "
                             "file; remove it") from None
        except StoreError:
            raise
        except OSError as e:
            if e.filename is None:            # flock's own failure, not opening the file
                raise StoreError(f"cannot lock the store {self.path.parent}: "
                                 f"{e.strerror}") from None
            raise write_failed(self.path, e, f"the lock file {self.path}") from None
        return self

    def release(self) -> None:
        self._file.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _pid(record: bytes) -> int | None:
    try:
        raw = record[:32].decode("ascii", "replace").strip()
        return int(raw) if raw else None
    except ValueError:
        return None
