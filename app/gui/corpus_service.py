"""The corpus and its vector store, seen from the app: open/create, ingest, delete, re-embed,
search. Knows nothing of widgets; every store operation runs as a job (app/gui/workers.py).

Store-changing jobs share the job key ``"store"``, so only one runs at a time; searches use
``"search"`` and run beside them (the store's own lock keeps FAISS consistent).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.gui.logs import log
from app.gui.settings import stores_dir
from app.gui.state import ModelChoice, freeze_long_lived
from core.assets import sample_corpus
from core.errors import Cancelled, EncoderscopeError, InputError

SAMPLE_CORPUS: Path | None = None   # the corpus a new sample store is filled with; None: the bundled one
SAMPLE_STORE = "sample"
# Sentences committed per transaction. The store embeds a window of up to index.base.EMBED_WINDOW
# sentences (those it does not hold yet) without holding its lock, then commits them this many
# at a time: searches wait only for a commit, never for the encoder.
CHUNK = 64


@dataclass
class IngestResult:
    ids: list = field(default_factory=list)       # ids of every committed text (duplicates: existing id)
    texts: list = field(default_factory=list)
    added: int = 0
    duplicates: int = 0
    truncated: int = 0
    cancelled: bool = False
    skipped: list = field(default_factory=list)   # BadLine from the file readers
    no_letters: int = 0                           # lines skipped for having no letter or digit
    seconds: float = 0.0

    def summary(self) -> str:
        parts = [f"Added {self.added:,} sentence{'s' if self.added != 1 else ''}"]
        if self.duplicates:
            parts.append(f"{self.duplicates:,} already there")
        if self.truncated:
            parts.append(f"{self.truncated:,} cut to the model's maximum length")
        if self.skipped:
            b = self.skipped[0]
            parts.append(f"skipped {len(self.skipped):,} bad line(s), e.g. line {b.row}: {b.reason}")
        if self.no_letters:
            parts.append(f"skipped {self.no_letters:,} line(s) without any letter or digit")
        text = ", ".join(parts)
        return text + (" — cancelled; what was committed is kept" if self.cancelled else "")


@dataclass
class SearchResult:
    query: str
    k: int
    hits: list
    ms: float
    seq: int = 0
    embed_ms: float = 0.0      # of ms: embedding the query (the rest: FAISS scan + fetching texts)


# ---- worker-side functions (run in app/gui/workers.py threads; the use cases are index.corpus) -------
def open_store_job(location, progress=None, cancel=None):
    """(store, ids, texts), or None when there is no store at ``location`` yet.

    location: a folder (FAISS), milvus-lite:FOLDER or http(s)://HOST:PORT (index.locations)."""
    from index import corpus
    from index.locations import describe_location

    progress(0, 0, f"Opening {describe_location(location)} …")
    store = corpus.open_corpus(location, writable=True, repair=True)
    if store is None:
        return None
    try:
        ids, texts = corpus.read_rows(store)
    except BaseException:
        store.close()
        raise
    return store, ids, texts


def ingest_job(store, backend, pooling, texts, metadata=None, skipped=(), progress=None, cancel=None,
               chunk=CHUNK):
    """Embed and commit ``texts`` in chunks (texts already stored are not embedded again); a
    cancel keeps every committed chunk."""
    from index import corpus

    t0 = time.perf_counter()
    texts = list(texts)
    metadata = list(metadata) if metadata is not None else [None] * len(texts)
    total = len(texts)
    label = f"Embedding {total:,} sentence{'s' if total != 1 else ''}"
    progress(0, total, label)

    def report(done, total, note):
        progress(done, total, (note[0].upper() + note[1:] + " …") if note else
                 label if done < total else "Saving the index …")
    added = corpus.ingest(store, list(zip(texts, metadata)), backend, pooling=pooling, batch_size=chunk,
                          progress=report, cancel=cancel)
    committed = len(added.ids)
    return IngestResult(ids=added.ids, texts=texts[:committed], added=added.added,
                        duplicates=added.duplicates, truncated=added.truncated,
                        cancelled=added.cancelled, skipped=list(skipped),
                        seconds=time.perf_counter() - t0)


@dataclass
class NeedsEncoding:
    """import_job's answer when the file is not UTF-8: nothing was added; ask for an encoding."""
    path: str              # the file
    column: str | None     # the CSV column / JSONL field chosen
    message: str           # what could not be read, for the dialog


