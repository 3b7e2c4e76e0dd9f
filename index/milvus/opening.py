"""Opening a Milvus store: the Lite folder or the server connection, the collection (created,
or a half-made one dropped, or an interrupted rebuild finished), loading it and checking its
model. MilvusStore.open calls open_store."""
from __future__ import annotations

import contextlib

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
            _tidy_rebuild(client, call, loc, name)
        if not _ready(client, call, loc, name, writable=writable, create=create,
                      fingerprint=fingerprint):
            with _creating(client, call, loc, name):
                # again under the writer lock: another writer may have made it meanwhile
                if not _ready(client, call, loc, name, writable=True, create=create,
                              fingerprint=fingerprint, drop_half_made=True):
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
                        where=f"at {loc}", remedy=lambda: store.mismatch_remedy(fingerprint))
        return store
    except BaseException:
        if client is not None:
            close_quietly(client)
        if lite_key is not None:
            lite.release(lite_key, registered=registered)
        if lock is not None:
            lock.release()
        raise


def _ready(client, call, loc, name: str, *, writable: bool, create: bool, fingerprint,
           drop_half_made: bool = False) -> bool:
    """Whether the collection is there and whole; False where it is to be made (refused where
    it may not be). A half-made one (creation stopped before its indexes) is dropped only with
    drop_half_made: on a server, under the writer lock that its creator holds while it makes
    it, so a collection another writer is making right now is never taken for one."""
    exists = call(client.has_collection, name, what="look up the collection")
    if exists and half_made_or_foreign(client, call, loc, name):
        if not writable:
            raise StoreNotFound(
                f"the store at {loc} is being made by another writer, or was left half-made by an "
                f"interrupted first ingest (it holds no sentences)", location=str(loc))
        if drop_half_made:
            call(client.drop_collection, name, what="remove a half-made collection")
        exists = False
    if not exists:
        if not create:
            raise StoreNotFound(f"no store at {loc}", location=str(loc))
        if fingerprint is None:
            raise InputError("creating a store needs the model fingerprint")
    return exists


@contextlib.contextmanager
def _creating(client, call, loc, name: str):
    """A collection is made (or a half-made one dropped) under the server's writer lock: three
    writers starting at once on a new collection make it once, and none drops the collection
    another is still building. Lite and FAISS: the folder's lock is held already."""
    if loc.kind != "server":
        yield
        return
    from index.milvus.lease import ServerWriterLock
    lock = ServerWriterLock(client, call, name, loc.describe()).acquire()
    call.lease = lock
    try:
        yield
    finally:
        call.lease = None
        lock.release()


def _tidy_rebuild(client, call, loc, name: str) -> None:
    """Finish or drop a staging collection of ours (NAME__rebuild) whose rebuild stopped. On a
    server only under the writer lock, and only when no live writer holds it: a rebuild holds
    the lock while it runs, so a writable open beside a running rebuild leaves its staging
    collection alone (Lite: the folder's lock, taken already, is the one writer)."""
    staging = name + "__rebuild"
    if loc.kind != "server":
        finish_interrupted_rebuild(client, call, name, staging)
        return
    if not call(client.has_collection, staging, what="look up the collection"):
        return
    from index.milvus.lease import ServerWriterLock
    lock = ServerWriterLock(client, call, name, loc.describe())
    if not lock.try_acquire():
        return          # its owner may be running: the next writable open tidies it
    call.lease = lock
    try:
        finish_interrupted_rebuild(client, call, name, staging)
    finally:
        call.lease = None
        lock.release()


def _loaded(client, call, name: str) -> bool:
    """Whether the collection is loaded already (another client did; loading again waits)."""
    try:
        state = call(client.get_load_state, name, what="read the load state")
    except StoreError:
        return False
    st = (state or {}).get("state")
    return getattr(st, "name", str(st)) == "Loaded"
