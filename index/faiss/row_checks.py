"""Row checks of the sentence database: a checksum per row and what damage looks like.

SentenceDB (index/faiss/sentences.py) holds a RowChecker as ``db.rows``. A row's checksum covers its id, text,
source, row, metadata and vector (for a row whose vector is in the vector log: its slot and its
vector's digest, index/faiss/vector_log.py); besides it, the text hash must be the text's (duplicate
detection relies on it) and the vector must be finite and unit length. Damaged rows are named
by id; a repair moves them to the table `damaged` (kept, so their texts can be ingested again).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _json_string
from pathlib import Path

import numpy as np

from index.faiss.paging import id_pages
from index.faiss.vector_log import vector_digests, word_digests
from index.store.errors import StoreCorrupted
from index.store.records import make_record
from index.store.text_hash import text_hash

ROW_COLUMNS = "id, text, source, row, added, meta"   # what a record is made of
CHUNK = 500  # ids per IN (...) query
NORM_TOLERANCE = 1e-3   # stored vectors are unit length; further off than this is damage
# Rows set aside by a repair because they failed their checksum: kept, not deleted, so the
# texts can be read back and ingested again.
DAMAGED_SCHEMA = """
CREATE TABLE IF NOT EXISTS damaged (
    id INTEGER, text TEXT, source TEXT, row INTEGER, added REAL, meta TEXT, vector BLOB,
    reason TEXT NOT NULL, moved REAL NOT NULL
)"""


def _json_or_null(s) -> str:
    return "null" if s is None else _json_string(s)


def checksum_head(id_, text, source, line, meta_json) -> bytes:
    """The bytes a row's checksum covers before its vector: what
    ``json.dumps([id, text, source, line, meta_json])`` writes (ASCII, the same escapes), built
    without a JSON encoder per row."""
    return (f"[{int(id_)}, {_json_string(text)}, {_json_or_null(source)}, "
            f"{'null' if line is None else int(line)}, {_json_or_null(meta_json)}]").encode("ascii")


def row_checksum(id_, text, source, line, meta_json, vector_bytes) -> bytes:
    """16-byte digest of everything a row says (not `added`): a changed bit anywhere shows."""
    head = checksum_head(id_, text, source, line, meta_json)
    return hashlib.blake2b(head + b"\0" + bytes(vector_bytes), digest_size=16).digest()


def log_row_checksums(ids, hashes, sources, lines, metas_json, slots, digests) -> list[bytes]:
    """log_row_checksum_block, one 16-byte checksum per row."""
    raw = log_row_checksum_block(ids, hashes, sources, lines, metas_json, slots, digests)
    return [raw[j:j + 16] for j in range(0, len(raw), 16)]


def log_row_checksum_block(ids, hashes, sources, lines, metas_json, slots, digests) -> bytes:
    """The checksums of rows whose vectors are in the vector log (index/faiss/vector_log.py),
    a window at once: word_digests of a 64-byte record per row (id, text hash, slot, the
    vector's digest, and a BLAKE2b of source, row and metadata where a row has any). The text
    is covered through its hash, which every check recomputes from the text; a flipped bit in
    the log changes the vector's digest, so it shows as its row's. No per-row hash for a row
    without metadata: the checksums of a window cost one NumPy pass."""
    n = len(ids)
    if not n:
        return b""
    rec = np.zeros((n, 64), np.uint8)
    rec[:, 0:8] = np.asarray(ids, "<i8").reshape(n, 1).view(np.uint8)
    rec[:, 8:24] = np.frombuffer(b"".join(hashes), np.uint8).reshape(n, 16)
    rec[:, 24:32] = np.asarray(slots, "<i8").reshape(n, 1).view(np.uint8)
    rec[:, 32:48] = digests
    one_file = _one_file_extras(sources, lines, metas_json)
    if one_file is not None:
        rec[:, 48:64] = np.frombuffer(one_file, np.uint8).reshape(n, 16)
        return word_digests(rec.view("<u4")).tobytes()
    rows, extras = [], []
    quoted = {None: "null"}     # a window's rows mostly share one source: quoted once
    blake2b = hashlib.blake2b
    for j, (s, k, m) in enumerate(zip(sources, lines, metas_json)):
        if s is not None or k is not None or m is not None:
            q = quoted.get(s)
            if q is None:
                q = quoted[s] = _json_string(s)
            extra = f"[{q}, {'null' if k is None else int(k)}, {_json_or_null(m)}]"
            rows.append(j)
            extras.append(blake2b(extra.encode("ascii"), digest_size=16).digest())
    if rows:
        rec[rows, 48:64] = np.frombuffer(b"".join(extras), np.uint8).reshape(len(rows), 16)
    return word_digests(rec.view("<u4")).tobytes()


def _one_file_extras(sources, lines, metas_json) -> bytes | None:
    """The extras' digests, end to end, of a window whose rows all come from one source with a
    row number and no metadata (a file read by the CLI): the general loop's bytes, in one
    comprehension; else None."""
    n, source = len(sources), sources[0]
    if source is None or sources.count(source) != n or metas_json.count(None) != n \
            or not set(map(type, lines)) <= {int}:
        return None
    q, blake2b = _json_string(source), hashlib.blake2b
    return b"".join([blake2b(f"[{q}, {k}, null]".encode("ascii"), digest_size=16).digest() for k in lines])


def row_checksums(ids, texts, sources, lines, metas_json, blobs) -> list[bytes]:
    """row_checksum of many rows at once (columns as lists, blobs each row's vector bytes)."""
    blake2b = hashlib.blake2b
    return [blake2b(checksum_head(i, t, s, n, m) + b"\0" + b, digest_size=16).digest()
            for i, t, s, n, m, b in zip(ids, texts, sources, lines, metas_json, blobs)]


@dataclass(frozen=True)
class DamagedRow:
    id: int         # the sentence id
    reason: str     # what failed: checksum, vector length, norm, metadata
    vector: bytes | None = None     # its vector as read from the vector log (kept when set aside)


def read_record(row, path=None) -> dict:
    """A ROW_COLUMNS row -> {"id", "text", "metadata"}; unreadable metadata is damage."""
    id_, text, source, line, added, meta = row
    extra = None
    if meta:
        try:
            extra = json.loads(meta)
        except (ValueError, RecursionError):
            extra = None
        if not isinstance(extra, dict):
            raise StoreCorrupted(f"the sentence database {path} is damaged: the metadata of "
                                 f"row {id_} is not readable", path=path, remedy="repair",
                                 damaged_ids=[int(id_)])
    return make_record(id_, text, source, line, added, extra)


class RowChecker:
    """Verification of the rows of one sentence database, through what it is given: a query
    function (SQL, args) -> cursor, the database's path (for messages), whether its rows carry
    checksums, and its row count."""

    def __init__(self, query: Callable, path: Path, has_checksums: Callable[[], bool], count: Callable[[], int],
                 has_slots: Callable[[], bool] = lambda: False, log: Callable = lambda: None,
                 vector_column: Callable[[], str] = lambda: "vector"):
        self._q = query
        self.path = path
        self._has_checksums = has_checksums
        self._count = count
        self._has_slots = has_slots
        self._log = log
        self._vcol = vector_column

    @property
    def has_checksums(self) -> bool:
        return self._has_checksums()

    def verify(self, dim: int, ids=None, batch: int = 5000) -> list[DamagedRow]:
        """Rows (all, or those in `ids`) whose checksum fails, whose vector has the wrong length,
        is not finite or not unit length, or whose metadata is unreadable."""
        bad: list[DamagedRow] = []
        for rows in self._row_batches(ids, batch):
            for r in rows:
                reason = self._row_problem(r, dim)
                if reason:
                    bad.append(DamagedRow(int(r[0]), reason, r[6] if r[9] is not None else None))
        return bad

    def _row_batches(self, ids, batch):
        """Rows of (ROW_COLUMNS, vector bytes, checksum, hash, slot, digest): a vector in the
        log read from there (None where the log has lost it), with its digest."""
        cols = f"{ROW_COLUMNS}, {self._vcol()}" + (", checksum" if self.has_checksums else ", NULL") + ", hash" \
            + (", slot" if self._has_slots() else ", NULL")
        if ids is not None:
            ids = [int(i) for i in ids]
            for i in range(0, len(ids), CHUNK):
                part = ids[i:i + CHUNK]
                yield self._resolved(self._q(f"SELECT {cols} FROM sentences WHERE id IN "
                                             f"({','.join('?' * len(part))})", part).fetchall())
            return
        for rows in id_pages(self._q, f"SELECT {cols} FROM sentences", batch):
            yield self._resolved(rows)

    def _resolved(self, rows) -> list:
        slotted = [j for j, r in enumerate(rows) if r[9] is not None]
        out = [(*r, None) for r in rows]
        if not slotted:
            return out
        log = self._log()
        if log is None:
            vecs, missing = None, np.ones(len(slotted), bool)
        else:
            vecs, missing = log.read([rows[j][9] for j in slotted])
            r = [rows[j] for j in slotted]
            hashes = [h if isinstance(h, bytes) and len(h) == 16 else bytes(16) for h in (x[8] for x in r)]
            expected = log_row_checksums([x[0] for x in r], hashes, [x[2] for x in r],
                                         [x[3] for x in r], [x[5] for x in r],
                                         [x[9] if type(x[9]) is int and -1 <= x[9] < 1 << 63 else -1
                                          for x in r], vector_digests(vecs))    # a damaged slot: -1
        for k, j in enumerate(slotted):
            blob = None if missing[k] else vecs[k].tobytes()
            out[j] = (*rows[j][:6], blob, *rows[j][7:10], None if blob is None else expected[k])
        return out

    @staticmethod
    def _row_problem(r, dim: int) -> str | None:
        id_, text, source, line, _added, meta_json, blob, checksum, hash_, slot, expected = r
        if not isinstance(text, str):
            return "text is not readable"
        if hash_ != text_hash(text):     # duplicate detection relies on it
            return "text hash mismatch (text or hash changed on disk)"
        if slot is not None:
            if type(slot) is not int:
                return "its slot in the vector log is not a number"
            if blob is None:
                return "vector missing from the vector log (the file was cut short)"
            if checksum is None or bytes(checksum) != expected:
                return "checksum mismatch (text, metadata or vector changed on disk)"
        elif checksum is not None and (not isinstance(blob, bytes) or bytes(checksum) != row_checksum(
                id_, text, source, line, meta_json, blob)):
            return "checksum mismatch (text, metadata or vector changed on disk)"
        if not isinstance(blob, bytes) or len(blob) != 4 * dim:
            return f"vector of {len(blob) if isinstance(blob, bytes) else 0} bytes, not {4 * dim}"
        v = np.frombuffer(blob, dtype=np.float32)
        if not np.all(np.isfinite(v)):
            return "vector holds NaN or infinite values"
        norm = float(np.linalg.norm(v.astype(np.float64)))
        if abs(norm - 1.0) > NORM_TOLERANCE:
            return f"vector length {norm:.4f}, not 1"
        if meta_json is not None:
            try:
                read_record(r[:6])
            except StoreCorrupted:
                return "metadata is not readable JSON"
        return None

    def with_vectors(self, ids, dim: int) -> dict[int, tuple[dict, np.ndarray]]:
        """id -> (record, vector) for the given ids, each row verified (checksum, vector);
        StoreCorrupted naming the damaged ids otherwise. What search returns goes through here."""
        out, bad = {}, []
        for rows in self._row_batches(list(ids), CHUNK):
            for r in rows:
                reason = self._row_problem(r, dim)
                if reason:
                    bad.append(int(r[0]))
                    continue
                out[int(r[0])] = (read_record(r[:6], self.path), np.frombuffer(r[6], np.float32))
        if bad:
            raise self.damaged(sorted(bad))
        return out

    def damaged(self, ids) -> StoreCorrupted:
        shown = ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
        return StoreCorrupted(
            f"the sentence database {self.path} is damaged: {len(ids)} row"
            f"{'s' if len(ids) != 1 else ''} failed {'their' if len(ids) != 1 else 'its'} "
            f"checksum (id {shown}); repairing the store sets them aside (their texts can be "
            "ingested again) and rebuilds the index from the other rows", path=self.path,
            remedy="repair", damaged_ids=ids)

    def set_aside(self, damaged: list[DamagedRow]) -> None:
        """Move damaged rows out of `sentences` into the `damaged` table. In a transaction."""
        self._q(DAMAGED_SCHEMA)
        now = time.time()
        for d in damaged:
            self._q(f"INSERT INTO damaged SELECT {ROW_COLUMNS}, COALESCE(?, {self._vcol()}), ?, ? FROM "
                    "sentences WHERE id=?", (d.vector, d.reason, now, d.id))
            self._q("DELETE FROM sentences WHERE id=?", (d.id,))

    def unchecked_count(self) -> int:
        """Rows without a checksum (written before schema 2): only their vectors can be checked."""
        if not self.has_checksums:
            return self._count()
        return int(self._q("SELECT COUNT(*) FROM sentences WHERE checksum IS NULL").fetchone()[0])
