"""Embedding one window ahead on a helper thread while the caller commits the window before.

add_stream (index/store/base.py) embeds window k + 1 here while it writes window k to the store: the
encoder (tokenising releases the GIL, torch's kernels too) and the store's writes (SQLite,
FAISS) overlap instead of waiting on each other. One window at most is in flight, so an
interruption loses at most the window being embedded besides the rest of the one being
committed. Only the encoder runs on the helper thread: every store call, and every progress
call, stays on the caller's thread.
"""
from __future__ import annotations

import queue
import threading


class EmbedAhead:
    """``start(texts)`` runs ``embed(texts, progress, cancel)`` on a helper thread; ``result()``
    waits for what it returned (or raises what it raised). One job at a time."""

    def __init__(self, embed, cancel=None):
        self._embed = embed
        self._user_cancel = cancel
        self._stop = threading.Event()
        self._events: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None

    def cancelled(self) -> bool:
        """The caller's cancel is set (or this pipeline was stopped)."""
        c = self._user_cancel
        if self._stop.is_set():
            return True
        if c is None:
            return False
        return c.is_set() if hasattr(c, "is_set") else bool(c())

    def start(self, texts) -> None:
        if self._thread is not None:
            raise RuntimeError("a window is already being embedded")
        self._thread = threading.Thread(target=self._run, args=(list(texts),), daemon=True,
                                        name="encoderscope-embed-ahead")
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def _run(self, texts) -> None:
        try:
            out = self._embed(texts, lambda k, n: self._events.put(("progress", k, n)), self.cancelled)
        except BaseException as e:      # noqa: BLE001 - handed to the caller's thread as it is
            self._events.put(("error", e))
        else:
            self._events.put(("done", out))

    def result(self, progress=None):
        """What the job returned; progress(k, n) on this thread as the helper reports it."""
        if self._thread is None:
            raise RuntimeError("no window is being embedded")
        while True:
            kind, *rest = self._events.get()
            if kind == "progress":
                if progress is not None:
                    progress(*rest)
                continue
            self._join()
            if kind == "error":
                raise rest[0]
            return rest[0]

    def _join(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def stop(self) -> None:
        """Stop a job in flight (it ends at the encoder's next batch) and wait for it."""
        self._stop.set()
        self._join()
        self._events = queue.Queue()
