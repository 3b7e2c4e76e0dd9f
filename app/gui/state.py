"""The shared application model (napari-style): knows nothing of widgets.

Two models can be loaded at once (each in a worker; core's get_backend caches them):

* the **corpus model** - ``choice`` / ``backend`` / ``backend_changed``: the model the open
  store was embedded with (its fingerprint fixes it). Search, "Why?" and the corpus map use it;
  changing it offers to re-embed the corpus.
* the **inspected model** - ``inspect_choice`` / ``inspect_backend`` / ``inspect_backend_changed``:
  the model the inspector family (Attention, Step by step, Fill-mask) runs. Switching it never
  touches the store. ``inspect_choice`` None means "the corpus model" (then ``inspect_backend``
  is ``backend`` and follows it).

Panels take an ``AppState`` and listen to it::

    state.choice                      # ModelChoice(model, backend, pooling, device, precision): the corpus model
    state.backend                     # its loaded core Backend, or None while loading
    state.inspect_choice              # ModelChoice of the inspected model, or None: the corpus model
    state.inspect_backend             # the inspected model's Backend (None while loading)
    state.store                       # the current vector store (index.VectorStore) or None
    state.jobs                        # app.gui.workers.JobRunner
    state.run(key, fn, *args, label=..., on_result=..., on_error=...)   # -> Job | None
    state.run_latest(key, fn, *args, ...)   # the same; while one runs, only the newest call waits
    state.has_waiting(key) / state.drop_waiting(key)   # a result is stale / forget the waiting call

Signals:
    choice_changed(ModelChoice)       the user picked another corpus model/backend/pooling/device
    backend_changed(object)           the corpus model's Backend finished loading (None: loading started)
    inspect_choice_changed(object)    the inspected model's choice (ModelChoice, or None: the corpus model)
    inspect_backend_changed(object)   the inspected model's Backend is ready (None: loading)
    store_changed(object)             another store became current
    corpus_changed()                  rows were added to / removed from the current store
    status(str)                       a short message for the status bar
    error(str)                        a readable message the window shows in a dialog
    busy(bool)                        any background job running
    job_started(Job)                  a job began (the window shows progress + Cancel)
    inspect_requested(str, str)       (text, compare_with): send a hit to the attention inspector
    walkthrough_requested(str)        text: follow a sentence through the encoder ("Step by step" tab)
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, Signal

from app.gui.logs import log
from app.gui.wording import BACKEND_LABELS
from app.gui.workers import Job, JobRunner
from core.encoder.sources import DEFAULT_MODEL
from core.long_lived import freeze_long_lived


@dataclass(frozen=True)
class ModelChoice:
    model: str = DEFAULT_MODEL
    backend: str = "scratch"      # "scratch" | "hf"
    pooling: str = "mean"         # "mean" | "cls" | "max" | "attention" (a model trained with it)
    device: str = "auto"          # "auto" | "cpu" | "cuda" | "mps"
    precision: str = "auto"       # "auto" (bf16 where native, core.device) | "fp32" | "bf16"

    def load_key(self) -> tuple:
        """What decides which Backend object is needed (pooling is applied per call)."""
        return (self.model, self.backend, self.device, self.precision)

    def describe(self) -> str:
        return f"{self.model} · {BACKEND_LABELS.get(self.backend, self.backend)} · {self.pooling} pooling"

    def with_(self, **changes) -> ModelChoice:
        return replace(self, **changes)


def load_backend_fn(choice: ModelChoice, progress=None, cancel=None):
    """Worker-side: load (or fetch from the core's cache) the Backend for ``choice``."""
    from core.encoder.backends import get_backend

    if progress:
        progress(0, 0, f"Loading {choice.model} …")
    device = None if choice.device in ("", "auto") else choice.device
    # "auto" leaves the choice to core (and to $ENCODERSCOPE_PRECISION when it is set)
    precision = None if choice.precision in ("", "auto") else choice.precision
    backend = get_backend(model=choice.model, backend=choice.backend, device=device, precision=precision)
    backend.fingerprint(choice.pooling)   # hashes the weights once, here rather than on the UI thread
    if progress:
        progress(1, 1, f"Loaded {choice.model}")
    return backend


class AppState(QObject):
    choice_changed = Signal(object)
    backend_changed = Signal(object)
    inspect_choice_changed = Signal(object)
    inspect_backend_changed = Signal(object)
    store_changed = Signal(object)
    corpus_changed = Signal()
    status = Signal(str)
    error = Signal(str)
    busy = Signal(bool)
    job_started = Signal(object)
    inspect_requested = Signal(str, str)
    walkthrough_requested = Signal(str)

    def __init__(self, choice: ModelChoice | None = None, jobs: JobRunner | None = None, parent=None):
        super().__init__(parent)
        self.choice = choice or ModelChoice()
        self.backend = None
        self.store = None
        self.corpus = None        # app.gui.corpus_service.CorpusService, set by the main window
        self.jobs = jobs or JobRunner(parent=self)
        self.jobs.busy_changed.connect(self.busy)
        self.jobs.job_started.connect(self.job_started)
        self.jobs.job_finished.connect(self._start_waiting)
        self._waiting: dict[str, tuple] = {}   # key -> the newest (fn, args, kwargs) of run_latest
        self._pending_choice: ModelChoice | None = None
        self._loaded_key: tuple | None = None
        # ---- the inspected model (see the module docstring) ----
        self.inspect_choice: ModelChoice | None = None   # None: inspect with the corpus model
        self._inspect_backend = None                     # loaded for inspect_choice
        self._inspect_pending = False                    # a newer inspect_choice waits for the load in flight
        self.backend_changed.connect(self._corpus_backend_changed)

    # ---- convenience --------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.choice.model

    @property
    def pooling(self) -> str:
        return self.choice.pooling

    @property
    def device(self) -> str:
        return self.choice.device

    @property
    def device_name(self) -> str:
        """The device in use, e.g. 'cpu (2 threads)'; '' until a backend is loaded."""
        return getattr(self.backend, "device_name", "") if self.backend is not None else ""

    # ---- jobs ---------------------------------------------------------------------------
    def run(self, key: str, fn: Callable, *args, label: str = "",
            on_result: Callable | None = None, on_error: Callable | None = None,
            on_progress: Callable | None = None, on_cancelled: Callable | None = None,
            on_finished: Callable | None = None, show_progress: bool = True,
            wants_progress: bool = True, **kwargs) -> Job | None:
        """Start ``fn(*args, progress=, cancel=, **kwargs)`` off the UI thread.

        Returns the Job, or None when a job with the same key is still running (nothing is
        started twice). Errors go to ``on_error`` if given, else to ``state.error``. With
        ``show_progress`` the main window shows a progress bar and a Cancel button for it.
        """
        if self.jobs.is_running(key):
            self.status.emit(f"{label or key}: already running")
            return None
        label = label or key
        job = self.jobs.start(key, fn, *args, label=label, wants_progress=wants_progress,
                              show_progress=show_progress, **kwargs)
        if job is None:
            return None
        # Safe after start(): the worker's signals are queued to this (UI) thread, so none is
        # delivered before control returns to the event loop.
        if on_progress:
            job.progress.connect(on_progress)
        if on_result:
            job.result.connect(on_result)
        job.error.connect(on_error if on_error else self.error.emit)
        job.cancelled.connect(on_cancelled if on_cancelled
                              else (lambda: self.status.emit(f"{label}: cancelled")))
        if on_finished:
            job.finished.connect(on_finished)
        return job

    def run_latest(self, key: str, fn: Callable, *args, **kwargs) -> Job | None:
        """``run`` for requests where only the newest matters (a query typed on, another
        sentence to inspect): while a job with ``key`` runs, the newest call waits in its place
        (an older waiting call is dropped) and starts when the running job ends. Returns the Job,
        or None when the call waits. ``has_waiting(key)`` tells a result it is already stale."""
        if self.jobs.is_running(key):
            self._waiting[key] = (fn, args, kwargs)
            return None
        self._waiting.pop(key, None)
        return self.run(key, fn, *args, **kwargs)

    def has_waiting(self, key: str) -> bool:
        return key in self._waiting

    def drop_waiting(self, key: str) -> bool:
        """Forget the call waiting for ``key`` (its arguments went stale: another model was
        chosen, the model is loading). Returns whether one waited, so the caller can make the
        request again once it can."""
        return self._waiting.pop(key, None) is not None

    def _start_waiting(self, job) -> None:
        call = self._waiting.pop(job.key, None)
        if call is not None:
            fn, args, kwargs = call
            self.run(job.key, fn, *args, **kwargs)

    # ---- model --------------------------------------------------------------------------
    def set_choice(self, choice: ModelChoice) -> None:
        """Make ``choice`` current; loads a new Backend in a worker when needed."""
        if choice == self.choice and self.backend is not None:
            return
        previous = self.choice
        self.choice = choice
        if self.backend is None or self._loaded_key != choice.load_key():
            # another Backend is needed: drop the old one first, so that no choice_changed
            # listener measures the new choice with the old model (the corpus would record
            # the new choice as the one it was embedded with, and "keep" could not revert)
            self._load(choice, previous)
        self.choice_changed.emit(choice)

    def _load(self, choice: ModelChoice, previous: ModelChoice) -> None:
        if self.jobs.is_running("model"):
            self._pending_choice = choice
            return
        self._pending_choice = None
        old_backend, old_key = self.backend, self._loaded_key
        self.backend = None
        self.backend_changed.emit(None)

        def loaded(backend):
            if self._pending_choice is not None:
                return   # superseded: the finished handler loads the newer one
            self.backend, self._loaded_key = backend, choice.load_key()
            freeze_long_lived()
            log.info("backend loaded: %s on %s", choice.describe(), getattr(backend, "device_name", "?"))
            self.status.emit(f"Loaded {choice.model} on {getattr(backend, 'device_name', '?')}")
            self.backend_changed.emit(backend)

        def failed(message):
            self.error.emit(message)
            if self._pending_choice is not None:
                return
            # keep working with what was loaded before
            self.choice = previous if old_backend is not None else self.choice
            self.backend, self._loaded_key = old_backend, old_key
            self.choice_changed.emit(self.choice)
            self.backend_changed.emit(old_backend)

        def finished():
            pending = self._pending_choice
            if pending is not None:
                self._pending_choice = None
                self._load(pending, previous)

        self.run("model", load_backend_fn, choice, label=f"Loading {choice.model}",
                 on_result=loaded, on_error=failed, on_finished=finished)

    def load_initial(self) -> None:
        """Load the Backend for the current choice (first start)."""
        self._load(self.choice, self.choice)

    # ---- the inspected model ------------------------------------------------------------
    @property
    def inspect_backend(self):
        """The Backend the inspector panels run: the inspected model's, else the corpus model's."""
        return self.backend if self.inspect_choice is None else self._inspect_backend

    def set_inspect_choice(self, choice: ModelChoice | None) -> None:
        """Inspect with ``choice`` (None: with the corpus model). Loads it in a worker ("inspect-model"
        job, beside the corpus model's); the store is never touched."""
        if choice is not None and choice.load_key() == self.choice.load_key():
            choice = None                       # the corpus model itself: share its Backend
        if choice == self.inspect_choice and (choice is None or self._inspect_backend is not None
                                              or self.jobs.is_running("inspect-model")):
            return
        previous = self.inspect_choice
        self.inspect_choice = choice
        self.inspect_choice_changed.emit(choice)
        if choice is None:
            self._inspect_backend = None
            self.inspect_backend_changed.emit(self.backend)
            return
        self._inspect_backend = None
        self.inspect_backend_changed.emit(None)
        if self.jobs.is_running("inspect-model"):
            self._inspect_pending = True        # loaded when the current load finishes
            return
        self._load_inspect(choice, previous)

    def _load_inspect(self, choice: ModelChoice, previous: ModelChoice | None) -> None:
        self._inspect_pending = False

        def loaded(backend):
            if self.inspect_choice != choice:
                return                          # superseded while loading
            self._inspect_backend = backend
            freeze_long_lived()
            log.info("inspected model loaded: %s", choice.describe())
            self.status.emit(f"Inspecting with {choice.model} ({BACKEND_LABELS.get(choice.backend, choice.backend)})")
            self.inspect_backend_changed.emit(backend)

        def failed(message):
            self.error.emit(message)
            if self.inspect_choice != choice:
                return
            # go back to what was inspected before (the corpus model first: always loaded)
            self.inspect_choice, self._inspect_backend = None, None
            self.inspect_choice_changed.emit(None)
            self.inspect_backend_changed.emit(self.backend)
            if previous is not None:
                self.set_inspect_choice(previous)

        def finished():
            if self._inspect_pending and self.inspect_choice is not None:
                self._load_inspect(self.inspect_choice, None)

        self.run("inspect-model", load_backend_fn, choice, label=f"Loading {choice.model} to inspect",
                 on_result=loaded, on_error=failed, on_finished=finished)

    def _corpus_backend_changed(self, backend) -> None:
        if self.inspect_choice is None:         # inspecting with the corpus model: follow it
            self.inspect_backend_changed.emit(backend)

    # ---- store --------------------------------------------------------------------------
    def set_store(self, store, freeze: bool = True) -> None:
        """freeze: False where the caller freezes right after (one full collection, not two)."""
        self.store = store
        if freeze:
            freeze_long_lived()
        self.store_changed.emit(store)
        self.corpus_changed.emit()

    def request_inspect(self, text: str, compare_with: str = "") -> None:
        self.inspect_requested.emit(text, compare_with)

    def request_walkthrough(self, text: str) -> None:
        self.walkthrough_requested.emit(text)

    def shutdown(self, timeout_ms: int = 15000) -> bool:
        return self.jobs.shutdown(timeout_ms)
