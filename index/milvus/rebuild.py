"""Re-embedding a Milvus store with another model (a staging collection, then a switch) and
rebuilding its vector index. MilvusStore.rebuild and .reindex call these."""
from __future__ import annotations

import json
import time

from index.milvus.ids import MARK_ID
from index.milvus.schema import (
    FORMAT_VERSION,
    PROP,
    create_collection,
    index_spec,
    is_ours,
    not_ours,
)
from index.store import fingerprint as fpmod
from index.store.adding import EMBED_WINDOW, normalize
from index.store.errors import StoreError
from index.store.text_hash import hash_for_format


def rebuild(store, backend, pooling=None, *, batch_size: int = EMBED_WINDOW,
            embed_batch_size: int | None = None, progress=None, cancel=None) -> None:
    """Re-embed every sentence with another model (or pooling) and switch the store to it.

    The new vectors go into a staging collection; the switch drops the old collection and
    renames the staging one. An interruption before the switch leaves the store on its old
    model; one inside it is finished by the next writable open."""
    store._need_writer()
    fp = fpmod.as_dict(backend.fingerprint(pooling=pooling or store.pooling))
    staging = store._name + "__rebuild"
    c, call = store._client, store._call
    total = store.count()
    with store._mutex:
        store._flush()
        if call(c.has_collection, staging, what="look up the collection"):
            if not is_ours(call(c.describe_collection, staging, what="read the collection")):
                raise not_ours(store.loc, staging, "keeps a rebuild until it is done")
            call(c.drop_collection, staging, what="drop an unfinished rebuild")
        # The new collection is of the current format (its text hash too): a rebuild
        # upgrades a format 1 store.
        create_collection(c, call, store.loc, staging, fp, store._index.get("request", "auto"),
                          {**store._index.get("build", {}),
                           "search": store._index.get("search", {})},
                          next_id=store._next_id, version=store._version)
        new_hash = hash_for_format(FORMAT_VERSION)
        done = 0
        try:
            for _ids, _vecs, recs in store.iter_batches(batch_size, vectors=False):
                texts = [r["text"] for r in recs]
                vecs = normalize(backend.embed(
                    texts, pooling=fp["pooling"], batch_size=embed_batch_size, cancel=cancel,
                    progress=progress and (lambda k, _n, done=done: progress(done + k, total))))
                store._insert(store._columns([r["id"] for r in recs], texts,
                                             [new_hash(t) for t in texts],
                                             [r["metadata"] for r in recs], vecs, time.time()),
                              collection=staging)
                done += len(recs)
                if progress:
                    progress(done, total)
            if store.loc.kind == "server":     # removed ids stay handed out (ids.py)
                top = max(store._id_mark(), store._hint() - 1)
                call(c.insert, staging, data=[store._row(
                    MARK_ID, [1.0] + [0.0] * (int(fp["dim"]) - 1), "", "", None, top, 0.0,
                    None)], what="keep the highest id handed out")
            call(c.flush, staging, what="flush")
            call(c.alter_collection_properties, staging,
                 properties={PROP + "rebuild_complete": "1",
                             PROP + "next_id": str(store._next_id)}, what="finish the rebuild")
        except BaseException:
            try:
                call(c.drop_collection, staging, what="drop an unfinished rebuild")
            except StoreError:
                pass
            raise
        call(c.release_collection, store._name, what="switch collections")
        call(c.drop_collection, store._name, what="switch collections")
        call(c.rename_collection, staging, store._name, what="switch collections")
        # From here the store is on the new model: what is left is tidying up.
        store._fp = fp
        store._dim = int(fp["dim"])
        store._format, store._hash = FORMAT_VERSION, new_hash
        store._hash_ids = None          # hashes of the new scheme, read again when needed
        store._writers.clear()          # a new collection under the old name: its schema read again
        store._dirty = False
        drop_marker(c, call, store._name)
        try:
            call(c.load_collection, store._name, what="load the collection")
        except StoreError as e:
            raise type(e)(f"the store was re-embedded with {fp.get('model')} and switched to "
                          f"it; only loading it for searches failed ({e})") from None

def drop_marker(c, call, name: str) -> None:
    """Remove the rebuild_complete marker (servers before 2.4 cannot drop a property: it stays,
    harmless, since it only counts on a staging collection)."""
    try:
        call(c.drop_collection_properties, name, [PROP + "rebuild_complete"],
             what="finish the rebuild")
    except StoreError:
        pass


def reindex(store, kind: str | None = None) -> None:
    """Rebuild the vector index (optionally of another kind), no model needed."""
    store._need_writer()
    with store._mutex:
        spec = index_spec(store.loc.kind == "lite", kind or store._index.get("request", "auto"),
                          {})
        c, call = store._client, store._call
        store._flush()
        call(c.release_collection, store._name, what="reindex")
        call(c.drop_index, store._name, "vector", what="reindex")
        ip = c.prepare_index_params()
        ip.add_index("vector", index_type=spec["index_type"], metric_type="COSINE",
                     params=spec["build"])
        call(c.create_index, store._name, ip, what="reindex")
        call(c.alter_collection_properties, store._name,
             properties={PROP + "index": json.dumps(spec, sort_keys=True)}, what="reindex")
        call(c.load_collection, store._name, what="load the collection")
        store._index = spec
