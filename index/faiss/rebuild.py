"""Rebuilding a FAISS store's index: from the stored vectors (reindex, a grown store's new index
kind), or re-embedding every sentence with another model (rebuild). VectorStore's methods of the
same names call these."""
from __future__ import annotations

import numpy as np

from core.errors import Cancelled, InputError
from index.faiss.faiss_index import MARKING_KINDS, FaissIndex, resolve_kind
from index.store import fingerprint as fpmod
from index.store.adding import EMBED_WINDOW, normalize
from index.store.base import encoder_of

SQ8_RETRAIN_BELOW = 20_000  # retrain the quantiser while it has seen fewer vectors than this
IVF_REBUILD_GROWTH = 2      # re-partition an ivf index once the store doubles past its build


def index_from_db(db, dim: int, kind: str, params: dict, progress=None, cancel=None,
                  size_hint: int | None = None) -> FaissIndex:
    """The FAISS index of the vectors stored in the database (a cancel raises Cancelled).
    size_hint: about how many rows there are (the manifest's count: no COUNT(*) scan)."""
    n = db.count() if size_hint is None else max(0, int(size_hint))
    # Filled in place: chunks joined at the end would hold every vector twice.
    ids = np.empty(n, np.int64)
    vecs = np.empty((n, dim), np.float32)
    filled = 0
    for part_ids, part_vecs in db.vectors(dim):
        end = filled + len(part_ids)
        if end > n:     # rows committed since count() (another connection): make room
            n = max(end, 2 * n)
            ids = np.resize(ids, n)
            vecs = np.resize(vecs, (n, dim))
        ids[filled:end], vecs[filled:end] = part_ids, part_vecs
        filled = end
    ids, vecs = ids[:filled], vecs[:filled]
    return FaissIndex.build(kind, dim, params, ids, vecs, progress=progress, cancel=cancel)


def pending_reindex(index: FaissIndex | None, request: str, threshold: int) -> str | None:
    """What the next save() will rebuild, in words (it can take minutes), or None."""
    if index is None:
        return None
    n = index.ntotal
    if request == "auto" and index.kind == "flat" and n >= threshold:
        kind = resolve_kind("auto", n, threshold)
        return (f"building the approximate ({kind}) index: the store has reached {n:,} "
                f"sentences (exact search up to {threshold:,})")
    if index.kind in MARKING_KINDS and len(index.deleted) > 0.25 * max(index.stored, 1):
        return (f"compacting the {index.kind} index ({len(index.deleted):,} "
                "removed sentences still in it)")
    if index.kind == "ivf" and n >= IVF_REBUILD_GROWTH * index.params.get("built_for", n):
        return f"re-partitioning the ivf index for {n:,} sentences"
    if index.kind == "sq8":
        trained = int(index.params.get("trained_on", 0))
        if trained < SQ8_RETRAIN_BELOW and n >= 2 * max(trained, 1):
            return f"retraining the 8-bit quantiser on {n:,} sentences"
    return None


def rebuild(store, backend, pooling=None, *, batch_size: int = EMBED_WINDOW,
            embed_batch_size: int | None = None, progress=None, cancel=None) -> None:
    """Re-embed every sentence with another model (or pooling) and switch the store to it.

    The new vectors are staged in the database; the switch is one transaction, so an
    interruption leaves the store on its old model, intact."""
    store._need_writer()
    if store._whitening is not None:
        raise InputError(
            f"the store at {store.folder} is whitened with a transform fitted on its model's "
            "vectors, which another model's vectors cannot use: ingest its texts into a new "
            "store instead, whitened again", fix={"kind": "whiten_again"})
    fp = fpmod.as_dict(backend.fingerprint(pooling=pooling or store.pooling))
    db = store._db
    total = db.count()
    with store._mutex:
        db.stage_start()
        done = 0
        try:
            chunk = []
            for pair in db.iter_texts(batch=batch_size):
                chunk.append(pair)
                if len(chunk) >= batch_size:
                    done += _rebuild_chunk(store, chunk, backend, fp, embed_batch_size, cancel,
                                           done, total, progress)
                    chunk = []
            if chunk:
                done += _rebuild_chunk(store, chunk, backend, fp, embed_batch_size, cancel,
                                       done, total, progress)
            with db.transaction():
                db.apply_staged(int(fp["dim"]))
                db.set_meta("fingerprint", fp)
                db.set_meta("dim", int(fp["dim"]))
                db.set_meta("encoders", [encoder_of(backend)])
                db.bump(structural=True)
        finally:
            db.stage_drop()
        store._fp = fp
        store._dim = int(fp["dim"])
        store._encoders = [encoder_of(backend)]
        kind = store._index.kind if store._request != "auto" else None
        store._rebuild_index(kind)
    store.save()


def _rebuild_chunk(store, chunk, backend, fp, embed_batch_size, cancel, done, total,
                   progress) -> int:
    vecs = normalize(backend.embed([t for _, t in chunk], pooling=fp["pooling"],
                                   batch_size=embed_batch_size, cancel=cancel,
                                   progress=progress and (lambda k, _n: progress(done + k, total))))
    store._db.stage_vectors([i for i, _ in chunk], vecs)
    if progress:
        progress(done + len(chunk), total)
    return len(chunk)


def reindex(store, kind: str | None = None, progress=None, cancel=None) -> None:
    """Rebuild the FAISS index from the stored vectors (no model needed) and save it.
    A cancel (Event, checked between chunks) raises Cancelled and changes nothing."""
    store._need_writer()
    if kind is not None:
        resolve_kind(kind, 0)
    with store._mutex:
        old = store._request
        store._request = kind or old
        try:
            store._rebuild_index(progress=progress, cancel=cancel)
        except Cancelled:
            store._request = old
            raise
        if kind is not None:
            with store._db.transaction():
                store._db.set_meta("index_request", kind)
        store._saved_gen = -1
    store.save()
