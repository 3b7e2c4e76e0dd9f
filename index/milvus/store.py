"""MilvusStore: the store interface (index.store.base.Store) on Milvus — embedded Milvus Lite in a local
folder, or a Milvus Standalone/Distributed server. Same behaviour as index.faiss.store.VectorStore:
cosine search, one row per distinct text, ids never reused, the model fingerprint checked on
every open/add/search with the same ModelMismatch message.

Open it through index.opening.open_store("milvus-lite:FOLDER" | "http(s)://HOST:PORT...").
pymilvus is imported only when a Milvus store is opened (optional extra: encoderscope[milvus]).
The collection's fields and properties: schema.py; the Lite folder: lite.py; the repair after a
killed Lite writer: repair.py; re-embedding and reindexing: rebuild.py; calls, their errors and
reading results back: calls.py; opening: opening.py; search, count and reading rows: reading.py.
"""
from __future__ import annotations

import json
import os
import threading
import time

import numpy as np

from core.errors import InputError
from index.milvus import lite, rebuild
from index.milvus.calls import close_quietly
from index.milvus.columns import Columns, chunk_bounds, column_writer
from index.milvus.ids import QUERY_CHUNK, ServerCommits
from index.milvus.opening import open_store
from index.milvus.reading import MilvusReading
from index.milvus.schema import (
    MAX_SOURCE_BYTES,
    MAX_TEXT_BYTES,
    NO_ROW,
    PROP,
    cut,
)
from index.store.adding import EMBED_WINDOW, AddResult, check_texts, plan_unique
from index.store.base import Store
from index.store.durability import WriterLock
from index.store.errors import DuplicateText, StoreError, UnknownId
from index.store.location import Location
from index.store.records import split_meta
from index.store.text_hash import hash_for_format


