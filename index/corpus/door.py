"""Corpus use cases, Qt-free: the one door through which the CLI and the app use a corpus.

A corpus is a store (index.store.base.Store: FAISS folder, Milvus Lite or a Milvus server) plus the
model its vectors came from (its fingerprint). The CLI commands (app/cli/store.py) and the
app's jobs (app/gui/corpus_service.py) call these functions and add only wording, progress bars
and threads: nothing here prints. Training reads store corpora here too (`read_training_corpus`),
so core/ never needs to know what a store is.

    opened = open_for_ingest(location, load_backend, model, pooling)   # or create_corpus
    mismatch(store, backend, pooling)                       # None, or what differs
    require_match(store, backend, pooling)                  # or ModelMismatch, its fix as data
    result = ingest(store, items, backend, progress=..., cancel=...)
    hits, timing = search(store, "a query", 10, backend)
    reembed(store, backend, pooling, progress=..., cancel=...)
    remove(store, ids); describe(location, check=...)
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from core.encoder.sources import DEFAULT_MODEL
from core.errors import Cancelled
from core.train.data import dedupe_sentences, read_corpus
from index.opening import open_store, refuse_whitening, store_exists, store_named_by
from index.store import fingerprint as fpmod
from index.store.adding import AddResult
from index.store.base import Store
from index.store.errors import EmptyStore, StoreNotFound


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


def unfinished_whitened(location) -> dict | None:
    """The fingerprint of the store at `location` when it is a whitened one whose first ingest
    was cut off after its transform was written (it holds no sentence; create_whitened_corpus
    finishes it), else None."""
    from index.store.whitening import is_whitened
    try:
        store = open_store(location, writable=False)
    except StoreNotFound:
        return None
    try:
        fp = store.fingerprint_dict
        return fp if is_whitened(fp) and store.count() == 0 else None
    finally:
        store.close()


def create_whitened_corpus(location, backend, pooling: str, items, *, dims: int | None = None,
                           index: str = "auto", batch_size: int = 32, progress=None,
                           cancel=None) -> tuple[Store, AddResult]:
    """A new corpus at `location` holding `items` ((text, metadata) pairs or texts) whitened with
    BERT-whitening fitted on their own vectors (core/evaluate/whitening.py; `dims` directions, all by
    default), and what was added. progress(done, total) counts texts embedded. The texts are
    embedded once, before the store exists: a cancel leaves no store behind. A whitened store
    there that holds no sentence (an earlier call cut off after creating it) is finished: it
    takes the transform fitted now."""
    from core.errors import InputError
    from core.evaluate.whitening import fit_whitening
    from index.store.adding import normalize
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


@dataclass
class Opened:
    """A corpus opened to add to: the store, the model to embed with, and whether they differ."""
    store: Store
    backend: object
    pooling: str
    created: bool
    differ: Mismatch | None


def open_for_ingest(location, load_backend, model: str | None = None, pooling: str | None = None, *,
                    index: str = "auto", create: bool = True) -> Opened | None:
    """The corpus at `location` with the model to add with (`model`/`pooling`, else the store's;
    load_backend(name) loads it), or a new one (the default model) when there is none and
    `create`; None when there is none and not `create`."""
    store = open_corpus(location, writable=True)
    if store is None:
        if not create:
            return None
        backend = load_backend(model or DEFAULT_MODEL)
        pooling = backend.choose_pooling(pooling)
        return Opened(create_corpus(location, backend, pooling, index=index), backend, pooling, True, None)
    try:
        backend = load_backend(model or store.model_name)
        pooling = pooling or store.pooling
        return Opened(store, backend, pooling, False, mismatch(store, backend, pooling))
    except BaseException:
        store.close()
        raise


def require_match(store: Store, backend, pooling: str | None = None, what: str = "the texts to add") -> None:
    """ModelMismatch (its fix as data: ModelMismatch.rebuild) unless `backend` makes this corpus's vectors."""
    fp = backend.fingerprint(pooling or store.pooling)
    fpmod.check(store.model_fingerprint_dict, fp, what, where=f"at {store.where}",
                remedy=lambda: store.mismatch_remedy(fp))


