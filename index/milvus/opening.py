"""Opening a Milvus store: the Lite folder or the server connection, the collection (created,
or a half-made one dropped, or an interrupted rebuild finished), loading it and checking its
model. MilvusStore.open calls open_store."""
from __future__ import annotations

from core.errors import InputError
from index.milvus import lite
from index.milvus.calls import Caller, close_quietly, connect_server, import_pymilvus
from index.milvus.repair import after_crash_check, remove_damaged_index_files
from index.milvus.schema import (
    KINDS,
    check_collection,
    create_collection,
    finish_interrupted_rebuild,
    half_made_or_foreign,
)
from index.store import fingerprint as fpmod
from index.store.errors import StoreError, StoreNotFound
from index.store.location import parse_location


def open_store(cls, location, *, writable: bool, create: bool, fingerprint, index: str,
               index_params: dict | None, timeout: float, token: str | None, dedup: str | None):
    """A `cls` (MilvusStore) on `location`; the arguments are MilvusStore.open's."""
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
            lock = lite.prepare(loc, writable, create, fingerprint)
            data = lite.reading_copy(loc) if not writable and lite.on_read_only_media(loc) \
                else None
            lite_key = str(data or loc.lite_db)
            client = lite.connect(loc, pymilvus, data)
        version = None
        if loc.kind == "server":
            client, version = connect_server(loc, pymilvus, token, timeout)
        call = Caller(loc, timeout if loc.kind == "server" else None)
        name = loc.collection
        if writable:
            finish_interrupted_rebuild(client, call, name, name + "__rebuild")
        exists = call(client.has_collection, name, what="look up the collection")
        if exists and half_made_or_foreign(client, call, loc, name):
            if not writable:
                raise StoreNotFound(
                    f"the store at {loc} was left half-made by an interrupted first "
                    f"ingest (it holds no sentences)", location=str(loc))
            call(client.drop_collection, name, what="remove a half-made collection")
            exists = False
        if not exists:
            if not create:
                raise StoreNotFound(f"no store at {loc}", location=str(loc))
            if fingerprint is None:
                raise InputError("creating a store needs the model fingerprint")
            create_collection(client, call, loc, name, fpmod.as_dict(fingerprint), index,
                              index_params or {}, version=version)
        if loc.kind == "lite" and writable and not lite.has_manifest(loc):
            lite.write_manifest(loc)     # also ends a creation cut off before it was written
        desc = call(client.describe_collection, name, what="read the collection")
        props, dim, _version = check_collection(loc, name, desc)
        if dedup is None:
            dedup = "map" if loc.kind == "lite" else "query"
        store = cls(loc, client, name, props, dim, lock, writable,
                    timeout if loc.kind == "server" else None, dedup)
        store._call = call
        store._lite_key = lite_key
        store._version = version
        if lite_key:
            lite.register(lite_key)
            registered = True
        try:
            if not _loaded(client, call, name):
                call(client.load_collection, name, what="load the collection")
        except StoreError:
            if loc.kind != "lite" or not remove_damaged_index_files(store):
                raise
            call(client.load_collection, name, what="load the collection")
        if loc.kind == "lite":
            after_crash_check(store)
        if fingerprint is not None:
            fpmod.check(store._fp, fingerprint, "your vectors and queries",
                        where=f"at {loc}", **store.mismatch_remedy(fingerprint))
        return store
    except BaseException:
        if client is not None:
            close_quietly(client)
        if lite_key is not None:
            lite.release(lite_key, registered=registered)
        if lock is not None:
            lock.release()
        raise


def _loaded(client, call, name: str) -> bool:
    """Whether the collection is loaded already (another client did; loading again waits)."""
    try:
        state = call(client.get_load_state, name, what="read the load state")
    except StoreError:
        return False
    st = (state or {}).get("state")
    return getattr(st, "name", str(st)) == "Loaded"
