"""The sentence database (SQLite): the source of truth for texts, metadata and vectors.

One row per distinct text: id (never reused), text, a 16-byte hash for duplicate detection,
source file, line/row, time added, optional JSON metadata, the float32 vector's slot in the
vector log beside it (index/faiss/vector_log.py; so the FAISS index can always be rebuilt
without the model) and a checksum of the row (id, text, source, row, metadata, slot and a
digest of the vector), so damage inside the files that SQLite's own checks cannot see (a
flipped bit in a text or a vector) is found and named by row id. Rows written before the log
(schema 2) keep their vector in the row, as a BLOB, and are read from there. WAL journal +
synchronous=FULL: a committed transaction survives a crash. A writer's checkpoints (the log
copied into store.db) run on a helper thread, not inside its commits
(index/faiss/wal_checkpoints.py). `generation` counts committed changes; the manifest records
which generation its index snapshot covers. `store_id` (random, set at creation) ties the
manifest and index snapshot to this database.

Databases written before row checksums (schema 1) or the vector log (schema 2) still open; a
writer brings them up to this schema on open (upgrade()): checksums filled in, the slot column
and an empty log added (old rows keep their vectors where they are).
"""
from __future__ import annotations

import errno
import json
import os
import secrets
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path

import numpy as np

from core.files import platform_os
from index.faiss import window_sql
from index.faiss.new_rows import NewRows
from index.faiss.paging import id_pages
from index.faiss.row_checks import (
    CHUNK,
    ROW_COLUMNS,
    RowChecker,
    log_row_checksum_block,
    log_row_checksums,
    row_checksum,
    row_checksums,
)
from index.faiss.row_checks import read_record as _record
from index.faiss.vector_log import HEADER_BYTES, LOG_NAME, VectorLog, log_file_name, vector_digests
from index.faiss.wal_checkpoints import BackgroundCheckpoints
from index.store.durability import INTACT, check_regular
from index.store.errors import StoreCorrupted, StoreError, StoreWriteFailed
from index.store.files import remove_own
from index.store.text_hash import text_hash  # one text hash for both stores

