"""The vector log: a FAISS store's float32 vectors, one fixed-width slot each, in a file beside
store.db (format 3; docs/reliability.md, "Vector log").

    log = VectorLog.create(folder / "vectors-0000000001.f32", store_id, dim)   # a new store
    log = VectorLog.open(path, store_id, dim, committed=slots, writable=True)
    first = log.append(vectors)      # written and fsync'd; rows name slots first.. in SQLite
    ...                              # the transaction naming them commits
    log.commit()                     # (a rolled-back window's slots stay dead: never written over)
    vecs, missing = log.read(slots)

Why a file: the row held its vector, so SQLite wrote every vector three times (the WAL, the
checkpoint into store.db, and the index snapshot beside it) and checksummed it per row under the
GIL; here it is written once, appended a window at a time.

The promises, kept with the database (index/faiss/sentences.py):
- a window's vectors are written and fsync'd before the transaction that names their slots
  commits, so a committed row's vector is always on disk. The database records how many slots
  are committed (`vector_slots`); a kill between the fsync and the COMMIT leaves a longer file,
  whose tail a writer cuts on its next open (a reader ignores it);
- a file shorter than its committed slots is damage (`short_by`), named by the rows whose
  vectors are gone; a missing file, a foreign one (another store's id in its header) or a
  damaged header is refused;
- each row's checksum covers its slot and a digest of its vector (`vector_digests`, computed for
  a whole window with NumPy), so a flipped bit in the log names its row;
- slots are never reused while the file lives (a removed row leaves its slot dead), so a reader
  holding an older view of the database never reads another row's vector in its place.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from core.files.atomic import fsync_dir
from index.store.durability import check_regular, write_failed
from index.store.errors import StoreCorrupted
from index.store.files import open_own

MAGIC = b"ESVECLOG"
VERSION = 1
HEADER_BYTES = 64           # magic 8 | version u32 | dim u32 | store id 32 ascii | blake2b-16 of the rest
LOG_NAME = re.compile(r"vectors-\d{10}\.f32")
DIGEST_BYTES = 16


def log_file_name(number: int) -> str:
    return f"vectors-{int(number):010d}.f32"


def _header(store_id: str, dim: int) -> bytes:
    sid = store_id.encode("ascii")
    if len(sid) > 32:
        raise ValueError("store id longer than 32 characters")
    body = MAGIC + VERSION.to_bytes(4, "little") + int(dim).to_bytes(4, "little") + sid.ljust(32, b"\0")
    return body + hashlib.blake2b(body, digest_size=16).digest()


@lru_cache(maxsize=8)
def _digest_weights(dim: int) -> np.ndarray:
    """(dim, 2) odd uint64 weights, the same on every machine and version (SHAKE-128 output)."""
    raw = hashlib.shake_128(b"encoderscope vector digest 1").digest(dim * 16)
    return np.frombuffer(raw, dtype="<u8").reshape(dim, 2) | np.uint64(1)


def word_digests(words: np.ndarray) -> np.ndarray:
    """(n, 16) uint8: per row of 32-bit words, two sums of the words times odd 64-bit weights,
    modulo 2**64. Flipping any one bit of word i changes a sum by +-2**b * w_i, never 0 modulo
    2**64 (w_i odd, b < 32): every single-bit flip shows; a window costs one integer matmul."""
    n, k = words.shape
    if not n:
        return np.zeros((0, DIGEST_BYTES), np.uint8)
    sums = words.astype(np.uint64) @ _digest_weights(k)     # integer matmul: wraps modulo 2**64
    return np.ascontiguousarray(sums.astype("<u8")).view(np.uint8).reshape(n, DIGEST_BYTES)


def vector_digests(vectors: np.ndarray) -> np.ndarray:
    """(n, 16) uint8: word_digests of each float32 row's bits."""
    v = np.ascontiguousarray(vectors, dtype=np.float32)
    return word_digests(v.view(np.uint32))


