"""A FAISS store folder whose creation was cut off (kill -9, power loss) before its first commit.

Creating a store opens store.db (SQLite makes an empty file), switches it to WAL (one header
page, no tables) and then commits the tables and settings in one transaction. A process killed
between those steps leaves a folder with a lock, a store.db that is empty, a header page or
less, and no table, and no manifest or index snapshot: nothing was ever stored in it. Such a
folder is not a damaged store but no store yet, and the next ingest creates it in place.

The check honours SQLite's WAL: a database whose tables are only in its write-ahead log (a
store killed before its first checkpoint) has tables when SQLite opens it, so it is never
taken for a torn one.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from core.files.platform_os import open_nofollow, pid_alive
from index.faiss.manifest import MANIFEST_NAME
from index.faiss.sentences import DB_NAME, SIDE_FILES
from index.store.errors import StoreError, StoreNotFound
from index.store.files import is_link, remove_own

SQLITE_MAGIC = b"SQLite format 3\x00"
SQLITE_HEADER = 100        # bytes of the database header; a shorter file is cut inside it


def torn_at_creation(folder) -> bool:
    """Whether `folder` holds only the remains of a store creation that never committed."""
    folder = Path(folder)
    db = folder / DB_NAME
    try:
        if is_link(db) or not db.is_file():
            return False
        if (folder / MANIFEST_NAME).exists() or any(folder.glob("index-*.faiss")):
            return False
        size = db.stat().st_size
    except OSError:
        return False
    wal = db.with_name(DB_NAME + "-wal")
    wal_size = wal.stat().st_size if wal.is_file() else 0
    if size < SQLITE_HEADER and wal_size == 0:
        with open(db, "rb") as f:
            head = f.read(SQLITE_HEADER)
        # Empty, or the first bytes of the header SQLite was writing: no table was ever there.
        return SQLITE_MAGIC.startswith(head[:len(SQLITE_MAGIC)])
    try:
        conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=5)
        try:
            tables = conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return False       # not readable as SQLite: the store's own checks say what it is
    return tables == 0


def being_created(folder) -> int | None:
    """The pid of another live process recorded as the folder's writer (a creation still under
    way), else None. Read, never locked: probing the lock could make a real writer's
    non-blocking take of it fail."""
    try:
        fd = open_nofollow(Path(folder) / "lock", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.read(fd, 32).decode("ascii", "replace").strip()
    except OSError:
        return None
    finally:
        os.close(fd)
    if not raw.isdigit() or int(raw) == os.getpid():
        return None
    return int(raw) if pid_alive(int(raw)) else None


def clear_torn(folder) -> None:
    """Remove a torn creation's database files (the caller holds the writer lock and has
    checked torn_at_creation under it), so the store is created afresh in their place."""
    db = Path(folder) / DB_NAME
    for path in (db.with_name(DB_NAME + s) for s in SIDE_FILES):
        remove_own(path)
    remove_own(db)


def refuse_torn(folder) -> None:
    """For a command that does not create: StoreNotFound (the next ingest creates the store)
    when the folder holds a torn creation, a StoreError when that creation is still running."""
    if not torn_at_creation(folder):
        return
    pid = being_created(folder)
    if pid is not None:
        raise StoreError(f"the store at {folder} is being created by process {pid} (its first "
                         "ingest has not stored anything yet); try again when it has finished")
    raise StoreNotFound(f"the store at {folder} was left half-made by an interrupted first ingest "
                        "(its creation never completed; it holds no sentences)", location=str(folder))
