"""The collection an Encoderscope Milvus store is: its fields, its properties, its vector index,
and the checks that an existing collection is one of ours and readable by this version.

Collection schema (one collection per store):
    id      INT64 primary key, assigned by the store (1, 2, 3, ... like the FAISS store)
    vector  FLOAT_VECTOR(dim), L2-normalised, COSINE metric
    text    VARCHAR(65535)
    hash    VARCHAR(64): index.store.text_hash of the text (hex), for duplicate detection;
            format 1 collections hold SHA-256 hex instead and keep it
    source  VARCHAR(4096), nullable     row  INT64, nullable
    added   DOUBLE (unix time)          meta JSON, nullable (user metadata keys)
Collection properties: encoderscope.format, .format_version, .fingerprint (JSON), .model, .dim,
.pooling, .index (JSON: kind + build/search params), .next_id (ids are reserved here before
each insert; on a server only a hint: see ids.py), .placeholders ("1": the server has no
nullable fields, so a missing source is stored as "", row as -1 and meta as {}).

Servers: Milvus 2.3 or newer. 2.3 indexes a VARCHAR with Trie (INVERTED came in 2.4);
nullable fields came in 2.5. A collection is complete once both indexes exist: creating
builds them in separate calls, and a collection of ours left without them and without rows
is removed by the next writable open (rows are only written after creating succeeded). A
collection without the format property is never dropped or written: it is not ours.
"""
from __future__ import annotations

import json

from index.store import fingerprint as fpmod
from index.store.errors import StoreCorrupted, StoreError
from index.store.location import Location

FORMAT = "encoderscope-milvus"
FORMAT_VERSION = 2           # 1: SHA-256 text hashes (still read and written as they are)
PROP = "encoderscope."
MAX_TEXT_BYTES = 65_535
MAX_SOURCE_BYTES = 4_096
FIELDS = ["text", "source", "row", "added", "meta"]     # what a record is read from
KINDS = ("auto", "flat", "hnsw", "ivf", "sq8")
MIN_SERVER = (2, 3)
NO_ROW = -1                  # `row` on a server without nullable fields
# What each request becomes. Milvus Lite: exact FLAT (its HNSW does not make queries faster:
# every query still walks each row in Python to apply deletes). Servers: HNSW for "auto".
SERVER_INDEX = {
    "flat": ("FLAT", {}, {}),
    "hnsw": ("HNSW", {"M": 32, "efConstruction": 200}, {"ef": 128}),
    "ivf": ("IVF_FLAT", {"nlist": 1024}, {"nprobe": 32}),
    "sq8": ("IVF_SQ8", {"nlist": 1024}, {"nprobe": 32}),
}


def cut(s: str, limit: int) -> str:
    """s cut to at most `limit` UTF-8 bytes (on a character boundary)."""
    raw = s.encode("utf-8", "surrogatepass")
    if len(raw) <= limit:
        return s
    return raw[:limit].decode("utf-8", "ignore")


def index_spec(lite: bool, request: str, params: dict) -> dict:
    """The vector index a request ("auto", "flat", ...) becomes, with build and search params."""
    params = dict(params or {})
    search = dict(params.pop("search", {}) or {})
    kind = request
    if request == "auto":
        kind = "flat" if lite else "hnsw"
    index_type, build, sp = SERVER_INDEX[kind]
    return {"kind": kind, "request": request, "index_type": index_type,
            "build": {**build, **params}, "search": {**sp, **search}}


