"""The sentence database (SQLite): the source of truth for texts, metadata and vectors.

One row per distinct text: id (never reused), text, a 16-byte hash for duplicate detection,
source file, line/row, time added, optional JSON metadata and the float32 vector as a BLOB, so
the FAISS index can always be rebuilt without the model. WAL journal + synchronous=FULL: a
committed transaction survives a crash. `generation` counts committed changes; the manifest
records which generation its index snapshot covers.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

import numpy as np

from .errors import StoreCorrupted, StoreError

DB_NAME = "store.db"
SCHEMA = """
CREATE TABLE IF NOT EXISTS sentences (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    hash    BLOB NOT NULL UNIQUE,
    text    TEXT NOT NULL,
    source  TEXT,
    row     INTEGER,
    added   REAL NOT NULL,
    meta    TEXT,
    vector  BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_CHUNK = 500  # ids per IN (...) query
QUICK_CHECK_MAX_BYTES = 256 << 20


def text_hash(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _record(row) -> dict:
    id_, text, source, line, added, meta = row
    md = {"source": source, "row": line, "added": added}
    if meta:
        md.update(json.loads(meta))
    return {"id": int(id_), "text": text, "metadata": md}


class SentenceDB:
    def __init__(self, folder: Path, readonly: bool = False):
        self.path = Path(folder) / DB_NAME
        self.readonly = readonly
        try:
            self.conn = sqlite3.connect(str(self.path), isolation_level=None, timeout=30,
                                        check_same_thread=False)
            self.conn.execute("PRAGMA busy_timeout=30000")
            # synchronous=FULL: a commit is on disk before it returns (WAL is set at create).
            self.conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.DatabaseError as e:
            raise self._corrupt(e) from None

    def _corrupt(self, e) -> StoreCorrupted:
        return StoreCorrupted(
            f"the sentence database {self.path} is damaged or not an SQLite database ({e}); "
            "restore it from a backup or start a new store", path=self.path)

    # -- transactions -----------------------------------------------------------------------
    def _q(self, sql, args=()):
        try:
            return self.conn.execute(sql, args)
        except (sqlite3.IntegrityError, sqlite3.ProgrammingError):
            raise
        except sqlite3.OperationalError as e:
            msg = str(e)
            if "no such table" in msg or "malformed" in msg or "not a database" in msg:
                raise self._corrupt(e) from None
            raise StoreError(f"{self.path}: {msg}") from None
        except sqlite3.DatabaseError as e:
            raise self._corrupt(e) from None

    def begin(self):
        self._q("BEGIN IMMEDIATE")

    def commit(self):
        self._q("COMMIT")

    def rollback(self):
        try:
            self.conn.execute("ROLLBACK")
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
        with self.transaction():
            for stmt in SCHEMA.strip().split(";"):
                if stmt.strip():
                    self._q(stmt)
            for k, v in meta.items():
                self.set_meta(k, v)

    def check(self, full: bool = False, scan_limit: int = QUICK_CHECK_MAX_BYTES) -> None:
        """Raise StoreCorrupted unless SQLite's own integrity check passes.

        quick_check reads every page: done on open for databases up to `scan_limit` bytes;
        bigger ones are checked page by page as they are read (errors still become
        StoreCorrupted), so opening a big store for one search stays fast."""
        size = self.path.stat().st_size if self.path.exists() else 0
        if full or size <= scan_limit:
            row = self._q("PRAGMA integrity_check" if full else "PRAGMA quick_check").fetchone()
            if row is None or row[0] != "ok":
                raise self._corrupt(row[0] if row else "integrity check failed")
        names = {r[0] for r in self._q("SELECT name FROM sqlite_master WHERE type='table'")}
        if not {"sentences", "meta"} <= names:
            raise StoreCorrupted(f"{self.path} is an SQLite database but not an Encoderscope store",
                                 path=self.path)

    def get_meta(self, key, default=None):
        row = self._q("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

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

    def existing_hashes(self, hashes) -> set[bytes]:
        found = set()
        hashes = list(hashes)
        for i in range(0, len(hashes), _CHUNK):
            part = hashes[i:i + _CHUNK]
            q = f"SELECT hash FROM sentences WHERE hash IN ({','.join('?' * len(part))})"
            found.update(r[0] for r in self._q(q, part))
        return found

    def id_of(self, text: str) -> int | None:
        row = self._q("SELECT id FROM sentences WHERE hash=?", (text_hash(text),)).fetchone()
        return int(row[0]) if row else None

    def insert(self, rows) -> list[int]:
        """rows: (text, source, row, meta-dict-or-None, vector float32). Inside a transaction."""
        ids = []
        now = time.time()
        for text, source, line, meta, vec in rows:
            cur = self._q(
                "INSERT INTO sentences(hash, text, source, row, added, meta, vector) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (text_hash(text), text, source, line, now,
                 json.dumps(meta) if meta else None,
                 np.ascontiguousarray(vec, dtype=np.float32).tobytes()))
            ids.append(int(cur.lastrowid))
        return ids

    def delete(self, ids) -> list[int]:
        gone = []
        for i in ids:
            if self._q("DELETE FROM sentences WHERE id=?", (int(i),)).rowcount:
                gone.append(int(i))
        return gone

    def update(self, id_, text, vec) -> None:
        self._q("UPDATE sentences SET text=?, hash=?, vector=?, added=? WHERE id=?",
                (text, text_hash(text), np.ascontiguousarray(vec, dtype=np.float32).tobytes(),
                 time.time(), int(id_)))

    def clear(self) -> None:
        self._q("DELETE FROM sentences")

    def records(self, ids) -> dict[int, dict]:
        out = {}
        ids = [int(i) for i in ids]
        for i in range(0, len(ids), _CHUNK):
            part = ids[i:i + _CHUNK]
            q = ("SELECT id, text, source, row, added, meta FROM sentences "
                 f"WHERE id IN ({','.join('?' * len(part))})")
            for r in self._q(q, part):
                out[int(r[0])] = _record(r)
        return out

    def iter_records(self, batch: int = 1000):
        last = 0
        while True:
            rows = self._q("SELECT id, text, source, row, added, meta FROM sentences "
                           "WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            for r in rows:
                yield _record(r)
            last = int(rows[-1][0])

    def iter_texts(self, batch: int = 1000):
        """(id, text) in id order."""
        last = 0
        while True:
            rows = self._q("SELECT id, text FROM sentences WHERE id > ? ORDER BY id LIMIT ?",
                           (last, batch)).fetchall()
            if not rows:
                return
            yield from ((int(a), b) for a, b in rows)
            last = int(rows[-1][0])

    def vectors(self, dim: int, after_id: int = 0, batch: int = 20000):
        """Yield (ids int64, vectors float32 (n, dim)) for rows with id > after_id, in id order."""
        last = after_id
        while True:
            rows = self._q("SELECT id, vector FROM sentences WHERE id > ? ORDER BY id LIMIT ?",
                           (last, batch)).fetchall()
            if not rows:
                return
            ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
            buf = b"".join(r[1] for r in rows)
            if len(buf) != len(rows) * dim * 4:
                raise StoreCorrupted(f"{self.path}: stored vectors do not have dimension {dim}",
                                     path=self.path)
            yield ids, np.frombuffer(buf, dtype=np.float32).reshape(len(rows), dim)
            last = int(ids[-1])

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
