"""The corpus and its vector store, seen from the app: open/create, ingest, delete, re-embed,
search. Knows nothing of widgets; every store operation runs as a job (app/gui/workers.py).

Store-changing jobs share the job key ``"store"``, so only one runs at a time; searches use
``"search"`` and run beside them (the store's own lock keeps FAISS consistent). The jobs
themselves (worker side): app/gui/corpus_jobs.py.
"""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject, Signal

from app.gui.corpus_jobs import (
    IngestResult,
    NeedsEncoding,
    close_store_job,
    create_store_job,
    import_job,
    ingest_job,
    open_store_job,
    rebuild_job,
    remove_job,
)
from app.gui.logs import log
from app.gui.settings import stores_dir
from app.gui.state import ModelChoice
from core.assets import sample_corpus
from core.errors import EncoderscopeError, InputError
from core.long_lived import freeze_long_lived

SAMPLE_CORPUS: Path | None = None   # the corpus a new sample store is filled with; None: the bundled one
SAMPLE_STORE = "sample"


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
        self.location = None       # index.opening.Location of the open (or opening) store
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
        from index.store.location import parse_location
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
        """What differs between the corpus and the chosen model (index.corpus.door.mismatch), or None."""
        from index.corpus import door
        return door.mismatch(self.state.store, self.state.backend, self.state.pooling)

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
