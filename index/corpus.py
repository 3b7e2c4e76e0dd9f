"""Corpus use cases, Qt-free: what the CLI and the app's worker jobs both do with a corpus.

A corpus is a store (index.base.Store: FAISS folder, Milvus Lite or a Milvus server) plus the
model its vectors came from (its fingerprint). The CLI commands (app/cli/store.py) and the
app's jobs (app/gui/corpus_service.py) call these functions; they add only wording, progress bars
and threads. Training reads store corpora here too (`read_training_corpus`), so core/ never
needs to know what a store is.

    store = open_corpus(location, writable=True)            # None: nothing there yet
    store = create_corpus(location, backend, "mean")        # a new, empty corpus
    mismatch(store, backend, pooling)                       # None, or what differs
    result = ingest(store, items, backend, progress=..., cancel=...)
    hits, timing = search(store, "a query", 10, backend)
    reembed(store, backend, pooling, progress=..., cancel=...)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from core.errors import Cancelled
from core.train.data import dedupe_sentences, read_corpus
from index import fingerprint as fpmod
from index.base import AddResult, Store
from index.errors import StoreNotFound
from index.faiss.sentences import DB_NAME
from index.locations import open_store, parse_location, refuse_whitening, store_exists


@dataclass
class Mismatch:
    """The corpus's vectors and the chosen model disagree (another model, pooling or width)."""
    store: dict          # the store's fingerprint, as stored
    chosen: dict         # the chosen model's fingerprint

    def describe(self) -> tuple[str, str]:
        return fpmod.describe(self.store), fpmod.describe(self.chosen)


@dataclass
class SearchTiming:
    total_ms: float      # embedding the query + searching + fetching the texts
    embed_ms: float      # of total_ms: embedding the query


def open_corpus(location, *, writable: bool = False, repair: bool = False) -> Store | None:
    """The store at `location`, or None when there is none yet (a server: no collection)."""
    if not store_exists(location):
        return None
    try:
        if writable:
            return open_store(location, writable=True, repair=repair)
        return open_store(location, writable=False)
    except StoreNotFound:
        return None


def create_corpus(location, backend, pooling: str, index: str = "auto") -> Store:
    """A new, empty corpus at `location` for `backend`'s vectors pooled by `pooling`."""
    return open_store(location, writable=True, create=True, fingerprint=backend.fingerprint(pooling),
                      index=index)


def create_whitened_corpus(location, backend, pooling: str, items, *, dims: int | None = None,
                           index: str = "auto", batch_size: int = 32, progress=None,
                           cancel=None) -> tuple[Store, AddResult]:
    """A new corpus at `location` holding `items` ((text, metadata) pairs or texts) whitened with
    BERT-whitening fitted on their own vectors (core/evaluate/whitening.py; `dims` directions, all by
    default), and what was added. progress(done, total) counts texts embedded. The texts are
    embedded once, before the store exists: a cancel leaves no store behind."""
    from core.errors import InputError
    from core.evaluate.whitening import fit_whitening
    from index.base import normalize
    refuse_whitening(location)
    items = [(it, None) if isinstance(it, str) else tuple(it) for it in items]
    texts = list(dict.fromkeys(t.strip() for t, _ in items if t.strip()))
    if len(texts) < 2:
        raise InputError("whitening is fitted on the texts being ingested: give at least two "
                         "(more than the whitened dimensions)")
    if dims is not None and not 1 <= dims <= backend.dim:
        raise InputError(f"the whitening dimensions must be between 1 and {backend.dim} (the "
                         f"model's width), not {dims}")
    vectors = normalize(backend.embed(texts, pooling=pooling, batch_size=batch_size, cancel=cancel,
                                      progress=progress))
    whitening = fit_whitening(vectors, dims)
    fp = backend.fingerprint(pooling)
    store = open_store(location, writable=True, create=True, fingerprint=fp, index=index,
                       whitening=whitening)
    try:
        row = {t: i for i, t in enumerate(texts)}
        kept = [(t.strip(), m) for t, m in items if t.strip()]
        result = store.add([t for t, _ in kept], vectors[[row[t] for t, _ in kept]],
                           [m for _, m in kept], fingerprint=fp)
        store.save()
    except BaseException:
        store.close()
        raise
    return store, result