def import_job(store, backend, pooling, path, column=None, encoding=None, progress=None, cancel=None):
    from app.gui.panels.corpus.importers import NotInEncoding, read_sentences

    progress(0, 0, f"Reading {Path(path).name} …")
    try:   # the first try is strict about the encoding; a chosen one skips what it cannot read
        found = read_sentences(path, column, cancel=cancel, encoding=encoding,
                               strict_encoding=encoding is None)
    except NotInEncoding as e:
        return NeedsEncoding(str(path), column, str(e))
    if cancel.is_set():
        raise Cancelled("cancelled")
    result = ingest_job(store, backend, pooling, found.texts, found.metadata, found.bad,
                        progress=progress, cancel=cancel)
    result.no_letters = found.no_letters
    return result


def create_store_job(location, backend, pooling, sample=None, progress=None, cancel=None):
    """Create a store for ``backend`` and fill it with the sentences of the file ``sample`` (None:
    leave it empty)."""
    from app.gui.panels.corpus.importers import read_sentences
    from index.corpus import create_corpus

    store = create_corpus(location, backend, pooling)
    result = IngestResult()
    if sample is not None:
        found = read_sentences(sample)
        meta = [{"source": Path(sample).name, "row": m["row"]} for m in found.metadata]
        result = ingest_job(store, backend, pooling, found.texts, meta, progress=progress, cancel=cancel)
    else:
        store.save()
    return store, result


def close_store_job(store):
    store.close()


def remove_job(store, ids, progress=None, cancel=None):
    """Delete ``ids``; returns (the ids that were there, their records {id: {text, metadata}}):
    what Undo adds back."""
    from index import corpus
    progress(0, 0, f"Deleting {len(ids):,} sentence(s) …")
    return corpus.remove(store, ids)


def rebuild_job(store, backend, pooling, progress=None, cancel=None):
    from index import corpus
    total = store.count()
    label = f"Re-embedding {total:,} sentences with {backend.model_name} ({pooling})"
    progress(0, total, label)
    corpus.reembed(store, backend, pooling, progress=lambda d, t: progress(d, t, label), cancel=cancel)
    return corpus.read_rows(store)


def search_job(store, backend, pooling, query, k, seq=0):
    from index import corpus
    hits, timing = corpus.search(store, query, k, backend, pooling)
    return SearchResult(query, k, hits, timing.total_ms, seq, timing.embed_ms)


