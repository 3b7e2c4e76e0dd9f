"""Tokenising and embedding ahead on two helper threads while the caller commits.

add_stream (index/store/adding.py) hands each window's new texts to ``submit``; one thread
tokenises them (HF tokenizers release the GIL), a second runs the encoder on what the first
tokenised (torch's kernels and a GPU's waits release it too), and the caller takes the vectors
with ``result`` in submission order and writes them to the store. So while window k is
committed, window k + 1 is embedded and window k + 2 tokenised: three stages overlap, on the
CPU as on CUDA or MPS (the same threads; only the encoder's device differs).

Back-pressure: at most ``depth`` windows are submitted and not yet taken, so memory and what an
interruption can lose stay bounded (the windows in flight besides the one being committed).
Only the two stages run on helper threads: every store call, and every progress call, stays on
the caller's thread. ``stop`` (a cancel, an error, Ctrl-C, SIGTERM's exception) ends both at the
encoder's next batch and waits for them.
"""
from __future__ import annotations

import queue
import threading

DEPTH = 2       # windows submitted and not yet taken: one being embedded, one being tokenised
_STOP = object()


class EmbedAhead:
    """``submit(texts)`` queues a window; ``prepare(texts)`` runs on the tokenise thread,
    ``embed(texts, prepared, progress, cancel)`` on the embed thread; ``result()`` returns what
    embed returned for the oldest window not yet taken (or raises what either stage raised)."""

    def __init__(self, embed, cancel=None, prepare=None, depth: int = DEPTH):
        self._embed = embed
        self._prepare = prepare
        self._user_cancel = cancel
        self.depth = max(1, int(depth))
        self._stop = threading.Event()
        self._jobs: queue.Queue = queue.Queue()        # texts to tokenise
        self._prepared: queue.Queue = queue.Queue()    # (texts, prepared, error) to embed
        self._events: queue.Queue = queue.Queue()      # progress, then done or error, per window
        self._threads: list[threading.Thread] = []
        self._in_flight = 0

    def cancelled(self) -> bool:
        """The caller's cancel is set (or this pipeline was stopped)."""
        c = self._user_cancel
        if self._stop.is_set():
            return True
        if c is None:
            return False
        return c.is_set() if hasattr(c, "is_set") else bool(c())

    @property
    def busy(self) -> bool:
        return self._in_flight > 0

    @property
    def full(self) -> bool:
        """As many windows in flight as the pipeline takes: take a result before submitting."""
        return self._in_flight >= self.depth

    def submit(self, texts) -> None:
        if self.full:
            raise RuntimeError(f"{self._in_flight} windows are in flight already")
        if not self._threads:
            self._threads = [threading.Thread(target=self._tokenise_stage, daemon=True,
                                              name="encoderscope-tokenize-ahead"),
                             threading.Thread(target=self._embed_stage, daemon=True,
                                              name="encoderscope-embed-ahead")]
            for t in self._threads:
                t.start()
        self._in_flight += 1
        self._jobs.put(list(texts))

    def _tokenise_stage(self) -> None:
        while True:
            texts = self._jobs.get()
            if texts is _STOP:
                self._prepared.put(_STOP)
                return
            try:
                prepared = None if self._prepare is None or self._stop.is_set() else self._prepare(texts)
            except BaseException as e:      # noqa: BLE001 - handed on to the caller's thread
                self._prepared.put((texts, None, e))
            else:
                self._prepared.put((texts, prepared, None))

    def _embed_stage(self) -> None:
        while True:
            job = self._prepared.get()
            if job is _STOP:
                return
            texts, prepared, error = job
            if self._stop.is_set():       # stopped: the windows still queued are dropped
                continue
            if error is None:
                try:
                    out = self._embed(texts, prepared,
                                      lambda k, n: self._events.put(("progress", k, n)), self.cancelled)
                except BaseException as e:  # noqa: BLE001 - handed to the caller's thread as it is
                    error = e
            self._events.put(("error", error) if error is not None else ("done", out))

    def result(self, progress=None):
        """What embed returned for the oldest window in flight; progress(k, n) on this thread
        as the embed thread reports it."""
        if not self._in_flight:
            raise RuntimeError("no window is being embedded")
        while True:
            kind, *rest = self._events.get()
            if kind == "progress":
                if progress is not None:
                    progress(*rest)
                continue
            self._in_flight -= 1
            if kind == "error":
                raise rest[0]
            return rest[0]

    def stop(self) -> None:
        """Stop the windows in flight (the encoder ends at its next batch) and wait for both
        threads."""
        self._stop.set()
        if self._threads:
            self._jobs.put(_STOP)
            for t in self._threads:
                t.join()
        self._threads = []
        self._in_flight = 0
        self._events = queue.Queue()


class EmbedNow(EmbedAhead):
    """EmbedAhead's interface with no helper thread: the one window of a small input is
    tokenised and embedded on the caller's thread when its result is asked for. There is
    nothing to overlap then, and on a loaded machine each thread handoff costs a time slice."""

    def __init__(self, embed, cancel=None, prepare=None):
        super().__init__(embed, cancel, prepare, depth=1)
        self._waiting: list = []

    def submit(self, texts) -> None:
        if self.full:
            raise RuntimeError(f"{self._in_flight} windows are in flight already")
        self._in_flight += 1
        self._waiting.append(list(texts))

    def result(self, progress=None):
        if not self._in_flight:
            raise RuntimeError("no window is being embedded")
        texts = self._waiting.pop(0)
        self._in_flight -= 1
        prepared = None if self._prepare is None else self._prepare(texts)
        return self._embed(texts, prepared, progress, self.cancelled)

    def stop(self) -> None:
        self._stop.set()
        self._waiting = []
        self._in_flight = 0