def mismatch(store: Store, backend, pooling: str | None = None) -> Mismatch | None:
    """None when `backend` (pooling: the store's unless given) makes vectors this corpus can hold."""
    chosen = fpmod.as_dict(backend.fingerprint(pooling or store.pooling))
    if fpmod.compatible(store.model_fingerprint_dict, chosen):
        return None
    return Mismatch(store.fingerprint_dict, chosen)


def ingest(store: Store, items, backend, *, pooling: str | None = None, batch_size: int = 256,
           progress=None, cancel=None, keep_ids: bool = True) -> AddResult:
    """Embed and add texts (or (text, metadata) pairs) in committed batches, then save.

    Texts already in the corpus (after trimming, exact match) are not embedded again. A cancel
    keeps every committed batch (result.cancelled). progress(done, total, note): note is a line
    to show while the index is saved (an HNSW rebuild can take a while), else None.
    """
    result = AddResult(ids=[])
    items = list(items) if not hasattr(items, "__len__") else items
    total = len(items)
    store.add_stream(items, backend, pooling=pooling, batch_size=batch_size, cancel=cancel,
                     result=result, keep_ids=keep_ids,
                     progress=None if progress is None else lambda done, _t: progress(done, total, None))
    note = store.pending_reindex()
    if progress is not None:
        progress(total, total, note)
    if note and not result.cancelled:
        try:    # the long rebuild, in chunks: progress in vectors, cancel between chunks
            store.prepare_index(cancel=cancel, progress=None if progress is None else
                                lambda done, n: progress(done, n, note))
        except Cancelled:
            result.cancelled = True     # the previous index is kept and saved as it is
    store.save()
    return result


def search(store: Store, query: str, k: int, backend, pooling: str | None = None):
    """(hits, SearchTiming): the k stored sentences nearest to `query`, embedded by `backend`."""
    pooling = pooling or store.pooling
    t0 = time.perf_counter()
    vec = backend.embed([query], pooling=pooling)[0]
    t1 = time.perf_counter()
    hits = store.search(vec, k, fingerprint=backend.fingerprint(pooling=pooling))
    return hits, SearchTiming((time.perf_counter() - t0) * 1000, (t1 - t0) * 1000)


def reembed(store: Store, backend, pooling: str, *, progress=None, cancel=None) -> None:
    """Re-embed every sentence with `backend` (the corpus then belongs to that model)."""
    store.rebuild(backend, pooling=pooling, progress=progress, cancel=cancel)


def read_rows(store: Store) -> tuple[list[int], list[str]]:
    """(ids, texts) of every stored sentence, in id order."""
    ids, texts = [], []
    for rec in store.iter():
        ids.append(rec["id"])
        texts.append(rec["text"])
    return ids, texts


def is_store(source) -> bool:
    """Whether `source` names a store (a FAISS folder, milvus-lite:, a server, store.db)."""
    text = str(source).strip()
    if not text:
        return False
    loc = parse_location(text)
    if loc.is_milvus:
        return True
    path = loc.path
    return path.name == DB_NAME or (path.is_dir() and (path / DB_NAME).is_file())


def read_training_corpus(source, limit: int | None = None, encoding: str | None = None) -> list[str]:
    """Training sentences from a store (in id order) or a .txt/.csv/.jsonl file (core's reader, in
    `encoding` when not UTF-8), trimmed and de-duplicated: the reader the training command and
    panel are given."""
    if not is_store(source):
        return read_corpus(source, limit=limit, encoding=encoding)
    text = str(source).strip()
    loc = parse_location(text)
    if not loc.is_milvus and loc.path.name == DB_NAME:
        loc = parse_location(loc.path.parent)
    store = open_store(loc, writable=False)
    try:
        _, texts = read_rows(store)
    finally:
        store.close()
    return dedupe_sentences(texts, limit, source)
