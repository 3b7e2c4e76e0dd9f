"""The one place a store's own files are opened for writing, created, touched or removed.

A store owns a fixed set of names in its folder (the lock, the sentence database and SQLite's
side files, the manifest, the index snapshots, the whitening, the markers). None of them may be
a symbolic link: writing through one would truncate or overwrite a file outside the store (the
lock is truncated when taken; SQLite rewrites its WAL). So every store open checks its files
with lstat (`refuse_links`), and every write here opens without following a link
(core.files.platform_os.open_nofollow: O_NOFOLLOW, or an lstat/fstat check where the OS lacks it), which
also closes the gap between that check and the open. The store folder itself may be a link: it is the user's
choice of where the store lives; its files are what the store writes.
"""
from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from core.files.platform_os import open_nofollow
from index.store.errors import StoreError

# Names a store owns in its folder; `index-*.faiss` snapshots are matched by pattern.
FAISS_FILES = ("lock", "store.db", "store.db-wal", "store.db-shm", "store.db-journal",
               "manifest.json", "whitening.safetensors", "incomplete-migrate")
FAISS_PATTERNS = ("index-*.faiss", "vectors-*.f32")
LITE_FILES = ("lock", "encoderscope-milvus.json", "unclean", "incomplete-migrate", "milvus.db")


class StoreFileIsLink(StoreError):
    """A file the store owns is a symbolic link; `path` names it."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            target = f" (to {os.readlink(path)})"
        except OSError:
            target = ""
        super().__init__(
            f"the store file {path} is a symbolic link{target}; a store never writes through "
            "a link, so nothing was changed: remove the link (or put a copy of the file it "
            "points to in its place) and run it again")


def refuse_links(folder, names=FAISS_FILES, patterns=FAISS_PATTERNS) -> None:
    """StoreFileIsLink for the first of the store's own files in `folder` that is a link."""
    folder = Path(folder)
    candidates = [folder / n for n in names]
    for pattern in patterns:
        try:
            candidates += sorted(folder.glob(pattern))
        except OSError:
            pass
    for path in candidates:
        if is_link(path):
            raise StoreFileIsLink(path)


def check_readable(folder) -> None:
    """StoreError when the store folder exists but this user may not look inside it."""
    try:
        os.listdir(folder)
    except PermissionError:
        raise StoreError(f"cannot read the store folder {folder}: permission denied; ask its "
                         "owner for read access, or open a copy you can read") from None
    except OSError:
        pass      # missing, or not a folder: the caller says so


def is_link(path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def open_own(path, flags: int, mode: int = 0o644) -> int:
    """os.open of a store file that never follows a link in its last component (O_NOFOLLOW):
    a link there is StoreFileIsLink, other OS errors pass through."""
    try:
        return open_nofollow(path, flags, mode)
    except OSError as e:
        if e.errno == errno.ELOOP and is_link(path):
            raise StoreFileIsLink(path) from None
        raise


def touch_own(path) -> None:
    """Create the store file `path` if it is missing (a marker); never through a link."""
    os.close(open_own(path, os.O_WRONLY | os.O_CREAT))


def remove_own(path) -> None:
    """Remove the store file `path` if it is there. A link is removed as the link it is
    (unlink never follows), but a name the store does not own is never passed here."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def kind_of(path) -> str:
    """What is at `path`, in words, for a message: "a plain file", "a FIFO", "a device"..."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "not a folder"
    for test, name in ((stat.S_ISREG, "a plain file"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device")):
        if test(mode):
            return name
    return "not a folder"


def why_no_new_store(path) -> str | None:
    """Why a store could not be made at `path`, where none is (for "no store at X" advice): it is
    a file, or a folder of other files; None where one can be (nothing there, or an empty folder)."""
    path = Path(path)
    if not os.path.exists(path):      # nothing there, or a link to a place not made yet: ingest makes it
        return None
    if not path.is_dir():
        return f"is {kind_of(path)}, not a store folder"
    try:
        others = sorted(p.name for p in path.iterdir()
                        if not p.name.startswith(".") and p.name not in FAISS_FILES + LITE_FILES)
    except OSError:
        return None
    if not others:
        return None
    shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
    return f"holds other files ({shown}) and no store"