# Twin of index.store.base.Store, alike: read-only properties over each one's own fields
#   (the base class's describe the model, the engine's its index and lock).
class MilvusStore(ServerCommits, MilvusReading, Store):
    """Open with `MilvusStore.open(location, ...)` or index.opening.open_store."""

    def __init__(self, loc: Location, client, collection: str, props: dict, dim: int,
                 lock: WriterLock | None, writable: bool, timeout: float | None,
                 dedup: str):
        self.loc = loc
        self.location = str(loc)
        self.folder = loc.path            # None on a server
        self._client = client
        self._name = collection
        self._lock = lock
        self._writable = writable
        self._timeout = timeout
        self._mutex = threading.RLock()
        self._fp = json.loads(props[PROP + "fingerprint"])
        self._dim = int(dim)
        self._index = json.loads(props.get(PROP + "index", "{}") or "{}")
        self._next_id = int(props.get(PROP + "next_id", 1))
        self._dirty = False
        self._closed = False
        self._writers: dict = {}          # (collection, dim) -> columns.ColumnWriter or None
        # Duplicate detection: "map" keeps hash -> id in memory (Milvus Lite: this process is
        # the only one with the folder open, and a query costs a scan of every row there);
        # "query" asks the server for each batch (several writers may share a collection).
        self._dedup = dedup
        self._hash_ids: dict[str, int] | None = None
        # The text hash this collection stores (format 1: SHA-256 hex; 2: BLAKE2b-128 hex).
        self._format = int(props.get(PROP + "format_version", 1))
        self._hash = hash_for_format(self._format)
        self._placeholders = props.get(PROP + "placeholders") == "1"
        self._version = None              # the server's (major, minor); None on Lite
        self._server_lock = None          # held while a server commit runs (ids.py)
        self._free_id = None              # the verified next id, while the lock is held
        # The next read waits for every writer's rows (_read_kw): the first one (a new client's
        # Session read sees only what the server has caught up on: another process's last
        # rows could be missed), and the first after a delete.
        self._wait_next_read = True

    # ---------------------------------------------------------------------------------------
    # opening
    # ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, location, *, writable: bool = False, create: bool = False, fingerprint=None,
             index: str = "auto", index_params: dict | None = None, timeout: float = 10.0,
             token: str | None = None, dedup: str | None = None, repair: bool = False,
             check: bool = True, ivf_threshold: int | None = None) -> MilvusStore:
        """Open (or with create=True, writable=True and a fingerprint, create) a store.

        location: "milvus-lite:FOLDER", "http(s)://HOST:PORT[/DB][?collection=NAME]" or a
        parsed index.store.location.Location. token: for servers; default
        $ENCODERSCOPE_MILVUS_TOKEN. timeout: seconds to wait for a server (connecting and each
        call). index: "auto" (Lite: FLAT, exact; server: HNSW), "flat", "hnsw", "ivf" or "sq8"
        (IVF_SQ8); used when creating. index_params: build params merged over the defaults,
        "search" key: search params.
        repair, check, ivf_threshold: FAISS-store options, accepted so callers need not
        branch; Milvus keeps its own WAL/segments consistent (nothing to repair here).
        """
        return open_store(cls, location, writable=writable, create=create, fingerprint=fingerprint,
                          index=index, index_params=index_params, timeout=timeout, token=token,
                          dedup=dedup)

    # ---------------------------------------------------------------------------------------
    # properties
    # ---------------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return self.location

    @property
    def index_kind(self) -> str:
        return self._index.get("kind", "flat")

    @property
    def writable(self) -> bool:
        return self._writable

    @property
    def engine(self) -> str:
        return "milvus-lite" if self.loc.kind == "lite" else "milvus"

    def _need_open(self):
        if self._closed:
            raise StoreError("the store is closed")

    def _need_writer(self):
        self._need_open()
        if not self._writable:
            raise StoreError(f"the store at {self.location} was opened read-only")

    # ---------------------------------------------------------------------------------------
    # ids and duplicates
    # ---------------------------------------------------------------------------------------
    def _reserve(self, n: int, at_least: int = 0) -> int:
        """First of n fresh ids. The counter in the collection properties moves first, so a
        crash between this and the insert leaves a gap, never a reused id. On a server the
        first id was verified against the stored rows under the writer lock (ids.py)."""
        first = max(self._next_id, at_least)
        if self._free_id is not None:
            first = max(first, self._free_id)
        self._set_next_id(first + n)
        if self._free_id is not None:
            self._free_id = first + n
        return first

    def _load_hash_map(self) -> dict:
        if self._hash_ids is None:
            self._hash_ids = {r["hash"]: int(r["id"]) for r in self._scan(["hash"])}
        return self._hash_ids

    def id_of(self, text: str) -> int | None:
        key = self._hash(text)
        return self._existing([key]).get(key)

    def _text_keys(self, texts) -> list:
        check_texts(texts)
        for t in texts:
            if len(t) * 4 > MAX_TEXT_BYTES and len(t.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
                raise InputError(f"a text of {len(t.encode('utf-8', 'surrogatepass'))} bytes is "
                                 f"longer than Milvus stores ({MAX_TEXT_BYTES} bytes): split it "
                                 f"into sentences (it starts {t[:60]!r})")
        return [self._hash(t) for t in texts]

    def _plan(self, texts, result: AddResult, keys=None):
        hashes = self._text_keys(texts) if keys is None else keys
        plan, dup_of = plan_unique(hashes, self._existing(hashes), result)
        return plan, dup_of, hashes

    def _store_planned(self, plan, texts, metas, vecs, result: AddResult, hashes, ids=None):
        if ids is None:
            start = self._reserve(len(plan))
            new_ids = list(range(start, start + len(plan)))
        else:
            new_ids = [int(ids[i]) for i in plan]
            top = max(new_ids) + 1
            if top > max(self._next_id, self._free_id or 0):
                self._set_next_id(top)
        cols = self._columns(new_ids, [texts[i] for i in plan], [hashes[i] for i in plan],
                             [metas[i] for i in plan], vecs, time.time())
        self._insert(cols)
        if self._hash_ids is not None:
            self._hash_ids.update(zip(cols.hashes, cols.ids))
        for i, id_ in zip(plan, new_ids):
            result.ids[i] = id_
        result.added += len(plan)

    def _columns(self, ids, texts, hashes, metas, vecs, now: float) -> Columns:
        """The rows to write as columns (placeholders for missing values where fields cannot
        be null); metadata is split per row only where a row has some."""
        n = len(ids)
        if not any(metas):
            sources, lines, added, extras = [None] * n, [None] * n, [now] * n, [None] * n
        else:
            split = [split_meta(m) for m in metas]
            sources = [None if m.source is None else cut(m.source, MAX_SOURCE_BYTES) for m in split]
            lines = [m.row for m in split]
            added = [now if m.added is None else m.added for m in split]
            extras = [m.extra for m in split]
        sources, lines, extras = self._fill_missing(sources, lines, extras)
        vectors = np.ascontiguousarray(np.asarray(vecs, dtype=np.float32).reshape(n, -1))
        return Columns(list(ids), vectors, list(texts), list(hashes), sources, lines, added, extras)

    def _insert(self, cols: Columns, collection: str | None = None) -> None:
        """Write new rows, a request per chunk (columns.py), flushed later (save, close, the end
        of add_stream)."""
        name = collection or self._name
        writer = self._column_writer(name, cols.vectors.shape[1])
        for start, end in chunk_bounds(cols):
            part = cols.part(start, end)
            if writer is not None:
                self._call(writer.insert, part, what="insert sentences")
            else:
                self._call(self._client.insert, name, data=part.as_rows(), what="insert sentences")
            if name == self._name:
                self._dirty = True

    def _column_writer(self, name: str, dim: int):
        """The column writer for collection `name` (its schema read once per collection and
        dimension), or None where this pymilvus has none (columns.column_writer)."""
        key = (name, int(dim))
        if self._writers.get(key, False) is False:
            schema = self._call(self._client.describe_collection, name, what="read the collection")
            self._writers[key] = column_writer(self._client, name, schema)
        return self._writers[key]

    def _fill_missing(self, sources, lines, extras):
        """Placeholders for missing values where the collection's fields cannot be null (one
        rule for the column writer and the single rows)."""
        if not self._placeholders:
            return sources, lines, extras
        return ([s or "" for s in sources], [NO_ROW if r is None else r for r in lines],
                [e or {} for e in extras])

    def _row(self, id_, vector, text, hash_, source, line, added, extra) -> dict:
        """One row to write (placeholders for missing values where fields cannot be null)."""
        source = cut(source, MAX_SOURCE_BYTES) if source is not None else None
        (source,), (line,), (extra,) = self._fill_missing([source], [line], [extra])
        return {"id": int(id_), "vector": vector, "text": text, "hash": hash_,
                "source": source, "row": line, "added": added, "meta": extra}

    # ---------------------------------------------------------------------------------------
    # changes
    # ---------------------------------------------------------------------------------------
    def add(self, texts, vectors, metadata=None, fingerprint=None, *, ids=None) -> AddResult:
        """Add texts with their vectors (one row each). The same text is stored once: a
        duplicate (of the store or of an earlier text in this call) is counted, not added.
        ids: keep these ids (migrate into an empty store); default: the next free ids."""
        return self._add_vectors(texts, vectors, metadata, fingerprint, ids)

    def _end_stream(self) -> None:
        if self.loc.kind == "lite":    # a server's WAL keeps every acknowledged row already
            self._flush()

    def can_keep_ids(self) -> bool:
        """Whether no id was ever handed out (a cleared store has handed some out)."""
        if self.loc.kind != "server":
            return self._next_id <= 1
        return self._hint() <= 1 and self._id_mark() == 0

    def remove(self, ids) -> list:
        """Remove sentences by id; returns the ids that were there (unknown ids are skipped)."""
        self._need_writer()
        wanted = list(dict.fromkeys(int(i) for i in ids if int(i) >= 0))
        with self._mutex, self._commit_guard():
            present = self._records(wanted, ["hash"])
            gone = [i for i in wanted if i in present]
            if gone and self.loc.kind == "server":
                self._keep_id_mark(max(gone))
            for s in range(0, len(gone), QUERY_CHUNK):
                self._call(self._client.delete, self._name, ids=gone[s:s + QUERY_CHUNK],
                           what="remove sentences")
                self._dirty = self._wait_next_read = True
            if self._hash_ids is not None:
                for i in gone:
                    self._hash_ids.pop(present[i]["hash"], None)
        return gone

    def update_text(self, id, text, vector=None, *, backend=None, fingerprint=None) -> None:
        """Replace the text of sentence `id` and its vector (embedded with `backend` when no
        vector is given); source, row and metadata stay."""
        self._need_writer()
        id = int(id)
        if not isinstance(text, str) or not text.strip():
            raise InputError("empty texts cannot be stored")
        with self._mutex, self._commit_guard():
            old = self._records([id], ["hash", "source", "row", "meta"]).get(id)
            if old is None:
                raise UnknownId(f"no sentence with id {id} in the store at {self.location}")
            other = self.id_of(text)
            if other is not None and other != id:
                raise DuplicateText(f"the store already holds this text as id {other}")
            x = self._vector_for(text, vector, backend, fingerprint)
            h = self._hash(text)
            self._call(self._client.upsert, self._name, data=[{
                "id": id, "vector": x, "text": text, "hash": h, "source": old.get("source"),
                "row": old.get("row"), "added": time.time(), "meta": old.get("meta")}],
                what="update a sentence")
            self._dirty = self._wait_next_read = True
            if self._hash_ids is not None:
                self._hash_ids.pop(old["hash"], None)
                self._hash_ids[h] = id

    def clear(self) -> None:
        """Remove every sentence (ids are not reused afterwards)."""
        self._need_writer()
        with self._mutex, self._commit_guard():
            if self.loc.kind == "server":
                self._keep_id_mark(0)
            self._call(self._client.delete, self._name, filter="id >= 0",
                       what="remove every sentence")
            self._dirty = self._wait_next_read = True
            self._hash_ids = {} if self._dedup == "map" else None
            if self.loc.kind == "lite":
                self._flush()

    def rebuild(self, backend, pooling=None, *, batch_size: int = EMBED_WINDOW,
                embed_batch_size: int | None = None, progress=None, cancel=None) -> None:
        """Re-embed every sentence with another model (or pooling) and switch the store to it
        (see rebuild.py: an interruption leaves the old model, or is finished on open)."""
        with self._mutex, self._commit_guard():
            rebuild.rebuild(self, backend, pooling, batch_size=batch_size,
                            embed_batch_size=embed_batch_size, progress=progress, cancel=cancel)

    def reindex(self, kind: str | None = None) -> None:
        """Rebuild the vector index (optionally of another kind), no model needed."""
        with self._mutex, self._commit_guard():
            rebuild.reindex(self, kind)

    def _flush(self) -> None:
        if self._dirty and self._writable:
            self._call(self._client.flush, self._name, what="flush")
            self._dirty = False

    def save(self) -> None:
        """Flush inserts and deletes into sealed segments (searches on Lite are ~30x faster
        after a flush); everything acknowledged is already durable in Milvus's WAL."""
        self._need_writer()
        with self._mutex:
            self._flush()

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._writable and self.loc.kind == "lite":
                try:
                    self._flush()
                except StoreError:
                    pass      # the server went away: nothing local to protect
        finally:
            self._closed = True
            close_quietly(self._client)
            if getattr(self, "_lite_key", None):
                lite.release(self._lite_key, registered=True)
            if self._lock is not None:
                if self.loc.kind == "lite":
                    (self.folder / lite.UNCLEAN).unlink(missing_ok=True)
                self._lock.release()

    def bytes_on_disk(self) -> int:
        if self.loc.kind != "lite":
            return 0
        total = 0
        for root, _dirs, files in os.walk(self.folder):
            for f in files:
                try:
                    total += os.path.getsize(os.path.join(root, f))
                except OSError:
                    pass
        return total

    def info(self) -> dict:
        self._need_open()
        try:
            idx = self._call(self._client.describe_index, self._name, "vector",
                             what="describe the index") or {}
        except StoreError:
            idx = {}
        index_type = str(idx.get("index_type", self._index.get("index_type", "FLAT")))
        params = {k: v for k, v in idx.items()
                  if k not in ("index_type", "metric_type", "field_name", "index_name",
                               "total_rows", "indexed_rows", "pending_index_rows", "state")}
        params = {k: _number(v) for k, v in params.items()}    # the server says "32"
        if not params:
            params = dict(self._index.get("build", {}))
        if self._index.get("search"):
            params["search"] = dict(self._index["search"])
        return {"count": self.count(), "model": self._fp.get("model"), "dim": self._dim,
                "index": index_type.lower(), "bytes": self.bytes_on_disk(),
                "metric": "cosine", "pooling": self.pooling,
                "fingerprint": dict(self._fp), "index_params": params,
                "path": self.location, "location": self.location, "engine": self.engine,
                "collection": self._name, "generation": None,
                "index_state": idx.get("state"), "indexed_rows": idx.get("indexed_rows")}

    def check(self, backend=None, repair: bool = False, full: bool = False) -> dict:
        """Every row read back against the server's count, duplicate texts, hashes and a
        sample of vectors (every vector with full) re-embedded with `backend`; repair fixes
        what it can and checks again (check.py)."""
        from index.milvus import check
        if repair:
            self._need_writer()
        return check.check(self, backend, repair=repair, full=full)

    def __repr__(self):
        return f"MilvusStore({self.location!r}, {self.engine}, {self.index_kind})"



def _number(value):
    """A numeric string as its number ("32" -> 32); anything else as it is."""
    if isinstance(value, str):
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value