DB_NAME = "store.db"
SIDE_FILES = ("-wal", "-shm", "-journal")   # SQLite's files beside store.db
PAGE_CACHE_KIB = 64 << 10   # SQLite's page cache for this connection (grows only as used)
SCHEMA = """
CREATE TABLE IF NOT EXISTS sentences (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    hash     BLOB NOT NULL UNIQUE,
    text     TEXT NOT NULL,
    source   TEXT,
    row      INTEGER,
    added    REAL NOT NULL,
    meta     TEXT,
    inline_vector BLOB NOT NULL,
    checksum BLOB,
    slot     INTEGER
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
SCHEMA_VERSION = 3     # 1: no checksum column; 2: vectors in the rows (no slot, no log)
NO_VECTOR = b""        # the inline vector of a row whose vector is in the log
LOG_MIN_ROWS = 256     # a transaction of fewer vectors keeps them in their rows
# Schema 3 renames the row's `vector` column to `inline_vector`: code that knows only schema 2
# then fails on the column ("no such column": restore) instead of reading a log row's empty
# vector as damage and setting the row aside, even where no format 3 manifest stops it first.
INLINE, OLD_INLINE = "inline_vector", "vector"
_UNREADABLE = object()
_META_TYPES = {"fingerprint": dict, "dim": int, "index_request": str, "index_params": dict,
               "hnsw_threshold": int, "generation": int, "structural_generation": int,
               "format_version": int, "schema_version": int, "store_id": str,
               "vector_log": dict, "vector_slots": int}
QUICK_CHECK_MAX_BYTES = 256 << 20


def _remove_quietly(path: Path) -> None:
    """Remove a log nobody names, best effort: on Windows a reader may still hold it open
    (the next writer's open removes it then); the commit that retired it has landed."""
    try:
        remove_own(path)
    except OSError:
        pass


def new_store_id() -> str:
    return secrets.token_hex(16)


def on_read_only_media(path: Path) -> bool:
    """Neither the file nor its folder can be written (a read-only mount, chattr +i, no
    permission): nobody can be writing it either."""
    return not (os.access(path.parent, os.W_OK)
                and (not path.exists() or os.access(path, os.W_OK)))


def mounted_read_only(folder: Path) -> bool:
    """Whether the file system holding `folder` is mounted read-only (not merely unwritable
    to this user)."""
    return platform_os.mounted_read_only(folder)


class SentenceDB:
    def __init__(self, folder: Path, readonly: bool = False):
        self.path = Path(folder) / DB_NAME
        self.readonly = readonly
        # SQLite would block forever reading a FIFO put in place of one of its files. Its
        # side files hold nothing when they are not files: repair moves them aside.
        check_regular(self.path, "sentence database", remedy="restore")
        wal = self.path.with_name(DB_NAME + "-wal")
        try:
            check_regular(wal, "write-ahead log")
        except StoreCorrupted as e:    # it held the commits since the last checkpoint
            raise StoreCorrupted(f"{e}: the sentences committed since the last checkpoint are "
                                 "lost; move it out of the way to open the rest of the store "
                                 "(repairing does that), or restore the store from a backup",
                                 path=wal) from None
        for suffix in SIDE_FILES[1:]:  # -shm and -journal hold nothing SQLite cannot rebuild
            check_regular(self.path.with_name(DB_NAME + suffix), "sentence database file")
        immutable = on_read_only_media(self.path)
        pending = wal.is_file() and wal.stat().st_size > 0
        # No write permission on a writable file system, with commits in the WAL (its owner is
        # writing, or was cut off): SQLite reads them through the shared-memory file the writer
        # keeps, as a plain read-only connection.
        shared = immutable and pending and not mounted_read_only(self.path.parent)
        if immutable and pending and not shared:
            raise StoreError(f"the store at {self.path.parent} is on read-only media and was not "
                             f"closed cleanly: its last commits are still in {wal.name}, which "
                             "only a writer can fold in; copy the store folder to writable "
                             "storage and open it there")
        try:
            # Read-only media (a shared corpus, a read-only mount, chattr +i): SQLite cannot
            # make the WAL's shared-memory file, so the cleanly closed database is opened as
            # the immutable file it is.
            uri = self.path.resolve().as_uri()
            target = f"{uri}?mode=ro" if shared else f"{uri}?immutable=1" if immutable else str(self.path)
            self.conn = sqlite3.connect(target, isolation_level=None, timeout=30,
                                        check_same_thread=False, uri=immutable)
            self.immutable = immutable and not shared
            self.conn.execute("PRAGMA busy_timeout=30000")
            # synchronous=FULL: a commit is on disk before it returns (WAL is set at create).
            self.conn.execute("PRAGMA synchronous=FULL")
            # A window's rows (1.6 kB each at 384-d) fit in the page cache: SQLite's 2 MB default
            # spills them mid-transaction and inserts cost ~1.7x the CPU (docs/benchmarks.md).
            # release_cache() after each commit keeps it at a window's pages, not the store's.
            self.conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
            if shared:
                self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as e:
            if not shared:
                raise self._corrupt(e) from None
            raise StoreError(
                f"you may read the store at {self.path.parent} but not write to it, and its last "
                f"commits are still in {wal.name} (its owner is writing it, or was cut off); reading "
                f"them needs the shared-memory file beside it, which SQLite could not use ({e}): ask "
                "the store's owner for write permission on the folder (a shared group), or open it "
                "once its writer has closed it") from None
        except sqlite3.DatabaseError as e:
            raise self._corrupt(e) from None

    def _corrupt(self, e) -> StoreCorrupted:
        return StoreCorrupted(
            f"the sentence database {self.path} is damaged or not an SQLite database ({e}); "
            "restore it from a backup or start a new store", path=self.path, remedy="restore")

    # -- transactions -----------------------------------------------------------------------
    def _q(self, sql, args=(), many: bool = False):
        """conn.execute (many: executemany, args a list of rows) with SQLite's errors worded."""
        try:
            return (self.conn.executemany if many else self.conn.execute)(sql, args)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise
        except sqlite3.OperationalError as e:
            raise self._operational(e) from None
        except sqlite3.DatabaseError as e:
            raise self._corrupt(e) from None

    def _operational(self, e) -> StoreError:
        msg = str(e)
        if "no such table" in msg or "no such column" in msg or "malformed" in msg \
                or "not a database" in msg:
            return self._corrupt(e)
        if "disk is full" in msg or "disk I/O error" in msg:
            code = errno.ENOSPC if "full" in msg else errno.EIO
            why = "the disk is full (ENOSPC)" if "full" in msg else "a disk I/O error (EIO)"
            return StoreWriteFailed(f"could not write {self.path}: {why}; {INTACT}. Free some "
                                    "space and run it again", path=self.path, errno=code)
        if "readonly" in msg or "read-only" in msg:
            return StoreWriteFailed(f"could not write {self.path}: the file or its folder is "
                                    f"read-only; {INTACT}", path=self.path, errno=errno.EROFS)
        return StoreError(f"{self.path}: {msg}")

    def begin(self):
        if self._checkpoints is not None:
            self._checkpoints.before_write()      # the log then restarts: it stays one window long
        self._q("BEGIN IMMEDIATE")

    def commit(self):
        self._q("COMMIT")
        if self._log is not None:
            self._log.commit()
        self._end_log_switch(committed=True)
        if self._checkpoints is not None:
            self._checkpoints.after_commit()

    _checkpoints: BackgroundCheckpoints | None = None

    def checkpoint_in_background(self) -> None:
        """The writer's WAL checkpoints run on a helper thread (index/faiss/wal_checkpoints.py),
        not inside its COMMITs."""
        if self._checkpoints is None and not self.immutable and not self.readonly:
            self._checkpoints = BackgroundCheckpoints(self.conn, self.path)

    def release_cache(self) -> None:
        """Free the page cache's unused pages (after a window's commit): the writer's memory
        stays at one window's pages however large the store grows."""
        try:
            self.conn.execute("PRAGMA shrink_memory")
        except sqlite3.Error:
            pass

    def rollback(self):
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass
        if self._log is not None:
            self._log.rollback()
        self._end_log_switch(committed=False)

    @contextmanager
    def read_snapshot(self, enabled: bool = True):
        """One consistent view of the database (a read transaction) while a writer in another
        process may be committing."""
        if not enabled:
            yield self
            return
        self._q("BEGIN")
        try:
            yield self
        finally:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error:
                pass

    def transaction(self):
        db = self

        class _Tx:
            def __enter__(self_):
                db.begin()
                return db

            def __exit__(self_, exc_type, exc, tb):
                if exc_type is None:
                    db.commit()
                else:
                    db.rollback()
                return False
        return _Tx()

    # -- schema / meta ----------------------------------------------------------------------
    def initialised(self) -> bool:
        row = self._q("SELECT name FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        return row is not None and self.get_meta("fingerprint") is not None

    def create(self, meta: dict) -> None:
        self._q("PRAGMA journal_mode=WAL")
        store_id = new_store_id()
        with self.transaction():
            for stmt in SCHEMA.strip().split(";"):
                if stmt.strip():
                    self._q(stmt)
            for k, v in {**meta, "store_id": store_id, "schema_version": SCHEMA_VERSION}.items():
                self.set_meta(k, v)
            self._has_checksums = self._has_slots = True
            self._log_writer = True       # the log itself comes with the first large window

    @property
    def has_checksums(self) -> bool:
        """Whether the rows carry checksums (schema 2); a schema 1 database until upgrade()."""
        if not getattr(self, "_has_checksums", None):    # only "yes" is kept: see _has_column
            self._has_checksums = self._has_column("checksum")
        return self._has_checksums

    def _has_column(self, name: str) -> bool:
        """Whether the table of sentences has this column now. A column once added stays, but
        until then a writer in another process may upgrade the database under a reader: the
        reader asks again rather than read the writer's new rows as an older schema's."""
        return name in {r[1] for r in self._q("PRAGMA table_info(sentences)")}

    @property
    def store_id(self) -> str | None:
        return self.get_meta("store_id")

    @property
    def has_slots(self) -> bool:
        """Whether rows may name a slot in the vector log (schema 3)."""
        if not getattr(self, "_has_slots", None):        # only "yes" is kept: see _has_column
            self._has_slots = self._has_column("slot")
        return self._has_slots

    @property
    def vcol(self) -> str:
        """The column of a row's own vector: `inline_vector` (schema 3), `vector` before."""
        return INLINE if self.has_slots else OLD_INLINE

    def needs_upgrade(self) -> bool:
        if not self.has_checksums or self.store_id is None or not self.has_slots:
            return True
        return self._q("SELECT 1 FROM sentences WHERE checksum IS NULL LIMIT 1").fetchone() is not None

    def upgrade(self, batch: int = 5000) -> None:
        """Bring a schema 1 or 2 database (or rows an older writer added) up to this schema:
        add the checksum column, checksum every row without one, give the store an id, add the
        slot column (old rows keep their vectors in the row; the log comes with the first
        large window)."""
        with self.transaction():
            if not self.has_checksums:
                self._q("ALTER TABLE sentences ADD COLUMN checksum BLOB")
                self._has_checksums = True
            if self.store_id is None:
                self.set_meta("store_id", new_store_id())
            if not self.has_slots:
                self._q("ALTER TABLE sentences ADD COLUMN slot INTEGER")
                self._q(f"ALTER TABLE sentences RENAME COLUMN {OLD_INLINE} TO {INLINE}")
                self._has_slots = True
            self.set_meta("schema_version", SCHEMA_VERSION)
            while True:
                rows = self._q(f"SELECT {ROW_COLUMNS}, {self.vcol} FROM sentences WHERE checksum IS NULL "
                               "LIMIT ?", (batch,)).fetchall()
                if not rows:
                    break
                self.conn.executemany(
                    "UPDATE sentences SET checksum=? WHERE id=?",
                    [(row_checksum(r[0], r[1], r[2], r[3], r[5], r[6]), r[0]) for r in rows])

    def check(self, full: bool = False, scan_limit: int = QUICK_CHECK_MAX_BYTES) -> None:
        """Raise StoreCorrupted unless SQLite's own integrity check passes.

        quick_check reads every page: done on open for databases up to `scan_limit` bytes;
        bigger ones are checked page by page as they are read (errors still become
        StoreCorrupted), so opening a big store for one search stays fast."""
        size = self.path.stat().st_size if self.path.exists() else 0
        if full or size <= scan_limit:
            try:      # the check's rows are read as fetched: a damaged page raises here too
                row = self._q("PRAGMA integrity_check" if full else "PRAGMA quick_check").fetchone()
            except sqlite3.DatabaseError as e:
                raise self._corrupt(e) from None
            if row is None or row[0] != "ok":
                raise self._corrupt(row[0] if row else "integrity check failed")
        names = {r[0] for r in self._q("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"sentences", "meta"} <= names:
            raise StoreCorrupted(f"{self.path} is an SQLite database but not an Encoderscope store",
                                 path=self.path)

    def get_meta(self, key, default=None):
        """A setting; StoreCorrupted when its stored value is not readable as what it should be."""
        row = self._q("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        if not row:
            return default
        try:
            value = json.loads(row[0])
        except (ValueError, TypeError, RecursionError):
            value = _UNREADABLE
        want = _META_TYPES.get(key)
        if value is _UNREADABLE or (want is not None and (
                not isinstance(value, want) or (want is int and isinstance(value, bool)))):
            raise StoreCorrupted(f"the sentence database {self.path} is damaged: its setting "
                                 f"{key!r} is unreadable; restore it from a backup",
                                 path=self.path, remedy="restore")
        return value

    def set_meta(self, key, value) -> None:
        self._q("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    @property
    def generation(self) -> int:
        return int(self.get_meta("generation", 0))

    def bump(self, structural: bool = False) -> int:
        """Call inside a transaction: one more committed change."""
        g = self.generation + 1
        self.set_meta("generation", g)
        if structural:  # updates/clear/rebuild: a snapshot can't be caught up by add + remove
            self.set_meta("structural_generation", g)
        return g

    # -- rows -------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self._q("SELECT COUNT(*) FROM sentences").fetchone()[0])

    def max_id(self) -> int:
        return int(self._q("SELECT COALESCE(MAX(id), 0) FROM sentences").fetchone()[0])

    def all_ids(self) -> np.ndarray:
        return np.fromiter((r[0] for r in self._q("SELECT id FROM sentences ORDER BY id")),
                           dtype=np.int64)

    def existing_ids(self, hashes) -> dict[bytes, int]:
        """hash -> id of the given hashes that are stored: one query (index/faiss/window_sql.py)."""
        hashes = list(hashes)
        if not hashes:
            return {}
        return {h: int(id_) for h, id_ in self._q(window_sql.FIND_HASHES, (window_sql.hash_block(hashes), len(hashes)))}

    def id_of(self, text: str) -> int | None:
        row = self._q("SELECT id FROM sentences WHERE hash=?", (text_hash(text),)).fetchone()
        return int(row[0]) if row else None

    def highest_id_ever(self) -> int:
        """The highest id the table ever had (sqlite_sequence: removed rows' too), 0 for none."""
        return int(self._q(
            "SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name='sentences'), 0), "
            "COALESCE((SELECT MAX(id) FROM sentences), 0))").fetchone()[0])

    def insert(self, rows: NewRows, ids=None) -> list[int]:
        """Write new rows (index/faiss/new_rows.py). Inside a transaction (BEGIN IMMEDIATE: no
        other writer), so the new ids are known before the rows are written, each row's
        checksum goes in with it, and the rows go in as one statement.
        ids: keep these (a migrate copy keeps its source's ids), each past every id the table
        ever had: ids are never reused."""
        n = len(rows)
        if not n:
            return []
        ids = self.new_ids(n, ids)
        added = time.time()
        log = self._log_for(n, rows.vectors.shape[1])
        if log is not None:
            vectors = np.ascontiguousarray(rows.vectors, dtype=np.float32)
            first = log.reserve(n)
            # The vectors go to disk (write + fsync: no GIL) while this thread builds and
            # inserts the rows naming them; both are done before the COMMIT.
            writing = self._log_writer_thread().submit(log.write, first, vectors)
            try:
                slots = range(first, first + n)
                sums = log_row_checksum_block(ids, rows.hashes, rows.sources, rows.lines,
                                              rows.metas_json, slots, vector_digests(vectors))
                self._insert_log_rows(ids, rows, added, sums, first)
            finally:
                wait([writing])
            writing.result()              # its error (a full disk) fails the transaction
            self.set_meta("vector_slots", log.pending)
            return ids
        blobs = rows.blobs()
        columns = [ids, rows.hashes, rows.texts, rows.sources, rows.lines, [added] * n, rows.metas_json, blobs]
        if self.has_checksums:
            columns.append(row_checksums(ids, rows.texts, rows.sources, rows.lines,
                                         rows.metas_json, blobs))
            self._q(f"INSERT INTO sentences(id, hash, text, source, row, added, meta, {self.vcol}, checksum) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", zip(*columns), many=True)
        else:
            self._q(f"INSERT INTO sentences(id, hash, text, source, row, added, meta, {self.vcol}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", zip(*columns), many=True)
        return ids

    def _insert_log_rows(self, ids, rows: NewRows, added: float, sums: bytes, first_slot: int) -> None:
        """The rows of a log window, in one statement (index/faiss/window_sql.py) where SQLite
        gives back every value exactly, else row by row."""
        n = len(ids)
        packed = (window_sql.rows_json(ids, rows.texts, rows.sources, rows.lines, rows.metas_json)
                  if self._json_each else None)
        if packed is None:
            self._q(f"INSERT INTO sentences(id, hash, text, source, row, added, meta, {INLINE}, "
                    "checksum, slot) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    zip(ids, rows.hashes, rows.texts, rows.sources, rows.lines, [added] * n, rows.metas_json,
                        [NO_VECTOR] * n, [sums[j:j + 16] for j in range(0, len(sums), 16)],
                        range(first_slot, first_slot + n)), many=True)
            return
        sql, params = packed
        inserted = self._q(sql, {**params, "first": ids[0], "hashes": window_sql.hash_block(rows.hashes),
                                 "sums": sums, "added": added, "slot": first_slot, "empty": NO_VECTOR}).rowcount
        if inserted != n:       # cannot happen: then nothing of this transaction is kept
            raise RuntimeError(f"SQLite inserted {inserted} of a window's {n} rows")

    @cached_property
    def _json_each(self) -> bool:
        return window_sql.available(self.conn)

    def new_ids(self, n: int, ids=None) -> list[int]:
        """The ids `n` new rows take (inside the transaction that inserts them): the next ones,
        past every id the table ever had (AUTOINCREMENT's sqlite_sequence), as SQLite would
        number them; or `ids` (a migrate copy keeps its source's), checked to be such ids."""
        first = 1 + self.highest_id_ever()
        if ids is None:
            return list(range(first, first + n))
        ids = [int(i) for i in ids]
        if len(ids) != n or len(set(ids)) != len(ids) or min(ids) < first:
            raise ValueError(f"ids to keep must be distinct and at least {first}")
        return ids

    def _set_checksum(self, id_, text, source, line, meta_json, blob) -> None:
        if self.has_checksums:
            self._q("UPDATE sentences SET checksum=? WHERE id=?",
                    (row_checksum(id_, text, source, line, meta_json, blob), id_))

    def delete(self, ids) -> list[int]:
        gone = []
        for i in ids:
            if self._q("DELETE FROM sentences WHERE id=?", (int(i),)).rowcount:
                gone.append(int(i))
        return gone

    def update(self, id_, text, vec) -> None:
        self._q("UPDATE sentences SET text=?, hash=?, added=? WHERE id=?",
                (text, text_hash(text), time.time(), int(id_)))
        self.set_vectors([(id_, vec)])

    def set_vectors(self, pairs) -> None:
        """Replace the vectors of existing rows: (id, float32 vector) pairs. In a transaction.
        With the log, the new vectors take new slots (the old ones go dead)."""
        pairs = [(int(i), np.ascontiguousarray(v, dtype=np.float32).reshape(-1)) for i, v in pairs]
        if not pairs:
            return
        log = self._log_for(len(pairs), len(pairs[0][1]))
        if log is None:
            for id_, vec in pairs:
                row = self._q("SELECT text, source, row, meta FROM sentences WHERE id=?", (id_,)).fetchone()
                if row is not None:
                    blob = vec.tobytes()
                    self._q(f"UPDATE sentences SET {self.vcol}=?{', slot=NULL' if self.has_slots else ''} "
                            "WHERE id=?", (blob, id_))      # back in its row: its log slot goes dead
                    self._set_checksum(id_, *row, blob)
            return
        heads = {}
        for i in range(0, len(pairs), CHUNK):
            part = [id_ for id_, _ in pairs[i:i + CHUNK]]
            heads.update((int(r[0]), r[1:]) for r in self._q(
                f"SELECT id, hash, source, row, meta FROM sentences WHERE id IN "
                f"({','.join('?' * len(part))})", part))
        pairs = [(id_, vec) for id_, vec in pairs if id_ in heads]
        if not pairs:
            return
        vectors = np.stack([v for _, v in pairs])
        first = log.append(vectors)
        ids = [id_ for id_, _ in pairs]
        slots = range(first, first + len(ids))
        h = [heads[i] for i in ids]
        sums = log_row_checksums(ids, [x[0] for x in h], [x[1] for x in h], [x[2] for x in h],
                                 [x[3] for x in h], slots, vector_digests(vectors))
        self._q(f"UPDATE sentences SET {INLINE}=?, slot=?, checksum=? WHERE id=?",
                [(NO_VECTOR, k, c, i) for i, k, c in zip(ids, slots, sums)], many=True)
        self.set_meta("vector_slots", log.pending)

    # -- staging (rebuild with another model: the switch is one transaction) ----------------
    def stage_start(self) -> None:
        self.stage_drop()
        self._q("CREATE TABLE _rebuild (id INTEGER PRIMARY KEY, vector BLOB NOT NULL)")

    def stage_drop(self) -> None:
        self._q("DROP TABLE IF EXISTS _rebuild")

    def stage_vectors(self, ids, vectors) -> None:
        """Keep new vectors for rows `ids` aside until apply_staged()."""
        with self.transaction():
            self.conn.executemany("INSERT INTO _rebuild(id, vector) VALUES (?, ?)",
                                  [(int(i), np.ascontiguousarray(v, np.float32).tobytes())
                                   for i, v in zip(ids, vectors)])

    def apply_staged(self, dim: int, batch: int = 5000) -> None:
        """Give every staged row its new vector (of `dim`, the new model's: an empty store's
        too) and drop the rows that were not staged (added or removed meanwhile can't happen:
        the caller holds the writer lock). In a transaction."""
        self._q("DELETE FROM sentences WHERE id NOT IN (SELECT id FROM _rebuild)")
        if self.vector_log() is not None:    # every vector changes (their width may too): a new log
            self.switch_log(int(dim))
        for rows in id_pages(self._q, "SELECT id, vector FROM _rebuild", batch):
            self.set_vectors((i, np.frombuffer(v, np.float32)) for i, v in rows)

    def clear(self) -> None:
        self._q("DELETE FROM sentences")

    def records(self, ids) -> dict[int, dict]:
        out = {}
        ids = [int(i) for i in ids]
        for i in range(0, len(ids), CHUNK):
            part = ids[i:i + CHUNK]
            q = f"SELECT {ROW_COLUMNS} FROM sentences WHERE id IN ({','.join('?' * len(part))})"
            for r in self._q(q, part):
                out[int(r[0])] = _record(r, self.path)
        return out

    def iter_records(self, batch: int = 1000):
        for rows in id_pages(self._q, f"SELECT {ROW_COLUMNS} FROM sentences", batch):
            yield from (_record(r, self.path) for r in rows)

    def iter_texts(self, batch: int = 1000):
        """(id, text) in id order."""
        for rows in id_pages(self._q, "SELECT id, text FROM sentences", batch):
            yield from ((int(a), b) for a, b in rows)

    def vectors(self, dim: int, after_id: int = 0, batch: int = 20000):
        """Yield (ids int64, vectors float32 (n, dim)) for rows with id > after_id, in id order
        (from the vector log, or the row for rows written before it)."""
        select = f"SELECT id, {self.vcol}, {'slot' if self.has_slots else 'NULL'} FROM sentences"
        log = self.vector_log()
        for rows in id_pages(self._q, select, batch, after=after_id):
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            slotted = [j for j, r in enumerate(rows) if r[2] is not None]
            inline = [j for j, r in enumerate(rows) if r[2] is None] if len(slotted) < len(rows) else []
            wrong = [int(rows[j][0]) for j in inline
                     if not isinstance(rows[j][1], bytes) or len(rows[j][1]) != dim * 4]
            if slotted and (log is None or log.dim != dim):
                wrong += [int(rows[j][0]) for j in slotted]
            if wrong:
                raise StoreCorrupted(f"the sentence database {self.path} is damaged: the vectors "
                                     f"of rows {wrong[:20]} do not have dimension {dim}",
                                     path=self.path, remedy="repair", damaged_ids=wrong)
            if not inline:
                vecs, missing = log.read([r[2] for r in rows])
            else:
                vecs = np.empty((len(rows), dim), np.float32)
                vecs[inline] = np.frombuffer(b"".join(rows[j][1] for j in inline),
                                             dtype=np.float32).reshape(len(inline), dim)
                missing = np.zeros(len(rows), bool)
                if slotted:
                    vecs[slotted], missing[slotted] = log.read([rows[j][2] for j in slotted])
            if missing.any():
                gone = ids[missing].tolist()
                raise StoreCorrupted(f"the vector log of {self.path.parent} is damaged: it has lost "
                                     f"the vectors of rows {gone[:20]}; repairing the store sets "
                                     "them aside (their texts can be ingested again)",
                                     path=log.path, remedy="repair", damaged_ids=gone)
            yield ids, vecs

    # -- the vector log (index/faiss/vector_log.py) -----------------------------------------
    _log: VectorLog | None = None
    _log_writer = False            # this connection's process holds the writer lock
    _log_switch = None             # (old, new) while a transaction moves every vector to a new log

    def _log_meta(self) -> dict | None:
        meta = self.get_meta("vector_log")
        if meta is None:
            return None
        if not (isinstance(meta.get("file"), str) and LOG_NAME.fullmatch(meta["file"])
                and type(meta.get("dim")) is int and 0 < meta["dim"] < 1 << 16):
            raise StoreCorrupted(f"the sentence database {self.path} is damaged: its setting "
                                 "'vector_log' is unreadable; restore it from a backup",
                                 path=self.path, remedy="restore")
        return meta

    def vector_log(self):
        """The vector log the database names (None: a schema 2 database, vectors in the rows).
        A reader's view follows the writer's commits: its committed count is the database's."""
        if not self.has_slots:
            return None
        if self._log_writer and self._log is not None:
            return self._log           # the writer's own count is the database's
        meta = self._log_meta()
        if meta is None:
            return None
        committed = int(self.get_meta("vector_slots", 0))
        if self._log is None or self._log.path.name != meta["file"]:
            if self._log is not None:
                self._log.close()
                self._log = None
            path = self.path.parent / meta["file"]
            if self._log_writer:      # the writer cuts the log to this count: never a named slot
                committed = self._slots_named(path, meta["dim"], committed)
            self._log = VectorLog.open(path, self.store_id, meta["dim"], committed,
                                       writable=self._log_writer)
        else:
            self._log.set_committed(committed)
        return self._log

    def open_log_for_writing(self) -> None:
        """This process holds the writer lock: open the log to append (its uncommitted tail,
        a window a kill cut off before its COMMIT, is cut) and remove logs nobody names."""
        if self._log is not None and not self._log.writable:
            self._log.close()
            self._log = None
        self._log_writer = True
        log = self.vector_log()
        if log is not None and log.committed != self.get_meta("vector_slots", 0):
            with self.transaction():               # readers follow the count the rows name
                self.set_meta("vector_slots", log.committed)
        named = log.path.name if log is not None else None
        for path in self.path.parent.glob("vectors-*.f32"):
            if LOG_NAME.fullmatch(path.name) and path.name != named:
                _remove_quietly(path)   # a rebuild's or first window's log that never committed

    _log_pool: ThreadPoolExecutor | None = None

    def _log_writer_thread(self) -> ThreadPoolExecutor:
        if self._log_pool is None:
            self._log_pool = ThreadPoolExecutor(1, thread_name_prefix="encoderscope-vector-log")
        return self._log_pool

    def _slots_named(self, path: Path, dim: int, committed: int) -> int:
        """The committed count a writer's open may cut the log to: `vector_slots`, raised past
        every slot a row names (a damaged setting must not cost their vectors). The rows are
        scanned only when the file holds more than the setting says (after a crash)."""
        committed = max(0, committed)
        try:
            longer = path.stat().st_size > HEADER_BYTES + committed * 4 * int(dim)
        except OSError:
            return committed                       # VectorLog.open says what is wrong
        if not longer:
            return committed
        top = self._q("SELECT MAX(slot) FROM sentences WHERE typeof(slot)='integer'").fetchone()[0]
        return committed if top is None else max(committed, int(top) + 1)

    def _writable_log(self):
        return self.vector_log() if self._log_writer and self.has_slots else None

    def _log_for(self, n: int, dim: int):
        """Where a transaction writing `n` vectors puts them: the log (made now if the store has
        none yet), or None (in their rows: fewer than LOG_MIN_ROWS, whose own fsync of the log
        would cost more than SQLite writing them, so a small ingest pays one fsync as before)."""
        if n < LOG_MIN_ROWS or not (self._log_writer and self.has_slots):
            return None
        log = self.vector_log()
        if log is None:
            self.switch_log(dim)
            log = self._log
        return log

    def _new_log(self, store_id: str, dim: int, number: int = 1) -> VectorLog:
        """Create an empty log and name it (inside the transaction that commits it)."""
        name = log_file_name(number)
        log = VectorLog.create(self.path.parent / name, store_id, dim)
        self.set_meta("vector_log", {"file": name, "dim": int(dim)})
        self.set_meta("vector_slots", 0)
        self._log, self._log_writer = log, True
        return log

    def switch_log(self, dim: int) -> None:
        """Inside a transaction: new appends go to a new log (of `dim`), which the database
        names once it commits; the old one (if any) is removed then. A rollback removes the
        new one and keeps the old."""
        old = self.vector_log()
        number = int(old.path.name[8:18]) + 1 if old is not None else 1
        new = self._new_log(self.store_id, dim, number)
        self._log_switch = (old, new)

    def _end_log_switch(self, committed: bool) -> None:
        if self._log_switch is None:
            return
        old, new = self._log_switch
        self._log_switch = None
        gone = old if committed else new
        self._log = new if committed else old
        if gone is not None:
            gone.close()
            _remove_quietly(gone.path)

    def log_problem(self) -> StoreCorrupted | None:
        """A vector log shorter than the rows it holds (cut, or damaged): what to say, or None."""
        log = self.vector_log()
        if log is None or not log.short_by():
            return None
        on_disk = log.slots_on_disk()
        lost = int(self._q("SELECT COUNT(*) FROM sentences WHERE slot >= ?", (on_disk,)).fetchone()[0])
        if not lost:
            return None
        return StoreCorrupted(
            f"the vector log {log.path} is shorter than the database says: the vectors of {lost} "
            "sentence(s) are gone (the file was cut or damaged); repairing the store sets those "
            "sentences aside (their texts are kept, to be ingested again) and rebuilds the index "
            "from the rest", path=log.path, remedy="repair")

    def fit_log_to_file(self) -> None:
        """Inside a repair's transaction, after the rows past a cut log's end were set aside:
        the committed count becomes what the file holds."""
        log = self._writable_log()
        if log is not None and log.short_by():
            log.set_committed(log.slots_on_disk())
            self.set_meta("vector_slots", log.committed)

    def checkpoint(self) -> None:
        """Fold the WAL into the database file (best effort: a reader may hold it)."""
        if self._checkpoints is not None:
            self._checkpoints.wait()
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass

    def close(self) -> None:
        if self._checkpoints is not None:
            self._checkpoints.close()
        if self._log_pool is not None:
            self._log_pool.shutdown()
        if self._log is not None:
            self._log.close()
        try:
            self.conn.close()
        except sqlite3.Error:
            pass

    @cached_property
    def rows(self) -> RowChecker:
        """Checks of this database's rows (checksums, vectors, metadata) and setting damaged ones aside."""
        return RowChecker(self._q, self.path, lambda: self.has_checksums, self.count,
                          has_slots=lambda: self.has_slots, log=self.vector_log,
                          vector_column=lambda: self.vcol)
