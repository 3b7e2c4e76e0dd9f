"""The shared application model (napari-style): knows nothing of widgets.

Panels take an ``AppState`` and listen to it::

    state.choice                      # ModelChoice(model, backend, pooling, device)
    state.backend                     # the loaded core Backend, or None while loading
    state.store                       # the current vector store (index.VectorStore) or None
    state.jobs                        # app.workers.JobRunner
    state.run(key, fn, *args, label=..., on_result=..., on_error=...)   # -> Job | None

Signals:
    choice_changed(ModelChoice)       the user picked another model/backend/pooling/device
    backend_changed(object)           a Backend finished loading (None: loading started)
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

import gc
from dataclasses import dataclass, replace
from typing import Callable

from PySide6.QtCore import QObject, Signal

from .logs import log
from .workers import Job, JobRunner

BACKENDS = {"scratch": "From-scratch encoder", "hf": "DistilBERT (transformers)"}
POOLINGS = ("mean", "cls", "max")
DEFAULT_MODEL = "minilm"


@dataclass(frozen=True)
class ModelChoice:
    model: str = DEFAULT_MODEL
    backend: str = "scratch"      # "scratch" | "hf"
    pooling: str = "mean"         # "mean" | "cls" | "max"
    device: str = "auto"          # "auto" | "cpu" | "cuda" | "mps"

    def load_key(self) -> tuple:
        """What decides which Backend object is needed (pooling is applied per call)."""
        return (self.model, self.backend, self.device)

    def describe(self) -> str:
        return f"{self.model} · {BACKENDS.get(self.backend, self.backend)} · {self.pooling} pooling"

    def with_(self, **changes) -> "ModelChoice":
        return replace(self, **changes)


def load_backend_fn(choice: ModelChoice, progress=None, cancel=None):
    """Worker-side: load (or fetch from the core's cache) the Backend for ``choice``."""
    from core.backend import get_backend

    if progress:
        progress(0, 0, f"Loading {choice.model} …")
    device = None if choice.device in ("", "auto") else choice.device
    backend = get_backend(model=choice.model, backend=choice.backend, device=device)
    backend.fingerprint(choice.pooling)   # hashes the weights once, here rather than on the UI thread
    if progress:
        progress(1, 1, f"Loaded {choice.model}")
    return backend


def freeze_long_lived() -> None:
    """Move every object alive now out of the cyclic GC's reach.

    torch + transformers + a loaded corpus are millions of objects; a full collection then takes
    ~300 ms with the GIL held, which freezes the UI thread even when a worker triggered it.
    Called after a model or a corpus finished loading (those objects live for the session).
    """
    gc.freeze()


class AppState(QObject):
    choice_changed = Signal(object)
    backend_changed = Signal(object)
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
        self.corpus = None        # app.corpus_service.CorpusService, set by the main window
        self.jobs = jobs or JobRunner(parent=self)
        self.jobs.busy_changed.connect(self.busy)
        self.jobs.job_started.connect(self.job_started)
        self._pending_choice: ModelChoice | None = None
        self._loaded_key: tuple | None = None

    # ---- convenience --------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self.choice.model

    @property
    def backend_kind(self) -> str:
        return self.choice.backend

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

    # ---- store --------------------------------------------------------------------------
    def set_store(self, store) -> None:
        self.store = store
        freeze_long_lived()
        self.store_changed.emit(store)
        self.corpus_changed.emit()

    def request_inspect(self, text: str, compare_with: str = "") -> None:
        self.inspect_requested.emit(text, compare_with)

    def request_walkthrough(self, text: str) -> None:
        self.walkthrough_requested.emit(text)

    def shutdown(self, timeout_ms: int = 15000) -> bool:
        return self.jobs.shutdown(timeout_ms)
