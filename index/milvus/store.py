"""MilvusStore: the store interface (index.base.Store) on Milvus — embedded Milvus Lite in a local
folder, or a Milvus Standalone/Distributed server. Same behaviour as index.store.VectorStore:
cosine search, one row per distinct text, ids never reused, the model fingerprint checked on
every open/add/search with the same ModelMismatch message.

Open it through index.locations.open_store("milvus-lite:FOLDER" | "http(s)://HOST:PORT...").
pymilvus is imported only when a Milvus store is opened (optional extra: encoderscope[milvus]).

Collection schema (one collection per store):
    id      INT64 primary key, assigned here (1, 2, 3, ... like the FAISS store)
    vector  FLOAT_VECTOR(dim), L2-normalised, COSINE metric
    text    VARCHAR(65535)
    hash    VARCHAR(64): sha256 of the text, for duplicate detection
    source  VARCHAR(4096), nullable     row  INT64, nullable
    added   DOUBLE (unix time)          meta JSON, nullable (user metadata keys)
Collection properties: encoderscope.format, .fingerprint (JSON), .model, .dim, .pooling,
.index (JSON: kind + build/search params), .next_id (ids are reserved here before each insert,
so a crash leaves a gap, never a reused id).

Milvus Lite folder layout (milvus-lite:FOLDER):
    FOLDER/milvus.db/             Milvus Lite's data (WAL + segments; its own LOCK)
    FOLDER/encoderscope-milvus.json   small manifest: format, collection, created
    FOLDER/lock                   flock'ed by the one writer (index.durability.WriterLock)
Milvus Lite lets one process open a folder at a time (readers included); a second process gets
StoreLocked naming the holder.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import threading
import time
from pathlib import Path

import numpy as np

from core.errors import InputError

from . import fingerprint as fpmod
from .base import ADD_BATCH, AddResult, Hit, Store, check_texts, normalize, plan_unique
from .durability import WriterLock, atomic_write
from .errors import (DuplicateText, StoreCorrupted, StoreError, StoreLocked,
                     StoreNotFound, StoreUnavailable, UnknownId)
from .locations import (LITE_MANIFEST, TOKEN_ENV, Location, parse_location)

INSTALL_HINT = "pip install 'encoderscope[milvus]'"
FORMAT = "encoderscope-milvus"
FORMAT_VERSION = 1
PROP = "encoderscope."
INSERT_CHUNK = 1000          # rows per insert call (keeps gRPC messages ~2 MB at 384-d)
SCAN_WINDOW = 10_000         # ids per query while iterating (Milvus caps a query at 16384)
MAX_TOPK = 16_384            # Milvus's limit on k
MAX_TEXT_BYTES = 65_535
MAX_SOURCE_BYTES = 4_096
QUERY_CHUNK = 500            # hashes / ids per `in [...]` filter
LITE_RELEASE_WAIT = 5.0      # s to wait for a dead or closed writer's Milvus Lite lock to clear
UNCLEAN = "unclean"          # in a Lite folder while a writer has it open (removed on close)
FIELDS = ["text", "source", "row", "added", "meta"]
KINDS = ("auto", "flat", "hnsw", "ivf", "sq8")
# What each request becomes. Milvus Lite: exact FLAT (its HNSW does not make queries faster:
# every query still walks each row in Python to apply deletes). Servers: HNSW for "auto".
SERVER_INDEX = {
    "flat": ("FLAT", {}, {}),
    "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}, {"ef": 128}),
    "ivf": ("IVF_FLAT", {"nlist": 1024}, {"nprobe": 32}),
    "sq8": ("IVF_SQ8", {"nlist": 1024}, {"nprobe": 32}),
}

log = logging.getLogger(__name__)

_LITE_USERS: dict[str, int] = {}     # Lite data dir -> MilvusStore objects using it here
_LITE_MUTEX = threading.Lock()


def import_pymilvus():
    """pymilvus, or StoreError with the install command."""
    try:
        import pymilvus
    except ImportError:
        raise StoreError("Milvus stores need the optional Milvus packages: "
                         f"{INSTALL_HINT} (pymilvus and milvus-lite)") from None
    # pymilvus logs every failed call at ERROR with a traceback; we raise worded errors instead.
    logging.getLogger("pymilvus.decorators").setLevel(logging.CRITICAL)
    logging.getLogger("milvus_lite.server_manager").setLevel(logging.CRITICAL)
    # Milvus Lite serves gRPC from a thread of this process; a call it does not implement
    # (AllocTimestamp, which pymilvus asks after create_index) is logged there at ERROR with a
    # traceback, and the CLI would print it. The client gets an error status, worded by _Caller.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    return pymilvus


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _cut(s: str, limit: int) -> str:
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return s
    return raw[:limit].decode("utf-8", "ignore")


def _split_meta(meta):
    """-> (source, row, added or None, extra dict or None), like the FAISS store."""
    if not meta:
        return None, None, None, None
    meta = dict(meta)
    source = meta.pop("source", None)
    row = meta.pop("row", None)
    added = meta.pop("added", None)
    return (str(source) if source is not None else None,
            int(row) if row is not None else None,
            float(added) if added is not None else None, meta or None)


def _record(ent: dict) -> dict:
    md = {"source": ent.get("source"), "row": ent.get("row"), "added": ent.get("added")}
    extra = ent.get("meta")
    if isinstance(extra, str):
        extra = json.loads(extra) if extra else None
    if extra:
        md.update(extra)
    return {"id": int(ent["id"]), "text": ent["text"], "metadata": md}


def _lite_lock_holder(folder: Path) -> int | None:
    try:
        raw = (folder / "lock").read_text().strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def _holder_gone(folder: Path) -> bool:
    """Whether the process recorded as the folder's last writer is this one or no longer runs."""
    pid = _lite_lock_holder(folder)
    if pid is None or pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _lite_is_locked(data_dir: Path) -> bool:
    """Whether another process holds Milvus Lite's own LOCK on data_dir."""
    path = data_dir / "LOCK"
    if not path.exists():
        return False
    fd = os.open(str(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


class MilvusStore(Store):
    """Open with `MilvusStore.open(location, ...)` or index.locations.open_store."""

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
        # Duplicate detection: "map" keeps hash -> id in memory (Milvus Lite: this process is
        # the only one with the folder open, and a query costs a scan of every row there);
        # "query" asks the server for each batch (several writers may share a collection).
        self._dedup = dedup
        self._hash_ids: dict[str, int] | None = None

    # ---------------------------------------------------------------------------------------
    # opening
    # ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, location, *, writable: bool = False, create: bool = False, fingerprint=None,
             index: str = "auto", index_params: dict | None = None, timeout: float = 10.0,
             token: str | None = None, dedup: str | None = None, repair: bool = False,
             check: bool = True, hnsw_threshold: int | None = None) -> "MilvusStore":
        """Open (or with create=True, writable=True and a fingerprint, create) a store.

        location: "milvus-lite:FOLDER", "http(s)://HOST:PORT[/DB][?collection=NAME]" or a
        parsed index.locations.Location. token: for servers; default $ENCODERSCOPE_MILVUS_TOKEN.
        timeout: seconds to wait for a server (connecting and each call).
        index: "auto" (Lite: FLAT, exact; server: HNSW), "flat", "hnsw", "ivf" or "sq8"
        (IVF_SQ8); used when creating. index_params: build params merged over the defaults,
        "search" key: search params.
        repair, check, hnsw_threshold: FAISS-store options, accepted so callers need not
        branch; Milvus keeps its own WAL/segments consistent (nothing to repair here).
        """
        loc = parse_location(location)
        if not loc.is_milvus:
            raise InputError(f"{loc.text} is not a Milvus location (milvus-lite:FOLDER or "
                             "http(s)://HOST:PORT)")
        if create and not writable:
            raise ValueError("create=True needs writable=True")
        if index not in KINDS:
            raise InputError(f"unknown index kind {index!r} for Milvus; choose one of "
                             f"{', '.join(KINDS)}")
        pymilvus = import_pymilvus()
        lock = None
        client = None
        lite_key = None
        registered = False
        try:
            if loc.kind == "lite":
                lock = cls._prepare_lite(loc, writable, create, fingerprint)
                lite_key = str(loc.lite_db)
                client = cls._connect_lite(loc, pymilvus)
            else:
                client = cls._connect_server(loc, pymilvus, token, timeout)
            call = _Caller(loc, timeout if loc.kind == "server" else None)
            name = loc.collection
            staging = name + "__rebuild"
            if writable:
                cls._finish_interrupted_rebuild(client, call, name, staging)
            if not call(client.has_collection, name, what="look up the collection"):
                if not create:
                    raise StoreNotFound(f"no store at {loc}: ingest some files first "
                                        f"(encoderscope ingest FILE --store {loc})")
                if fingerprint is None:
                    raise InputError("creating a store needs the model fingerprint")
                cls._create_collection(client, call, loc, name, fpmod.as_dict(fingerprint),
                                       index, index_params or {})
                if loc.kind == "lite":
                    cls._write_lite_manifest(loc)
            desc = call(client.describe_collection, name, what="read the collection")
            props = dict(desc.get("properties") or {})
            if props.get(PROP + "format") != FORMAT:
                raise StoreCorrupted(
                    f"the collection {name!r} at {loc} was not made by Encoderscope (it has no "
                    f"{PROP}format property); choose another collection with ?collection=NAME",
                    path=loc.path)
            if int(props.get(PROP + "format_version", 0)) > FORMAT_VERSION:
                raise StoreCorrupted(f"the store at {loc} has format version "
                                     f"{props.get(PROP + 'format_version')}; this Encoderscope "
                                     f"reads version {FORMAT_VERSION}", path=loc.path)
            dim = next((int(f["params"]["dim"]) for f in desc["fields"]
                        if f["name"] == "vector"), None)
            if dim is None or dim != int(props.get(PROP + "dim", dim)):
                raise StoreCorrupted(f"the collection at {loc} has no vector field matching its "
                                     "recorded dimension", path=loc.path)
            if dedup is None:
                dedup = "map" if loc.kind == "lite" else "query"
            store = cls(loc, client, name, props, dim, lock, writable,
                        timeout if loc.kind == "server" else None, dedup)
            store._call = call
            store._lite_key = lite_key
            if lite_key:
                with _LITE_MUTEX:
                    _LITE_USERS[lite_key] = _LITE_USERS.get(lite_key, 0) + 1
                registered = True
            call(client.load_collection, name, what="load the collection")
            if loc.kind == "lite":
                store._after_crash_check()
            if fingerprint is not None:
                fpmod.check(store._fp, fingerprint, "your vectors and queries",
                            where=f"at {loc}", hint=store._rebuild_hint(fingerprint))
            return store
        except BaseException:
            if client is not None:
                try:
                    client.close()
                except Exception:
                    pass
            if lite_key is not None:
                _release_lite(lite_key, registered=registered)
            if lock is not None:
                lock.release()
            raise

    @staticmethod
    def _prepare_lite(loc: Location, writable: bool, create: bool, fingerprint) -> WriterLock | None:
        folder = loc.path
        manifest = folder / LITE_MANIFEST
        if not manifest.exists():
            if not create:
                if (folder / "store.db").exists():
                    raise StoreNotFound(f"{folder} holds a FAISS store, not a Milvus Lite one: "
                                        f"open it as --store {folder}")
                raise StoreNotFound(f"no store at {loc}: ingest some files first "
                                    f"(encoderscope ingest FILE --store {loc})")
            if fingerprint is None:
                raise InputError("creating a store needs the model fingerprint")
            folder.mkdir(parents=True, exist_ok=True)
            strangers = [p.name for p in folder.iterdir()
                         if p.name not in ("lock", loc.lite_db.name) and not p.name.startswith(".")]
            if strangers:
                raise StoreError(f"{folder} is not empty and holds no store; choose an empty or "
                                 "new folder for milvus-lite:FOLDER")
        else:
            try:
                d = json.loads(manifest.read_text("utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
                raise StoreCorrupted(f"the manifest {manifest} is damaged ({e})",
                                     path=manifest) from None
            if d.get("format") != FORMAT:
                raise StoreCorrupted(f"{manifest} is not an Encoderscope Milvus manifest",
                                     path=manifest)
        lock = WriterLock(folder).acquire() if writable else None
        try:
            from milvus_lite.server_manager import server_manager_instance as mgr
        except ImportError:
            if lock:
                lock.release()
            raise StoreError(f"Milvus Lite stores need milvus-lite: {INSTALL_HINT}") from None
        running_here = os.path.abspath(loc.lite_db) in getattr(mgr, "_servers", {})
        if not running_here and _lite_is_locked(loc.lite_db) and _holder_gone(folder):
            # The last writer is dead (killed) or was this process: Milvus Lite's own lock is
            # still being let go (a server stopping, a killed process being reaped). Wait a little.
            deadline = time.monotonic() + LITE_RELEASE_WAIT
            while time.monotonic() < deadline and _lite_is_locked(loc.lite_db):
                time.sleep(0.1)
        if not running_here and _lite_is_locked(loc.lite_db):
            if lock:
                lock.release()
            pid = _lite_lock_holder(folder)
            who = f"process {pid}" if pid else "another process"
            raise StoreLocked(
                f"the Milvus Lite store {folder} is open in {who}; Milvus Lite lets one process "
                "at a time use a folder (readers included): close the other program, or put "
                "the corpus on a Milvus server to share it (see docs/scale-out.md)", pid=pid)
        return lock

    @staticmethod
    def _connect_lite(loc: Location, pymilvus):
        t0 = time.perf_counter()
        try:
            client = pymilvus.MilvusClient(str(loc.lite_db))
        except pymilvus.MilvusException as e:
            if _lite_is_locked(loc.lite_db):
                raise StoreLocked(f"the Milvus Lite store {loc.path} is open in another "
                                  "process; Milvus Lite lets one process at a time use a folder",
                                  pid=_lite_lock_holder(loc.path)) from None
            raise StoreCorrupted(f"Milvus Lite could not open {loc.lite_db} "
                                 f"({getattr(e, 'message', e)})", path=loc.lite_db) from None
        log.info("Milvus Lite %s opened in %.2f s", loc.lite_db, time.perf_counter() - t0)
        return client

    @staticmethod
    def _connect_server(loc: Location, pymilvus, token, timeout):
        token = token if token is not None else os.environ.get(TOKEN_ENV, "")
        try:
            return pymilvus.MilvusClient(uri=loc.uri, token=token, db_name=loc.db_name,
                                         timeout=timeout)
        except Exception as e:   # MilvusException, grpc errors, socket errors
            raise _unavailable(loc, e, "connect", bool(token)) from None

    @staticmethod
    def _write_lite_manifest(loc: Location) -> None:
        import milvus_lite
        d = {"format": FORMAT, "format_version": FORMAT_VERSION, "collection": loc.collection,
             "data": loc.lite_db.name, "created": time.time(),
             "milvus_lite": getattr(milvus_lite, "__version__", "?")}
        atomic_write(loc.path / LITE_MANIFEST, (json.dumps(d, indent=2) + "\n").encode())

    @staticmethod
    def _index_spec(lite: bool, request: str, params: dict) -> dict:
        params = dict(params or {})
        search = dict(params.pop("search", {}) or {})
        kind = request
        if request == "auto":
            kind = "flat" if lite else "hnsw"
        index_type, build, sp = SERVER_INDEX[kind]
        return {"kind": kind, "request": request, "index_type": index_type,
                "build": {**build, **params}, "search": {**sp, **search}}

    @classmethod
    def _create_collection(cls, client, call, loc, name, fpd, request, params,
                           next_id: int = 1, extra_props: dict | None = None) -> None:
        from pymilvus import DataType, MilvusClient
        dim = int(fpd["dim"])
        spec = cls._index_spec(loc.kind == "lite", request, params)
        schema = MilvusClient.create_schema(
            auto_id=False, enable_dynamic_field=False,
            description=f"Encoderscope sentences embedded with {fpmod.describe(fpd)}")
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
        schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
        schema.add_field("hash", DataType.VARCHAR, max_length=64)
        schema.add_field("source", DataType.VARCHAR, max_length=MAX_SOURCE_BYTES, nullable=True)
        schema.add_field("row", DataType.INT64, nullable=True)
        schema.add_field("added", DataType.DOUBLE)
        schema.add_field("meta", DataType.JSON, nullable=True)
        ip = client.prepare_index_params()
        ip.add_index("vector", index_type=spec["index_type"], metric_type="COSINE",
                     params=spec["build"])
        if loc.kind == "server":   # a real inverted index on a server; Lite scans anyway
            ip.add_index("hash", index_type="INVERTED")
        props = {PROP + "format": FORMAT, PROP + "format_version": str(FORMAT_VERSION),
                 PROP + "fingerprint": json.dumps(fpd, sort_keys=True),
                 PROP + "model": str(fpd.get("model")), PROP + "dim": str(dim),
                 PROP + "pooling": str(fpd.get("pooling", "mean")),
                 PROP + "index": json.dumps(spec, sort_keys=True),
                 PROP + "next_id": str(int(next_id))}
        props.update(extra_props or {})
        call(client.create_collection, name, schema=schema, index_params=ip,
             consistency_level="Strong", properties=props, what="create the collection")

    @staticmethod
    def _finish_interrupted_rebuild(client, call, name, staging) -> None:
        """A rebuild that stopped between dropping the old collection and renaming the new
        one: finish it. A staging collection that was not complete is dropped."""
        if not call(client.has_collection, staging, what="look up the collection"):
            return
        props = call(client.describe_collection, staging, what="read the collection").get(
            "properties") or {}
        complete = props.get(PROP + "rebuild_complete") == "1"
        if not call(client.has_collection, name, what="look up the collection") and complete:
            call(client.rename_collection, staging, name, what="finish the rebuild")
            call(client.drop_collection_properties, name, [PROP + "rebuild_complete"],
                 what="finish the rebuild")
        else:
            call(client.drop_collection, staging, what="drop an unfinished rebuild")

    def _after_crash_check(self) -> None:
        """Milvus Lite after a writer was killed: its WAL replay can bring back rows that were
        also flushed, so one id appears twice (count(*) and queries see both copies). Rewrite
        each such id once. A reader does it too when no writer holds the folder."""
        marker = self.folder / UNCLEAN
        if marker.exists():
            lock = self._lock
            temp = None
            if lock is None:
                try:
                    temp = WriterLock(self.folder).acquire()
                except StoreLocked:
                    temp = None       # a writer in this process: the marker is its own
            if lock is not None or temp is not None:
                try:
                    fixed = self._repair_duplicates()
                    if fixed:
                        log.warning("%s: rewrote %d sentences duplicated by an interrupted "
                                    "write", self.location, fixed)
                    if temp is not None:
                        marker.unlink(missing_ok=True)
                finally:
                    if temp is not None:
                        temp.release()
        if self._writable:
            marker.touch()

    def _repair_duplicates(self) -> int:
        seen, dups = set(), set()
        for r in self._scan([], dedupe=False):
            i = int(r["id"])
            if i in seen:
                dups.add(i)
            seen.add(i)
        top = max(seen, default=0) + 1
        if top > self._next_id:        # never hand out an id that is already there
            self._call(self._client.alter_collection_properties, self._name,
                       properties={PROP + "next_id": str(top)}, what="repair ids")
            self._next_id = top
        if not dups:
            return 0
        fields = ["id", "vector", "hash"] + FIELDS
        rows = {}
        ids = sorted(dups)
        for s_ in range(0, len(ids), QUERY_CHUNK):
            for r in plain_rows(self._call(self._client.get, self._name,
                                           ids=ids[s_:s_ + QUERY_CHUNK], output_fields=fields,
                                           what="repair")):
                rows[int(r["id"])] = {k: r.get(k) for k in fields}
        data = list(rows.values())
        for s_ in range(0, len(data), INSERT_CHUNK):
            self._call(self._client.upsert, self._name, data=data[s_:s_ + INSERT_CHUNK],
                       what="repair")
        self._call(self._client.flush, self._name, what="flush")
        return len(data)

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
        crash between this and the insert leaves a gap, never a reused id."""
        if self.loc.kind == "server":   # another writer may have moved it
            props = self._call(self._client.describe_collection, self._name,
                               what="read the collection").get("properties") or {}
            self._next_id = max(self._next_id, int(props.get(PROP + "next_id", 1)))
        first = max(self._next_id, at_least)
        self._set_next_id(first + n)
        return first

    def _set_next_id(self, value: int) -> None:
        self._call(self._client.alter_collection_properties, self._name,
                   properties={PROP + "next_id": str(int(value))}, what="reserve ids")
        self._next_id = int(value)

    def _load_hash_map(self) -> dict:
        if self._hash_ids is None:
            self._hash_ids = {r["hash"]: int(r["id"]) for r in self._scan(["hash"])}
        return self._hash_ids

    def _existing(self, hashes) -> dict[str, int]:
        hashes = list(dict.fromkeys(hashes))
        if self._dedup == "map":
            m = self._load_hash_map()
            return {h: m[h] for h in hashes if h in m}
        found = {}
        for i in range(0, len(hashes), QUERY_CHUNK):
            part = hashes[i:i + QUERY_CHUNK]
            rows = plain_rows(self._call(self._client.query, self._name,
                                         filter=f"hash in {json.dumps(part)}",
                                         output_fields=["id", "hash"], what="look for duplicates"))
            for r in rows:
                found[r["hash"]] = int(r["id"])
        return found

    def id_of(self, text: str) -> int | None:
        return self._existing([text_hash(text)]).get(text_hash(text))

    def _plan(self, texts, result: AddResult):
        check_texts(texts)
        for t in texts:
            if len(t) * 4 > MAX_TEXT_BYTES and len(t.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
                raise InputError(f"a text of {len(t.encode('utf-8', 'surrogatepass'))} bytes is "
                                 f"longer than Milvus stores ({MAX_TEXT_BYTES} bytes): split it "
                                 f"into sentences (it starts {t[:60]!r})")
        hashes = [text_hash(t) for t in texts]
        plan, dup_of = plan_unique(hashes, self._existing(hashes), result)
        return plan, dup_of, hashes

    def _store_planned(self, plan, texts, metas, vecs, result: AddResult, hashes, ids=None):
        now = time.time()
        if ids is None:
            start = self._reserve(len(plan))
            new_ids = list(range(start, start + len(plan)))
        else:
            new_ids = [int(ids[i]) for i in plan]
            top = max(new_ids) + 1
            if top > self._next_id:
                self._set_next_id(top)
        rows = []
        for j, (i, id_) in enumerate(zip(plan, new_ids)):
            source, line, added, extra = _split_meta(metas[i])
            rows.append({"id": id_, "vector": vecs[j], "text": texts[i], "hash": hashes[i],
                         "source": _cut(source, MAX_SOURCE_BYTES) if source is not None else None,
                         "row": line, "added": added if added is not None else now,
                         "meta": extra})
        for s in range(0, len(rows), INSERT_CHUNK):
            self._call(self._client.insert, self._name, data=rows[s:s + INSERT_CHUNK],
                       what="insert sentences")
            self._dirty = True
        if self._hash_ids is not None:
            for r in rows:
                self._hash_ids[r["hash"]] = r["id"]
        for i, id_ in zip(plan, new_ids):
            result.ids[i] = id_
        result.added += len(plan)

    # ---------------------------------------------------------------------------------------
    # changes
    # ---------------------------------------------------------------------------------------
    def add(self, texts, vectors, metadata=None, fingerprint=None, *, ids=None) -> AddResult:
        """Add texts with their vectors (one row each). The same text is stored once: a
        duplicate (of the store or of an earlier text in this call) is counted, not added.
        ids: keep these ids (migrate into an empty store); default: the next free ids."""
        return self._add_vectors(texts, vectors, metadata, fingerprint, ids)

    def _end_stream(self) -> None:
        self._flush()

    def can_keep_ids(self) -> bool:
        return self._next_id <= 1      # never handed out an id (a cleared store has)

    def remove(self, ids) -> list:
        """Remove sentences by id; returns the ids that were there (unknown ids are skipped)."""
        self._need_writer()
        wanted = list(dict.fromkeys(int(i) for i in ids))
        with self._mutex:
            present = self._records(wanted, ["hash"])
            gone = [i for i in wanted if i in present]
            for s in range(0, len(gone), QUERY_CHUNK):
                self._call(self._client.delete, self._name, ids=gone[s:s + QUERY_CHUNK],
                           what="remove sentences")
                self._dirty = True
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
        with self._mutex:
            old = self._records([id], ["hash", "source", "row", "meta"]).get(id)
            if old is None:
                raise UnknownId(f"no sentence with id {id} in the store at {self.location}")
            other = self.id_of(text)
            if other is not None and other != id:
                raise DuplicateText(f"the store already holds this text as id {other}")
            x = self._vector_for(text, vector, backend, fingerprint)
            h = text_hash(text)
            self._call(self._client.upsert, self._name, data=[{
                "id": id, "vector": x, "text": text, "hash": h, "source": old.get("source"),
                "row": old.get("row"), "added": time.time(), "meta": old.get("meta")}],
                what="update a sentence")
            self._dirty = True
            if self._hash_ids is not None:
                self._hash_ids.pop(old["hash"], None)
                self._hash_ids[h] = id

    def clear(self) -> None:
        """Remove every sentence (ids are not reused afterwards)."""
        self._need_writer()
        with self._mutex:
            self._call(self._client.delete, self._name, filter="id >= 0",
                       what="remove every sentence")
            self._dirty = True
            self._hash_ids = {} if self._dedup == "map" else None
            self._flush()

    def rebuild(self, backend, pooling=None, *, batch_size: int = ADD_BATCH,
                embed_batch_size: int = 32, progress=None, cancel=None) -> None:
        """Re-embed every sentence with another model (or pooling) and switch the store to it.

        The new vectors go into a staging collection; the switch drops the old collection and
        renames the staging one. An interruption before the switch leaves the store on its old
        model; one inside it is finished by the next writable open."""
        self._need_writer()
        fp = fpmod.as_dict(backend.fingerprint(pooling=pooling or self.pooling))
        staging = self._name + "__rebuild"
        c, call = self._client, self._call
        total = self.count()
        with self._mutex:
            self._flush()
            if call(c.has_collection, staging, what="look up the collection"):
                call(c.drop_collection, staging, what="drop an unfinished rebuild")
            self._create_collection(c, call, self.loc, staging, fp, self._index.get("request", "auto"),
                                    {**self._index.get("build", {}),
                                     "search": self._index.get("search", {})},
                                    next_id=self._next_id)
            done = 0
            try:
                for ids, _vecs, recs in self.iter_batches(batch_size, vectors=False):
                    texts = [r["text"] for r in recs]
                    vecs = normalize(backend.embed(texts, pooling=fp["pooling"],
                                                   batch_size=embed_batch_size, cancel=cancel))
                    rows = []
                    for r, v in zip(recs, vecs):
                        src, line, added, extra = _split_meta(r["metadata"])
                        rows.append({"id": r["id"], "vector": v, "text": r["text"],
                                     "hash": text_hash(r["text"]), "source": src, "row": line,
                                     "added": added if added is not None else time.time(),
                                     "meta": extra})
                    call(c.insert, staging, data=rows, what="insert re-embedded sentences")
                    done += len(rows)
                    if progress:
                        progress(done, total)
                call(c.flush, staging, what="flush")
                call(c.alter_collection_properties, staging,
                     properties={PROP + "rebuild_complete": "1",
                                 PROP + "next_id": str(self._next_id)}, what="finish the rebuild")
            except BaseException:
                try:
                    call(c.drop_collection, staging, what="drop an unfinished rebuild")
                except StoreError:
                    pass
                raise
            call(c.release_collection, self._name, what="switch collections")
            call(c.drop_collection, self._name, what="switch collections")
            call(c.rename_collection, staging, self._name, what="switch collections")
            call(c.drop_collection_properties, self._name, [PROP + "rebuild_complete"],
                 what="finish the rebuild")
            call(c.load_collection, self._name, what="load the collection")
            self._fp = fp
            self._dim = int(fp["dim"])
            self._dirty = False

    def reindex(self, kind: str | None = None) -> None:
        """Rebuild the vector index (optionally of another kind), no model needed."""
        self._need_writer()
        with self._mutex:
            spec = self._index_spec(self.loc.kind == "lite", kind or self._index.get("request", "auto"), {})
            c, call = self._client, self._call
            self._flush()
            call(c.release_collection, self._name, what="reindex")
            call(c.drop_index, self._name, "vector", what="reindex")
            ip = c.prepare_index_params()
            ip.add_index("vector", index_type=spec["index_type"], metric_type="COSINE",
                         params=spec["build"])
            call(c.create_index, self._name, ip, what="reindex")
            call(c.alter_collection_properties, self._name,
                 properties={PROP + "index": json.dumps(spec, sort_keys=True)}, what="reindex")
            call(c.load_collection, self._name, what="load the collection")
            self._index = spec

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
            if self._writable:
                try:
                    self._flush()
                except StoreError:
                    pass      # the server went away: nothing local to protect
        finally:
            self._closed = True
            try:
                self._client.close()
            except Exception:
                pass
            if getattr(self, "_lite_key", None):
                _release_lite(self._lite_key, registered=True)
            if self._lock is not None:
                if self.loc.kind == "lite":
                    (self.folder / UNCLEAN).unlink(missing_ok=True)
                self._lock.release()

    # ---------------------------------------------------------------------------------------
    # reading
    # ---------------------------------------------------------------------------------------
    def search(self, query, k: int = 10, *, backend=None, fingerprint=None):
        """Nearest sentences by cosine similarity (same contract as VectorStore.search)."""
        self._need_open()
        q, single = self._query_vectors(query, backend, fingerprint)
        k = int(k)
        if k < 1:
            raise InputError("k must be at least 1")
        with self._mutex:
            if self.loc.kind == "lite":
                self._flush()     # Lite scans unflushed rows in Python: ~30x slower
            limit = min(k, MAX_TOPK)
            params = {"metric_type": "COSINE", "params": dict(self._index.get("search", {}))}
            if "ef" in params["params"]:
                params["params"]["ef"] = max(int(params["params"]["ef"]), limit)
            res = self._call(self._client.search, self._name, data=list(q), limit=limit,
                             output_fields=FIELDS, search_params=params, anns_field="vector",
                             what="search")
        out = []
        for row in res:
            hits = []
            for r in row:
                ent = dict(r.get("entity") or {})
                ent["id"] = r["id"]
                rec = _record(ent)
                hits.append(Hit(float(r["distance"]), rec["id"], rec["text"], rec["metadata"]))
            hits.sort(key=lambda h: (-h.score, h.id))
            out.append(hits)
        return out[0] if single else out

    def count(self) -> int:
        self._need_open()
        with self._mutex:
            if self.loc.kind == "lite":
                self._flush()
            rows = self._call(self._client.query, self._name, filter="",
                              output_fields=["count(*)"], what="count sentences")
        return int(rows[0]["count(*)"]) if rows else 0

    def _scan(self, fields, window: int = SCAN_WINDOW, dedupe: bool = True):
        """Rows (dicts with "id" + fields) in id order, a window of ids per query."""
        self._need_open()
        if self.loc.kind == "lite":
            with self._mutex:
                self._flush()
        lo = 0
        top = self._next_id
        fields = ["id"] + [f for f in fields if f != "id"]
        while lo < top:
            hi = lo + window
            rows = plain_rows(self._call(self._client.query, self._name,
                                         filter=f"id >= {lo} and id < {hi}",
                                         output_fields=fields, limit=window,
                                         what="read sentences"))
            rows.sort(key=lambda r: int(r["id"]))
            if dedupe:     # an id twice only after an interrupted Lite write (see above)
                rows = [r for k, r in enumerate(rows) if k == 0 or rows[k - 1]["id"] != r["id"]]
            yield from rows
            lo = hi
            if lo >= top and self.loc.kind == "server":
                top = max(top, self._server_next_id())

    def _server_next_id(self) -> int:
        props = self._call(self._client.describe_collection, self._name,
                           what="read the collection").get("properties") or {}
        return int(props.get(PROP + "next_id", 1))

    def iter(self):
        """Every sentence as {"id", "text", "metadata"}, in id order."""
        return (_record(r) for r in self._scan(FIELDS))

    def iter_batches(self, batch: int = 2000, vectors: bool = True):
        """(ids int64, vectors float32 (n, dim) or None, records) in id order, `batch` ids'
        worth at a time (what migrate reads)."""
        fields = FIELDS + (["vector"] if vectors else [])
        for rows in _chunks(self._scan(fields, window=min(max(batch, 1), SCAN_WINDOW)), batch):
            ids = np.fromiter((int(r["id"]) for r in rows), np.int64, len(rows))
            vecs = (np.asarray([r["vector"] for r in rows], dtype=np.float32).reshape(-1, self._dim)
                    if vectors else None)
            yield ids, vecs, [_record(r) for r in rows]

    def vectors(self):
        """(ids, vectors) of the whole store, as stored (like VectorStore.vectors)."""
        parts = list(self.iter_batches(SCAN_WINDOW))
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self._dim), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _records(self, ids, fields) -> dict[int, dict]:
        out = {}
        ids = [int(i) for i in ids]
        for s in range(0, len(ids), QUERY_CHUNK):
            part = ids[s:s + QUERY_CHUNK]
            rows = plain_rows(self._call(self._client.get, self._name, ids=part,
                                         output_fields=["id"] + fields, what="read sentences"))
            for r in rows:
                out[int(r["id"])] = dict(r)
        return out

    def get(self, ids) -> dict:
        self._need_open()
        return {i: _record(r) for i, r in self._records(ids, FIELDS).items()}

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

    def __repr__(self):
        return f"MilvusStore({self.location!r}, {self.engine}, {self.index_kind})"


def plain_rows(result) -> list[dict]:
    """pymilvus query/get results as plain dicts, each row complete.

    pymilvus 3 returns a HybridExtraList: scalar fields are filled in at once, vectors (and
    other variable-length fields) later, on first access, *from the column at the row's
    current position in the list*. Sorting or reordering that list before every row was read
    pairs ids with another row's vector (what migrate copied after a Lite crash recovery,
    when rows no longer come back in id order). Iterating reads each row at its own
    position, so copy first, then reorder."""
    return [dict(r) for r in result]


def _chunks(it, n):
    buf = []
    for x in it:
        buf.append(x)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf


def _release_lite(key: str, registered: bool) -> None:
    """Stop this process's Milvus Lite server for `key` once no store uses it, so that
    another process can open the folder."""
    with _LITE_MUTEX:
        n = _LITE_USERS.get(key, 0) - (1 if registered else 0)
        if n > 0:
            _LITE_USERS[key] = n
            return
        _LITE_USERS.pop(key, None)
        try:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(key)
        except Exception:   # pragma: no cover - best effort
            pass


# ------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------
_AUTH_WORDS = ("auth", "token", "credential", "password", "permission", "privilege",
               "unauthenticated", "denied")


def _unavailable(loc: Location, e: Exception, what: str, has_token: bool = True) -> StoreError:
    msg = str(getattr(e, "message", "") or e)
    low = msg.lower()
    where = loc.describe()
    if any(w in low for w in _AUTH_WORDS):
        tok = (f"check the token in ${TOKEN_ENV}" if has_token else
               f"set ${TOKEN_ENV} to the server's token (user:password or an API key)")
        return StoreUnavailable(f"{where} refused the credentials while trying to {what}: "
                                f"{tok} ({msg})")
    if "deadline" in low or "timeout" in low or "timed out" in low:
        return StoreUnavailable(f"{where} did not answer in time while trying to {what}; "
                                f"check the address and the network ({msg}). Nothing was "
                                "changed locally.")
    if ("fail connecting" in low or "unavailable" in low or "connect" in low
            or "connection refused" in low or "server unavailable" in low):
        return StoreUnavailable(f"cannot reach {where} ({msg}): is the server running and the "
                                "address (host, port, http/https) right? Nothing was changed "
                                "locally.")
    return StoreError(f"{where} could not {what}: {msg}")


class _Caller:
    """Runs a client call, turning pymilvus/gRPC errors into worded StoreErrors."""

    def __init__(self, loc: Location, timeout: float | None):
        self.loc = loc
        self.timeout = timeout

    def __call__(self, fn, *args, what: str, **kw):
        if self.timeout is not None and "timeout" not in kw:
            kw["timeout"] = max(self.timeout, 30.0)
        try:
            return fn(*args, **kw)
        except StoreError:
            raise
        except Exception as e:   # MilvusException, grpc.RpcError, OSError
            if not _is_client_error(e):
                raise
            raise _unavailable(self.loc, e, what) from None


def _is_client_error(e) -> bool:
    try:
        from pymilvus import MilvusException
        if isinstance(e, MilvusException):
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import grpc
        if isinstance(e, grpc.RpcError):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(e, (OSError, ConnectionError, TimeoutError))