def _slot_numbers(slots) -> np.ndarray:
    """int64 slots; one that is not an int64 (text, a blob, a fraction or a huge number in a
    damaged row) becomes -1, which no slot is."""
    try:
        return np.asarray(slots, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.array([s if type(s) is int and -1 <= s < 1 << 63 else -1 for s in slots], np.int64)


class VectorLog:
    """One open vector log. A writer appends; everyone reads. Not shared between processes
    except through the file: the database says which slots are committed."""

    def __init__(self, path: Path, fd: int, dim: int, committed: int, writable: bool):
        self.path = Path(path)
        self.dim = int(dim)
        self.width = 4 * self.dim
        self.writable = writable
        self._file = os.fdopen(fd, "r+b" if writable else "rb", buffering=0)
        self._end = int(committed)       # slots committed (the database's vector_slots)
        self._pending = self._end        # slots written by the transaction in progress
        self._io = threading.Lock()      # seek + read/write are one step

    # -- opening -----------------------------------------------------------------------------
    @classmethod
    def create(cls, path: Path, store_id: str, dim: int) -> VectorLog:
        """A new, empty log (fsync'd with its folder) open for appending."""
        path = Path(path)
        check_regular(path, "vector log")
        try:
            fd = open_own(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            os.write(fd, _header(store_id, dim))
            os.fsync(fd)
            fsync_dir(path.parent)
        except OSError as e:
            raise write_failed(path, e, f"the vector log {path}") from None
        return cls(path, fd, dim, 0, writable=True)

    @classmethod
    def open(cls, path: Path, store_id: str | None, dim: int, committed: int,
             writable: bool) -> VectorLog:
        """The log named by the database. Missing, not a regular file, a damaged header or
        another store's: StoreCorrupted. A writer cuts the tail past `committed` slots (a window
        written but never committed)."""
        path = Path(path)
        check_regular(path, "vector log", remedy="restore")
        try:
            fd = open_own(path, os.O_RDWR if writable else os.O_RDONLY)
        except FileNotFoundError:
            raise StoreCorrupted(
                f"the store at {path.parent} has lost its vector log ({path.name} is missing): "
                f"the vectors of its sentences are gone; restore the store from a backup",
                path=path, remedy="restore") from None
        except OSError as e:
            if writable and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise write_failed(path, e, f"the vector log {path}") from None
            raise
        log = cls(path, fd, dim, committed, writable)
        try:
            log._check_header(store_id)
            end = HEADER_BYTES + committed * log.width    # a part slot past it is a tail too
            if writable and os.fstat(log._file.fileno()).st_size > end:
                log._file.truncate(end)
        except BaseException:
            log.close()
            raise
        return log

    def _check_header(self, store_id: str | None) -> None:
        self._file.seek(0)
        head = self._file.read(HEADER_BYTES)
        body, digest = head[:HEADER_BYTES - 16], head[HEADER_BYTES - 16:]
        if len(head) < HEADER_BYTES or body[:8] != MAGIC or \
                hashlib.blake2b(body, digest_size=16).digest() != digest:
            raise StoreCorrupted(f"the vector log {self.path} is damaged (its header is not a "
                                 "vector log's); restore the store from a backup",
                                 path=self.path, remedy="restore")
        version = int.from_bytes(body[8:12], "little")
        dim = int.from_bytes(body[12:16], "little")
        sid = body[16:48].rstrip(b"\0").decode("ascii", "replace")
        if version != VERSION:
            raise StoreCorrupted(f"the vector log {self.path} has version {version}; this "
                                 f"Encoderscope reads version {VERSION}", path=self.path,
                                 remedy="restore")
        if store_id is not None and sid != store_id:
            raise StoreCorrupted(f"the vector log {self.path} belongs to another store (its "
                                 "store id is not this database's); put this store's own log "
                                 "back, or restore the store from a backup", path=self.path,
                                 remedy="restore")
        if dim != self.dim:
            raise StoreCorrupted(f"the vector log {self.path} holds {dim}-d vectors, the "
                                 f"database {self.dim}-d; restore the store from a backup",
                                 path=self.path, remedy="restore")

    # -- size ----------------------------------------------------------------------------------
    @property
    def committed(self) -> int:
        return self._end

    def slots_on_disk(self) -> int:
        """Whole slots the file holds now."""
        size = os.fstat(self._file.fileno()).st_size
        return max(0, size - HEADER_BYTES) // self.width

    def short_by(self) -> int:
        """Committed slots the file no longer holds (0: none missing)."""
        return max(0, self._end - self.slots_on_disk())

    # -- writing -------------------------------------------------------------------------------
    def append(self, vectors: np.ndarray) -> int:
        """Write rows after every slot written so far in this transaction and fsync them;
        their first slot. Call inside the transaction that will name them."""
        first = self.reserve(len(vectors))
        self.write(first, vectors)
        return first

    def reserve(self, n: int) -> int:
        """The first of `n` slots after every slot reserved so far (write() fills them: the
        caller may write them on another thread while it builds the rows naming them)."""
        first = self._pending
        self._pending = first + int(n)
        return first

    def write(self, first: int, vectors: np.ndarray) -> None:
        """Write rows at reserved slots first.. and fsync them (before the COMMIT naming them)."""
        v = np.ascontiguousarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"vectors of shape {v.shape}, the log holds {self.dim}-d rows")
        with self._io:
            try:
                self._file.seek(HEADER_BYTES + first * self.width)
                view = memoryview(v).cast("B")
                while len(view):
                    view = view[self._file.write(view):]
                os.fsync(self._file.fileno())     # on disk before the COMMIT that names them
            except OSError as e:
                raise write_failed(self.path, e, f"the vector log {self.path}") from None

    @property
    def pending(self) -> int:
        """Slots written so far, committed or not (what the transaction records)."""
        return self._pending

    def commit(self) -> None:
        self._end = self._pending

    def rollback(self) -> None:
        """Nothing to undo: the slots written stay dead (never named by a committed row), and
        the next append goes after them, so a COMMIT whose outcome is unknown never sees its
        slots written over."""

    def set_committed(self, slots: int) -> None:
        """The committed count as the database says it now: a reader following a writer's
        commits, or a repair that set aside the rows past a cut file's end."""
        self._end = self._pending = int(slots)

    # -- reading -------------------------------------------------------------------------------
    def read(self, slots) -> tuple[np.ndarray, np.ndarray]:
        """(vectors (n, dim) float32, missing (n,) bool): the rows at `slots`; a slot past the
        committed end or the file's end, or not a whole number (a damaged row's), is missing
        (its row zero). Consecutive slots are read in one piece."""
        slots = _slot_numbers(slots)
        out = np.zeros((len(slots), self.dim), np.float32)
        missing = (slots < 0) | (slots >= self._end)
        inside = np.flatnonzero(~missing)
        if not len(inside):
            return out, missing
        order = inside[np.argsort(slots[inside], kind="stable")]
        s = slots[order]
        breaks = np.flatnonzero(np.diff(s) != 1) + 1
        with self._io:
            for run in np.split(order, breaks):
                first, n = int(slots[run[0]]), len(run)
                buf = np.empty((n, self.dim), np.float32)
                got = self._read_into(HEADER_BYTES + first * self.width, memoryview(buf).cast("B"))
                whole = got // self.width       # a file cut short: the rest are missing
                out[run[:whole]] = buf[:whole]
                missing[run[whole:]] = True
        return out, missing

    def _read_into(self, offset: int, view: memoryview) -> int:
        self._file.seek(offset)
        got = 0
        while got < len(view):
            n = self._file.readinto(view[got:])
            if not n:
                break
            got += n
        return got

    def close(self) -> None:
        try:
            self._file.close()
        except OSError:
            pass