# ---- the UI-side service ------------------------------------------------------------------------
class CorpusService(QObject):
    rows_reset = Signal(object, object)      # ids, texts
    rows_added = Signal(object, object)      # ids, texts (may repeat known ids: duplicates)
    rows_removed = Signal(object)            # ids
    mismatch = Signal(str, str, int)         # store model, chosen model, sentences
    ingest_done = Signal(object)             # IngestResult
    undo_changed = Signal(int)               # sentences the last delete removed (0: nothing to undo)
    encoding_needed = Signal(object)         # NeedsEncoding: an import that is not UTF-8

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.location = None       # index.locations.Location of the open (or opening) store
        self._fill_new_with_sample = True
        self.store_choice: ModelChoice | None = None   # last choice that matched the store
        self._create_pending = False
        self._asking = False
        self._started = False
        self._count = 0            # rows in the store, kept here: no SQL on the UI thread
        self.last_deleted: list[dict] = []   # records of the last delete, for Undo (this store only)
        self.rows_reset.connect(lambda ids, _t: self._set_count(len(ids)))
        self.rows_removed.connect(lambda gone: self._set_count(self._count - len(gone)))
        state.corpus = self

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self, folder=None) -> None:
        """Open ``folder`` (a store location; default: the sample store) and load the model,
        both in workers."""
        if not self._started:
            self._started = True
            self.state.backend_changed.connect(self._on_backend)
            self.state.choice_changed.connect(self._on_choice)
        self.open(folder or (stores_dir() / SAMPLE_STORE))
        if self.state.backend is None:
            self.state.load_initial()

    @property
    def store(self):
        return self.state.store

    @property
    def busy(self) -> bool:
        return self.state.jobs.is_running("store")

    @property
    def folder(self) -> Path | None:
        """The store's folder (FAISS or Milvus Lite); None for a server or before opening."""
        return self.location.path if self.location is not None else None

    def open(self, location, *, sample_if_new: bool = True) -> None:
        """Open the store at ``location`` (a folder, milvus-lite:FOLDER or http(s)://HOST:PORT);
        a missing one is created for the current model, with the sample corpus in it when
        ``sample_if_new``, else empty."""
        from index.locations import parse_location
        try:
            loc = parse_location(location)
        except InputError as e:
            self.state.error.emit(f"Cannot open the corpus: {e}")
            return
        previous = (self.location, self._fill_new_with_sample)

        def failed(message):
            if self.state.store is not None:      # keep showing the corpus that is open
                self.location, self._fill_new_with_sample = previous
            self.state.error.emit(message)

        def opened(value):
            if value is None:      # created once the model is loaded and this job is over
                self._create_pending = True
                return
            store, ids, texts = value
            self._set_store(store, ids, texts)
            self.state.status.emit(f"Opened {loc.describe()}: {len(ids):,} sentences")
            # (store repair) opening repairs a FAISS store: say what it set aside
            aside = (getattr(store, "check_report", None) or {}).get("set_aside") or []
            if aside:
                self.state.error.emit(
                    f"{len(aside)} damaged sentence(s) (id {', '.join(map(str, aside[:20]))}) "
                    "failed their checksum and were set aside (kept in the table 'damaged' of "
                    "store.db); import those texts again to search them")

        self.location, self._fill_new_with_sample = loc, sample_if_new
        if self._run_store("Opening the corpus", open_store_job, loc, on_result=opened,
                           on_error=failed, on_finished=self._after_open) is None:
            self.location, self._fill_new_with_sample = previous

    def _after_open(self) -> None:
        """Once the open job is over (its key free): create a missing store, or offer to
        re-embed one built with another model."""
        if self._create_pending:
            self._create_if_ready()
        else:
            self.check_model()

    def close(self) -> None:
        store = self.state.store
        self.state.store = None    # late signals from finished jobs find no store
        if store is not None:
            try:
                store.close()      # writes the last index snapshot; committed rows are on disk
            except Exception:  # noqa: BLE001
                log.exception("closing the store failed")

    def _set_store(self, store, ids, texts):
        old = self.state.store
        if old is not None and old is not store:
            # Closing writes the last snapshot (FAISS) or flushes (Milvus): not on the UI thread.
            self.state.run(f"close-store-{id(old)}", close_store_job, old, wants_progress=False,
                           show_progress=False, label="Closing the previous corpus",
                           on_error=lambda msg: log.error("closing the previous store: %s", msg))
        # the count first: set_store's listeners (the search hint) read it
        self._set_count(len(ids))
        self._set_undo([])
        self.state.set_store(store, freeze=False)
        self.rows_reset.emit(ids, texts)
        freeze_long_lived()        # the store and the table's rows live as long as each other
        self.check_model()

    def _run_store(self, label, fn, *args, on_result=None, **kw):
        job = self.state.run("store", fn, *args, label=label, on_result=on_result, **kw)
        if job is None:
            self.state.status.emit("Another corpus job is running: wait for it or cancel it")
        return job

    def _create_if_ready(self):
        backend = self.state.backend
        if not self._create_pending or backend is None or self.busy:
            return
        self._create_pending = False
        pooling = self.state.pooling

        sample = None
        if self._fill_new_with_sample:
            try:
                sample = SAMPLE_CORPUS or sample_corpus()
            except EncoderscopeError as e:   # an incomplete installation: say so, create it empty
                self.state.error.emit(str(e))

        def created(value):
            store, result = value
            self.store_choice = self.state.choice
            self._set_store(store, result.ids, result.texts)
            self.state.status.emit(f"Indexed the sample corpus: {result.summary()}" if sample
                                   else f"Created an empty corpus in {self.location.describe()}")

        self._run_store("Indexing the sample corpus" if sample else "Creating the corpus",
                        create_store_job, self.location, backend, pooling, sample, on_result=created)

    # ---- model changes ------------------------------------------------------------------------
    def _on_backend(self, backend):
        if backend is None:
            return
        if self._create_pending:
            self._create_if_ready()
        else:
            self.check_model()

    def _on_choice(self, choice):
        if self.state.backend is not None:
            self.check_model()

    def _mismatch(self):
        """What differs between the corpus and the chosen model (index.corpus.mismatch), or None."""
        from index import corpus
        return corpus.mismatch(self.state.store, self.state.backend, self.state.pooling)

    def compatible(self) -> bool | None:
        """None until both the corpus and the chosen model are there."""
        if self.state.store is None or self.state.backend is None:
            return None
        return self._mismatch() is None

    def check_model(self) -> None:
        """If the store was embedded with another model/pooling, offer to re-embed it."""
        ok = self.compatible()
        if ok is None or self.busy:
            return
        if ok:
            self.store_choice = self.state.choice
        elif self._count == 0:
            self.reembed()       # nothing to embed: just switch the store's model
        elif not self._asking:
            self._asking = True
            self.mismatch.emit(*self._mismatch().describe(), self._count)

    def answer_mismatch(self, reembed: bool) -> None:
        self._asking = False
        if reembed:
            self.reembed()
        else:
            self.revert_choice()

    def store_model_choice(self) -> ModelChoice:
        if self.store_choice is not None:
            return self.store_choice
        fp = self.state.store.fingerprint_dict
        return self.state.choice.with_(model=fp.get("model", self.state.choice.model),
                                       pooling=fp.get("pooling", self.state.choice.pooling))

    def revert_choice(self) -> None:
        if self.state.store is None:
            return
        choice = self.store_model_choice()
        self.state.status.emit(f"Keeping {choice.model} ({choice.pooling} pooling): the corpus was embedded with it")
        self.state.set_choice(choice)

    def reembed(self) -> None:
        store, backend = self.state.store, self.state.backend
        if store is None or backend is None:
            self.state.status.emit("Nothing to re-embed yet")
            return
        pooling, choice = self.state.pooling, self.state.choice

        def done(value):
            self.store_choice = choice
            ids, texts = value
            self.rows_reset.emit(ids, texts)
            self.state.corpus_changed.emit()
            self.state.status.emit(f"Re-embedded {len(ids):,} sentences with {choice.model} ({pooling})")

        def cancelled():
            self.state.status.emit("Re-embedding cancelled: the corpus keeps its previous vectors")
            self.revert_choice()

        job = self._run_store(f"Re-embedding with {choice.model}", rebuild_job, store, backend, pooling,
                              on_result=done)
        if job is not None:
            job.cancelled.connect(cancelled)
            job.error.connect(lambda _m: self.revert_choice())

    # ---- corpus edits ------------------------------------------------------------------------
    def _ready(self) -> bool:
        if self.state.store is None or self.state.backend is None:
            self.state.status.emit("The corpus is still loading …")
            return False
        if self.compatible() is False:
            self.state.error.emit("The corpus was embedded with another model or pooling: re-embed it "
                                  "(Model → Re-embed) or switch back before adding sentences.")
            return False
        return True

    def _ingested(self, result: IngestResult):
        self._set_count(self._count + result.added)
        self.rows_added.emit(result.ids, result.texts)
        self.state.corpus_changed.emit()
        self.state.status.emit(result.summary())
        self.ingest_done.emit(result)

    def add_texts(self, texts, metadata=None, label=None):
        texts = [t.strip() for t in texts if t and t.strip()]
        if not texts:
            self.state.status.emit("Nothing to add: the text is empty")
            return None
        if not self._ready():
            return None
        label = label or f"Adding {len(texts):,} sentence{'s' if len(texts) != 1 else ''}"
        return self._run_store(label, ingest_job, self.state.store, self.state.backend, self.state.pooling,
                               texts, metadata, on_result=self._ingested)

    def import_file(self, path, column=None, encoding=None):
        if not self._ready():
            return None

        def done(value):
            if isinstance(value, NeedsEncoding):
                self.state.status.emit(value.message)
                self.encoding_needed.emit(value)
            else:
                self._ingested(value)

        return self._run_store(f"Importing {Path(path).name}", import_job, self.state.store,
                               self.state.backend, self.state.pooling, str(path), column, encoding,
                               on_result=done)

    def remove(self, ids):
        ids = [int(i) for i in ids]
        if not ids or self.state.store is None:
            return None

        def removed(value):
            gone, records = value
            self.rows_removed.emit(gone)
            self.state.corpus_changed.emit()
            self._set_undo([records[i] for i in gone if i in records])
            self.state.status.emit(f"Deleted {_sentences(len(gone))} · Edit → Undo delete (Ctrl+Z) "
                                   "puts them back")

        return self._run_store(f"Deleting {len(ids):,} sentences", remove_job, self.state.store, ids,
                               on_result=removed)

    def undo_delete(self):
        """Add the last deleted sentences back, with their metadata. They are embedded again
        with the corpus model (the vectors are the same model's; the ids are new)."""
        records = self.last_deleted
        if not records:
            self.state.status.emit("Nothing to undo: no sentence was deleted since the corpus was opened")
            return None
        model = self.state.choice.model
        job = self.add_texts([r["text"] for r in records], [r.get("metadata") for r in records],
                             label=f"Restoring {_sentences(len(records))}")
        if job is not None:
            self._set_undo([])
            job.result.connect(lambda res: self.state.status.emit(
                f"Restored {_sentences(res.added)}, embedded again with {model} (new ids)"))
        return job

    def _set_undo(self, records: list[dict]) -> None:
        self.last_deleted = records
        self.undo_changed.emit(len(records))

    def count(self) -> int:
        return self._count if self.state.store is not None else 0

    def _set_count(self, n: int) -> None:
        self._count = max(0, int(n))


def _sentences(n: int) -> str:
    return f"{n:,} sentence{'s' if n != 1 else ''}"