def server_version(text: str) -> tuple[int, int]:
    """(major, minor) of a server's version string ("v2.3.5-lite", "2.5.4")."""
    import re
    m = re.search(r"(\d+)\.(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def has_nullable(version: tuple[int, int] | None) -> bool:
    """Whether the server keeps nullable fields (Milvus Lite: version None, it does)."""
    return version is None or version >= (2, 5)


def required_indexes(loc: Location) -> set:
    return {"vector", "hash"} if loc.kind == "server" else {"vector"}


def create_collection(client, call, loc: Location, name: str, fpd: dict, request: str,
                      params: dict, next_id: int = 1, format_version: int = FORMAT_VERSION,
                      extra_props: dict | None = None,
                      version: tuple[int, int] | None = None) -> None:
    """Create the collection `name` for vectors of the model fingerprint `fpd`, with its
    indexes; a failure on the way drops what was made (version: the server's (major,
    minor), None on Lite)."""
    from pymilvus import DataType, MilvusClient
    dim = int(fpd["dim"])
    spec = index_spec(loc.kind == "lite", request, params)
    nullable = has_nullable(version)
    optional = {"nullable": True} if nullable else {}
    schema = MilvusClient.create_schema(
        auto_id=False, enable_dynamic_field=False,
        description=f"Encoderscope sentences embedded with {fpmod.describe(fpd)}")
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("text", DataType.VARCHAR, max_length=MAX_TEXT_BYTES)
    schema.add_field("hash", DataType.VARCHAR, max_length=64)
    schema.add_field("source", DataType.VARCHAR, max_length=MAX_SOURCE_BYTES, **optional)
    schema.add_field("row", DataType.INT64, **optional)
    schema.add_field("added", DataType.DOUBLE)
    schema.add_field("meta", DataType.JSON, **optional)
    ip = client.prepare_index_params()
    ip.add_index("vector", index_type=spec["index_type"], metric_type="COSINE",
                 params=spec["build"])
    if loc.kind == "server":   # a real scalar index on a server; Lite scans anyway
        ip.add_index("hash", index_type="INVERTED" if version >= (2, 4) else "Trie")
    props = {PROP + "format": FORMAT, PROP + "format_version": str(int(format_version)),
             PROP + "fingerprint": json.dumps(fpd, sort_keys=True),
             PROP + "model": str(fpd.get("model")), PROP + "dim": str(dim),
             PROP + "pooling": str(fpd.get("pooling", "mean")),
             PROP + "index": json.dumps(spec, sort_keys=True),
             PROP + "next_id": str(int(next_id))}
    if not nullable:
        props[PROP + "placeholders"] = "1"
    props.update(extra_props or {})
    # Session: a search sees this process's own writes without waiting for the server's clock
    # tick (Strong waits ~200 ms per call); writers read others' rows under the writer lock.
    call(client.create_collection, name, schema=schema, consistency_level="Session",
         properties=props, what="create the collection")
    try:
        call(client.create_index, name, ip, what="create the collection's indexes")
    except BaseException:
        try:
            call(client.drop_collection, name, what="remove the half-made collection")
        except Exception:   # noqa: BLE001,S110  (the next writable open removes it)
            pass
        raise


def not_ours(loc: Location, name: str, role: str = "") -> StoreError:
    """The refusal for a collection Encoderscope did not make, in a store's place (or, with
    role, in the place of one of its companions)."""
    what = f"where the store {role}" if role else "where the store would be"
    return StoreError(
        f"the collection {name} on {loc.describe()} was not made by Encoderscope (it has no "
        f"{PROP}format property), {what}; it was left as it is: choose another collection "
        f"for the store with ?collection=NAME")


def is_ours(desc: dict) -> bool:
    return (desc.get("properties") or {}).get(PROP + "format") == FORMAT


def half_made_or_foreign(client, call, loc: Location, name: str) -> bool:
    """True for a collection of ours whose creating stopped before its indexes were built
    (it holds no rows: the caller may drop it). A collection Encoderscope did not make, or
    one of ours without indexes that holds rows, is refused: never dropped."""
    desc = call(client.describe_collection, name, what="read the collection")
    if not is_ours(desc):
        raise not_ours(loc, name)
    have = set(call(client.list_indexes, name, what="read the collection's indexes") or [])
    if required_indexes(loc) <= have:
        return False
    stats = call(client.get_collection_stats, name, what="count the collection's rows") or {}
    rows = int(stats.get("row_count", 0) or 0)
    if rows:
        raise StoreCorrupted(
            f"the collection {name} on {loc.describe()} has lost its indexes but holds {rows} "
            "rows; it was left as it is: rebuild its indexes by re-embedding the store, or choose "
            "another collection with ?collection=NAME", path=loc.path, fix={"kind": "reembed"})
    return True


def check_collection(loc: Location, name: str, desc: dict) -> tuple[dict, int, int]:
    """(properties, vector dimension, format version) of an existing collection, or
    StoreCorrupted when it is not an Encoderscope store this version reads."""
    props = dict(desc.get("properties") or {})
    if props.get(PROP + "format") != FORMAT:
        raise not_ours(loc, name)
    version = int(props.get(PROP + "format_version", 1))
    if version > FORMAT_VERSION:
        raise StoreCorrupted(f"the store at {loc} has format version {version}; this "
                             f"Encoderscope reads versions up to {FORMAT_VERSION}", path=loc.path)
    dim = next((int(f["params"]["dim"]) for f in desc["fields"] if f["name"] == "vector"), None)
    if dim is None or dim != int(props.get(PROP + "dim", dim)):
        raise StoreCorrupted(f"the collection at {loc} has no vector field matching its "
                             "recorded dimension", path=loc.path)
    return props, dim, version


def finish_interrupted_rebuild(client, call, name: str, staging: str) -> None:
    """A rebuild that stopped between dropping the old collection and renaming the new one:
    finish it. A staging collection of ours that was not complete is dropped; one that
    Encoderscope did not make is left alone (rebuild refuses to use its name)."""
    if not call(client.has_collection, staging, what="look up the collection"):
        return
    desc = call(client.describe_collection, staging, what="read the collection")
    if not is_ours(desc):
        return
    complete = (desc.get("properties") or {}).get(PROP + "rebuild_complete") == "1"
    if not call(client.has_collection, name, what="look up the collection") and complete:
        call(client.rename_collection, staging, name, what="finish the rebuild")
        try:
            call(client.drop_collection_properties, name, [PROP + "rebuild_complete"],
                 what="finish the rebuild")
        except StoreError:
            pass     # servers before 2.4 cannot drop a property; it only counts on a staging one
    else:
        call(client.drop_collection, staging, what="drop an unfinished rebuild")