@dataclass
class Ingested(AddResult):
    total: int | None = None        # sentences the corpus holds afterwards (when counted)
    interrupted: BaseException | None = None   # the KeyboardInterrupt/Terminated that stopped it


def ingest(store: Store, items, backend, *, pooling: str | None = None, batch_size: int | None = None,
           progress=None, cancel=None, keep_ids: bool = True, result: Ingested | None = None,
           count: bool = False) -> Ingested:
    """Embed and add texts (or (text, metadata) pairs) in committed batches, then save.

    Texts already in the corpus (after trimming, exact match) are not embedded again. A cancel
    keeps every committed batch (result.cancelled); so does Ctrl-C or SIGTERM (result.interrupted,
    the save still runs). progress(done, total, note): note is a line to show while the index is
    saved (an HNSW rebuild can take a while), else None. `result` is updated in place as batches
    commit (what a caller reports when the store goes away mid-way); `count`: result.total is
    the corpus's size afterwards, and after an interruption result.added is counted from it.
    """
    result = result if result is not None else Ingested(ids=[])
    items = list(items) if not hasattr(items, "__len__") else items
    total = len(items)
    before = store.count() if count else None
    try:
        store.add_stream(items, backend, pooling=pooling, batch_size=batch_size, cancel=cancel,
                         result=result, keep_ids=keep_ids, progress=None if progress is None
                         else lambda done, _t: progress(done, total, None))
    except KeyboardInterrupt as e:
        result.interrupted = e
    try:
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
    except KeyboardInterrupt as e:      # a second signal: the database holds every commit
        result.interrupted = e
    if count:
        result.total = store.count()
        if result.interrupted is not None:
            # a signal can land between a batch's commit and its tally: an ingest only adds
            result.added = result.total - before
    return result


def switch_index(store: Store, kind: str, progress=None) -> bool:
    """Rebuild the store's index as `kind` from its stored vectors (no model); False when it
    already is (or kind is "auto"). progress(done, total) in vectors, where the store reports it."""
    if kind in ("auto", store.index_kind):
        return False
    if getattr(store, "loc", None) is not None and store.loc.is_milvus:
        store.reindex(kind)
    else:
        store.reindex(kind, progress=progress)
    return True


def search(store: Store, query: str, k: int, backend, pooling: str | None = None):
    """(hits, SearchTiming): the k stored sentences nearest to `query`, embedded by `backend`.
    The store checks the model once; an empty corpus (no hits, then counted) is EmptyStore."""
    pooling = pooling or store.pooling
    t0 = time.perf_counter()
    fp = backend.fingerprint(pooling=pooling)
    vec = backend.embed([query], pooling=pooling)[0]
    t1 = time.perf_counter()
    hits = store.search(vec[None], k, fingerprint=fp)[0]
    timing = SearchTiming((time.perf_counter() - t0) * 1000, (t1 - t0) * 1000)
    if not hits and store.count() == 0:
        raise EmptyStore(f"{store.where} holds no sentences yet: nothing to search",
                         location=str(store.where))
    return hits, timing


def search_many(store: Store, queries, k: int, backend, pooling: str | None = None) -> list:
    """The hits of each query (a list per query), embedded by `backend` in one call."""
    pooling = pooling or store.pooling
    vecs = backend.embed(list(queries), pooling=pooling)
    return store.search(vecs, k, fingerprint=backend.fingerprint(pooling=pooling))


def reembed(store: Store, backend, pooling: str, *, progress=None, cancel=None) -> None:
    """Re-embed every sentence with `backend` (the corpus then belongs to that model)."""
    store.rebuild(backend, pooling=pooling, progress=progress, cancel=cancel)


