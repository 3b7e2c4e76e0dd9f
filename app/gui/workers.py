"""The one worker module: every model load, embedding batch, ingest, re-embed and save runs here,
off the UI thread. No other module creates threads.

    job = runner.start("ingest", fn, texts, label="Adding 20,000 sentences")
    job.progress.connect(lambda done, total, msg: ...)   # (int, int, str), throttled
    job.result.connect(lambda value: ...)                # fn's return value
    job.error.connect(lambda message: ...)               # readable one-liner
    job.cancelled.connect(...)                           # fn raised core.errors.Cancelled
    job.finished.connect(...)                            # always, last
    job.cancel()                                         # sets the threading.Event

``fn`` is called as ``fn(*args, progress=cb, cancel=event, **kwargs)`` in a pool thread, where
``cb(done, total, message="")`` and ``event`` is a ``threading.Event`` (pass it on to
``Backend.embed(cancel=...)``). Pass ``wants_progress=False`` to call a plain function
without those two keywords.

A notice the job's operation says while it waits (core/notices.py: another writer's lock)
arrives as a progress message, so the status bar shows it in place of the job's text.

Every public signal of a Job is emitted on the UI thread (the worker thread talks to the Job
through queued private signals), so it is safe to connect plain lambdas that touch widgets.
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, QThreadPool, Signal, Slot

from app.gui.logs import log, log_file
from core.notices import listening

PROGRESS_INTERVAL_S = 0.05   # at most ~20 progress updates per second reach the UI


def readable_error(exc: BaseException, key: str = "") -> str:
    """EncoderscopeError -> its message; anything else -> one line + a pointer to the log."""
    try:
        from core.errors import EncoderscopeError
    except Exception:  # pragma: no cover - core always importable in practice
        EncoderscopeError = ()  # type: ignore
    if EncoderscopeError and isinstance(exc, EncoderscopeError):
        if getattr(exc, "remedy", None) == "repair":   # a store error: the app's words for it
            return f"{exc}: open the corpus again (File > Open corpus folder…), which repairs it"
        from app.gui.wording import gui_fix
        return (str(exc) or type(exc).__name__) + gui_fix(getattr(exc, "fix", None))
    if isinstance(exc, (OSError, UnicodeDecodeError)):
        return str(exc)
    what = f"{key}: " if key else ""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{what}unexpected {type(exc).__name__}: {first} (details in {log_file()})"


def _is_for_people(exc: BaseException) -> bool:
    """An error meant for people (EncoderscopeError), or one the system words for them (a file
    that cannot be read or written): its message says it all, no traceback needed."""
    from core.errors import EncoderscopeError
    return isinstance(exc, (EncoderscopeError, OSError, UnicodeDecodeError))


def _is_cancelled(exc: BaseException) -> bool:
    try:
        from core.errors import Cancelled
    except Exception:  # pragma: no cover
        return False
    return isinstance(exc, Cancelled)


class Job(QObject):
    """One unit of background work. Lives on the UI thread; its runnable runs in the pool."""

    progress = Signal(int, int, str)
    result = Signal(object)
    error = Signal(str)
    cancelled = Signal()
    finished = Signal()

    # worker thread -> UI thread (queued: the Job lives on the UI thread). The outcome comes as
    # ONE signal, so result/error/cancelled and finished are emitted in the same turn of the
    # event loop: a slot that reacts to ``result`` by starting the next job with the same key
    # (or a test waiting for it) never finds the key still taken by a job that has returned.
    _w_progress = Signal(int, int, str)
    _w_done = Signal(str, object)        # ("result" | "error" | "cancelled", boxed payload)

    _ids = itertools.count(1)

    def __init__(self, key: str, fn: Callable, args=(), kwargs=None, label: str = "",
                 wants_progress: bool = True, show_progress: bool = True, parent=None):
        super().__init__(parent)
        self.show_progress = show_progress   # the main window shows a bar + Cancel for it
        self.id = next(self._ids)
        self.key = key
        self.label = label or key
        self.fn = fn
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.wants_progress = wants_progress
        self.cancel_event = threading.Event()
        self.done = 0
        self.total = 0
        self.message = ""
        self.state = "pending"   # pending | running | done | error | cancelled
        self.value: Any = None
        self.started_at = 0.0
        self._w_progress.connect(self._on_progress)
        self._w_done.connect(self._on_done)

    # ---- UI-thread API -------------------------------------------------------------------
    def cancel(self) -> None:
        self.cancel_event.set()

    @property
    def is_cancelled(self) -> bool:
        return self.cancel_event.is_set()

    @property
    def running(self) -> bool:
        return self.state in ("pending", "running")

    # ---- slots on the UI thread ------------------------------------------------------------
    @Slot(int, int, str)
    def _on_progress(self, done, total, message):
        self.done, self.total, self.message = done, total, message
        self.progress.emit(done, total, message)

    @Slot(str, object)
    def _on_done(self, kind, boxed):
        try:
            if kind == "result":
                self.state, self.value = "done", boxed[0]
                self.result.emit(boxed[0])
            elif kind == "error":
                self.state = "error"
                self.error.emit(boxed[0])
            else:
                self.state = "cancelled"
                self.cancelled.emit()
        finally:
            self.finished.emit()

    # ---- worker thread ---------------------------------------------------------------------
    def _execute(self) -> None:
        self.state = "running"
        self.started_at = time.perf_counter()
        last = [0.0]
        counts = [0, 0]      # the last done, total reported: a notice keeps the bar where it is

        def progress(done, total=0, message=""):
            counts[:] = int(done), int(total)
            now = time.perf_counter()
            if done >= total or now - last[0] >= PROGRESS_INTERVAL_S:
                last[0] = now
                self._w_progress.emit(int(done), int(total), str(message))

        def notice(line: str) -> None:      # a wait worth telling (another writer's lock)
            self._w_progress.emit(counts[0], counts[1], line)

        outcome = ("cancelled", ())
        try:
            with listening(notice):
                if self.wants_progress:
                    value = self.fn(*self.args, progress=progress, cancel=self.cancel_event,
                                    **self.kwargs)
                else:
                    value = self.fn(*self.args, **self.kwargs)
        except BaseException as exc:  # noqa: BLE001 - every failure becomes a message
            if _is_cancelled(exc):
                log.info("job %s cancelled", self.key)
            else:
                message = readable_error(exc, self.label)
                if _is_for_people(exc):     # expected (a locked store, bad input): its message
                    log.warning("job %s (%s): %s", self.key, self.label, message)
                else:
                    log.error("job %s (%s) failed: %s\n%s", self.key, self.label, message,
                              "".join(traceback.format_exception(exc)))
                outcome = ("error", (message,))
        else:
            log.info("job %s done in %.2fs", self.key, time.perf_counter() - self.started_at)
            # boxed: PySide's queued Signal(object) mishandles a bare None's refcount
            outcome = ("result", (value,))
        finally:
            self._w_done.emit(*outcome)


class _Runnable(QRunnable):
    def __init__(self, job: Job):
        super().__init__()
        self.job = job
        self.setAutoDelete(True)

    def run(self):  # noqa: D401 - Qt API
        self.job._execute()


class JobRunner(QObject):
    """Starts Jobs in a private QThreadPool; one job per key at a time (no double starts)."""

    job_started = Signal(object)    # Job
    job_finished = Signal(object)   # Job
    busy_changed = Signal(bool)

    def __init__(self, max_threads: int = 4, parent=None):
        super().__init__(parent)
        self.pool = QThreadPool(self)
        self.pool.setMaxThreadCount(max_threads)
        self._jobs: dict[str, Job] = {}
        self._closing = False

    def is_running(self, key: str) -> bool:
        return key in self._jobs

    def get(self, key: str) -> Job | None:
        return self._jobs.get(key)

    def running(self) -> list[Job]:
        return list(self._jobs.values())

    @property
    def busy(self) -> bool:
        return bool(self._jobs)

    def start(self, key: str, fn: Callable, *args, label: str = "", wants_progress: bool = True,
              show_progress: bool = True, **kwargs) -> Job | None:
        """Start ``fn`` in the pool; returns None (and starts nothing) if ``key`` is running."""
        if self._closing or key in self._jobs:
            return None
        job = Job(key, fn, args, kwargs, label=label, wants_progress=wants_progress,
                  show_progress=show_progress, parent=self)
        was_busy = self.busy
        self._jobs[key] = job
        job.finished.connect(lambda j=job: self._on_finished(j))
        self.job_started.emit(job)
        if not was_busy:
            self.busy_changed.emit(True)
        self.pool.start(_Runnable(job))
        return job

    def cancel(self, key: str) -> None:
        job = self._jobs.get(key)
        if job is not None:
            job.cancel()

    def cancel_all(self) -> None:
        for job in list(self._jobs.values()):
            job.cancel()

    def wait(self, timeout_ms: int = -1) -> bool:
        """Block until every job has finished its function (signals are delivered later)."""
        return self.pool.waitForDone(timeout_ms)

    def shutdown(self, timeout_ms: int = 15000) -> bool:
        """Cancel everything, refuse new jobs, wait for the pool. Returns False on timeout."""
        self._closing = True
        self.cancel_all()
        ok = self.pool.waitForDone(timeout_ms)
        if not ok:
            log.warning("shutdown: jobs still running after %d ms: %s", timeout_ms, list(self._jobs))
        return ok

    def _on_finished(self, job: Job) -> None:
        if self._jobs.get(job.key) is job:
            del self._jobs[job.key]
        self.job_finished.emit(job)
        if not self._jobs:
            self.busy_changed.emit(False)
        job.setParent(None)   # Python owns it now: freed once nobody holds a reference