def remove(store: Store, ids) -> tuple[list, dict]:
    """Delete `ids` and save: (the ids that were there, their records {id: {text, metadata}}),
    what an undo adds back. Ids outside the 64-bit range name no sentence."""
    possible = [int(i) for i in ids if 0 <= int(i) < 1 << 63]
    records = store.get(possible)
    gone = store.remove(possible)
    store.save()
    return gone, records


@dataclass
class Described:
    """What a corpus holds (Store.info), what a --check/--repair found, and whether it is an
    unverified copy (the source it was being copied from)."""
    info: dict
    report: dict | None = None
    meaning: object = None          # index.corpus.meaning_check.MeaningCheck, or None
    model_error: Exception | None = None    # why the store's model could not be loaded for it
    incomplete_source: str | None = None


def describe(location, *, check: bool = False, repair: bool = False, load_backend=None) -> Described:
    """A FAISS store's info, verified (check) or repaired; with load_backend(name), a sample of
    its texts embedded again with its model (check_meaning)."""
    from core.errors import EncoderscopeError
    from index.corpus.migrate import incomplete_source
    if repair:
        store = open_store(location, writable=True, repair=True, verify=True)
    else:
        store = open_store(location, writable=False, **({"verify": True} if check else {}))
    found = Described({})
    try:
        found.report = store.check_report if (check or repair) else None
        found.info = store.info()
        if load_backend is not None and store.count():
            try:
                backend = load_backend(store.model_name)
            except EncoderscopeError as e:
                found.model_error = e
            else:
                found.meaning = check_meaning(store, backend)
    finally:
        store.close()
    found.incomplete_source = incomplete_source(location)
    return found


def check_meaning(store: Store, backend):
    """A sample of the store's texts embedded again with `backend` (MeaningCheck); ModelMismatch
    (its fix as data) when it is not the model that wrote the vectors."""
    from index.corpus.meaning_check import check_meaning as sample_check
    from index.corpus.meaning_check import describe_failure
    from index.store.errors import ModelMismatch
    require_match(store, backend, store.pooling, "vectors of the model now at hand")
    result = sample_check(store, backend)
    if not result.ok:
        remedy = store.mismatch_remedy(backend.fingerprint(store.pooling))
        raise ModelMismatch(f"{describe_failure(result)}; {remedy['hint']}", store_model=store.model_name,
                            other_model=store.model_name, rebuild=remedy["rebuild"])
    return result


def check_milvus(location, load_backend, model: str | None = None, repair: bool = False,
                 full: bool = False) -> tuple[dict, int]:
    """A Milvus store's rows read back and a sample (`full`: every vector) re-embedded with `model`
    (else its own); with `repair`, what the check finds is repaired and checked again
    (index/milvus/check.py): (report, count after)."""
    store = open_store(location, writable=bool(repair))
    try:
        report = store.check(load_backend(model or store.model_name), repair=bool(repair), full=full)
        return report, store.count()
    finally:
        store.close()


def read_rows(store: Store) -> tuple[list[int], list[str]]:
    """(ids, texts) of every stored sentence, in id order."""
    ids, texts = [], []
    for rec in store.iter():
        ids.append(rec["id"])
        texts.append(rec["text"])
    return ids, texts


def is_store(source) -> bool:
    """Whether `source` names a store (a FAISS folder or its database file, milvus-lite:, a server)."""
    return store_named_by(source) is not None


def read_training_corpus(source, limit: int | None = None, encoding: str | None = None) -> list[str]:
    """Training sentences from a store (in id order) or a .txt/.csv/.jsonl file (core's reader, in
    `encoding` when not UTF-8), trimmed and de-duplicated: the reader the training command and
    panel are given."""
    loc = store_named_by(source)
    if loc is None:
        return read_corpus(source, limit=limit, encoding=encoding)
    store = open_store(loc, writable=False)
    try:
        _, texts = read_rows(store)
    finally:
        store.close()
    return dedupe_sentences(texts, limit, source)
