"""What goes into a store and how: vectors normalised, texts checked, the plan that stores each
distinct text once, the result of an add, and add_stream, which embeds (text, metadata) items a
window at a time outside the store's lock, one window ahead, and commits them in batches."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from core.errors import Cancelled, InputError
from index.store import fingerprint as fpmod

# Sentences embedded together by add_stream: the encoder sorts them by length, so the more it
# sees at once, the less its batches pad. Embedding each 256-sentence batch alone ran 14 %
# slower than the whole 2,000 (64 at a time: 40 % slower); 1,024 is within 3 % of it and, at
# minilm's 600 sentences/s, about 2 s of work that a kill or cancel can lose (docs/benchmarks.md).
EMBED_WINDOW = 1024
# Sentences committed per transaction: a whole window (each commit's fsync costs as much as
# writing ~1,000 rows; null-encoder ingest of 50,000 ran 2x faster than at 256 a commit).
ADD_BATCH = EMBED_WINDOW
# With window=None add_stream starts at EMBED_WINDOW and sizes the next window to about this
# many seconds of the encoder's measured rate, up to MAX_WINDOW: a fast encoder (a GPU) gets
# fewer, larger commits (4,096 a window ran ~25 % faster than 1,024 with a null encoder), while
# what a kill or cancel can lose stays about WINDOW_SECONDS of work per window in flight.
WINDOW_SECONDS = 1.0
MAX_WINDOW = 8192


# A backend's vectors are L2-normalised in float32 (core/encoder/pooling.py): their lengths are
# within a few float32 steps of 1. Rows this close are unit already and are not divided again.
UNIT_TOLERANCE = 1e-5


def normalize(vectors) -> np.ndarray:
    """float32 rows of unit length, C-contiguous. Rows that are unit already (a backend's embed
    output) are kept as they are, the others scaled (zero rows left as they are): each vector
    is normalised once, by the backend or here."""
    x = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if x.ndim == 1:
        x = x[None, :]
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    off = (np.abs(norms - 1.0) > UNIT_TOLERANCE) & (norms != 0)
    if not off.any():
        return x
    return np.ascontiguousarray(x / np.where(off, norms, 1.0), dtype=np.float32)


def check_texts(texts) -> None:
    for t in texts:
        if not isinstance(t, str) or not t.strip():
            raise InputError("empty texts cannot be stored")


def plan_unique(hashes, existing: dict, result: AddResult):
    """Which texts to insert: (plan, dup_of). A text already stored (its hash in `existing`,
    hash -> id) gets that id in result.ids; a repeat within this call is mapped in dup_of to
    its first occurrence. Both count as duplicates."""
    if (not existing or existing.keys().isdisjoint(hashes)) and len(set(hashes)) == len(hashes):
        return list(range(len(hashes))), {}      # all new and distinct: the usual window
    plan, first, dup_of = [], {}, {}
    for i, h in enumerate(hashes):
        if h in existing:
            result.ids[i] = existing[h]
            result.duplicates += 1
        elif h in first:
            dup_of[i] = first[h]
            result.duplicates += 1
        else:
            first[h] = i
            plan.append(i)
    return plan, dup_of


@dataclass
class AddResult:
    ids: list             # id of every input text, in input order (existing id for a duplicate)
    added: int = 0
    duplicates: int = 0
    truncated: int = 0    # texts cut to the model's maximum length while embedding
    cancelled: bool = False


class Embedded:
    """A window's vectors as the store keeps them, found by text, and which texts were cut."""

    def __init__(self, texts=(), vectors=None, cut_indices=(), seconds: float = 0.0):
        self.row = {t: i for i, t in enumerate(texts)}
        self.vectors = vectors
        self.cut = {texts[i] for i in cut_indices}
        self.seconds = seconds      # the encoder's time for them

    def extend(self, other: Embedded) -> None:
        if not other.row:
            return
        base = 0 if self.vectors is None else len(self.vectors)
        self.row.update((t, base + i) for t, i in other.row.items())
        self.vectors = other.vectors if self.vectors is None else np.concatenate([self.vectors, other.vectors])
        self.cut |= other.cut

    def rows_of(self, texts) -> np.ndarray:
        if len(texts) == len(self.row) and list(self.row) == texts:
            return self.vectors          # the window as it was embedded (the usual case): no copy
        return self.vectors[[self.row[t] for t in texts]]


class _Window:
    """Items read together: their texts, metadata, duplicate keys (one hash per text), and the
    texts handed to the encoder."""

    def __init__(self, items, store):
        """items: each a text, or (text, metadata)."""
        self.texts = [x if isinstance(x, str) else x[0] for x in items]
        self.metas = [None if isinstance(x, str) else x[1] for x in items]
        self.keys = store._text_keys(self.texts)
        self.text_set = set(self.texts)
        self.new: list = []
        self.stored: dict | None = None    # hash -> id of its texts the store held when it looked
        self.mark = None                   # the store's change mark then (None: none kept)


class OwnCommits:
    """What one add_stream committed since each window looked up its duplicates, so that a
    window's commit reuses its look-up instead of a second query: valid while every change to
    the store since the look-up was one of this stream's own commits (the store's change mark,
    e.g. the FAISS database's generation, says so); otherwise the commit looks again."""

    def __init__(self):
        self._last = None       # the mark after this stream's last commit
        self._since = None      # every change from this mark on was this stream's own
        self._recent: list = []  # (mark after, {hash: id}) of own commits

    def known(self, w: _Window, mark):
        """hash -> id of w's stored texts as of now, or None (look again). Call under the
        store's mutex, with its current mark."""
        if mark is None or w.mark is None or w.stored is None:
            return None
        if mark != self._last:      # another change since this stream's last commit
            self._since, self._recent = mark, []
        if w.mark < self._since:
            return None
        self._recent = [(m, d) for m, d in self._recent if m > w.mark]
        known = dict(w.stored)
        for _, d in self._recent:
            known.update(d)
        return known

    def committed(self, mark, keys, plan, ids) -> None:
        """This stream's commit of keys[i] for i in plan as ids[i], leaving the store at mark."""
        if mark is None:
            return
        self._recent.append((mark, {keys[i]: ids[i] for i in plan}))
        self._last = mark


def next_window(size: int, embedded: int, seconds: float) -> int:
    """The next window of an adaptive add_stream: about WINDOW_SECONDS of the encoder's rate
    over the last one (`embedded` texts in `seconds`), a power of two in [EMBED_WINDOW, MAX_WINDOW];
    a window with nothing new to embed keeps the size."""
    if embedded < 1:
        return size
    rate = embedded / max(seconds, 1e-6)
    want = max(EMBED_WINDOW, min(MAX_WINDOW, rate * WINDOW_SECONDS))
    return int(min(MAX_WINDOW, 2 ** int(np.log2(want))))


def add_stream(store, items, backend, *, pooling=None, batch_size: int | None = None,
               embed_batch_size: int | None = None, progress=None, cancel=None,
               result: AddResult | None = None, keep_ids: bool = False,
               window: int | None = None) -> AddResult:
    """Store.add_stream on `store` (see its docstring): windows tokenised and embedded outside
    the store's lock, ahead on helper threads (index/store/embed_ahead.py), committed in input
    order batch_size at a time."""
    from collections import deque
    from itertools import islice

    from core.encoder.backends import EmbedStats
    from index.store.embed_ahead import EmbedAhead, EmbedNow
    store._need_writer()
    fp = backend.fingerprint(pooling=pooling or store.pooling)
    fpmod.check(store.model_fingerprint_dict, fp, f"texts embedded with {backend.model_name}",
                where=f"at {store.where}", remedy=lambda: store.mismatch_remedy(fp))
    pooling = fp.pooling
    had_vectors = store.count() > 0
    result = result if result is not None else AddResult(ids=[])
    total = len(items) if hasattr(items, "__len__") else None
    adaptive = window is None
    window = EMBED_WINDOW if adaptive else max(window, batch_size or 1)
    tokenize = getattr(backend, "tokenize", None)     # a backend that tokenises apart (Backend)
    done = 0

    def prepare(texts):
        return tokenize(texts) if tokenize is not None and texts else None

    def embed(texts, tokens=None, on_progress=None, cancel_=cancel) -> Embedded:
        """The texts' vectors as the store keeps them; the texts cut to the model's maximum length."""
        if not texts:
            return Embedded()
        stats = EmbedStats()
        more = {} if tokens is None else {"tokens": tokens}
        start = time.perf_counter()
        vecs = backend.embed(texts, pooling=pooling, batch_size=embed_batch_size, cancel=cancel_,
                             stats=stats, progress=on_progress, **more)
        return Embedded(texts, store._to_store_space(normalize(vecs)), stats.truncated_indices,
                        time.perf_counter() - start)

    own = OwnCommits()

    def to_embed(w: _Window, in_flight) -> list:
        """The window's texts the store lacks (one look-up, kept for its commit), less those
        of the windows in flight."""
        with store._mutex:    # only to read which texts are stored; embedding runs unlocked
            w.mark = store._change_mark()
            if w.mark is not None:
                w.stored = store._stored_ids(w.keys)
                plan, _ = plan_unique(w.keys, w.stored, AddResult(ids=[None] * len(w.texts)))
            else:
                plan, _, _ = store._plan(w.texts, AddResult(ids=[None] * len(w.texts)), w.keys)
        busy = set().union(*(w.text_set & f.text_set for f in in_flight))   # usually empty
        return [w.texts[i] for i in plan if w.texts[i] not in busy] if busy else [w.texts[i] for i in plan]

    def commit(w: _Window, texts, metas, keys, vectors: Embedded):
        part = AddResult(ids=[None] * len(texts))
        with store._mutex, store._commit_guard():
            fpmod.unchanged_since_embedding(store.model_fingerprint_dict, fp, f"at {store.where}")
            known = own.known(w, store._change_mark())
            if known is None:
                plan, dup_of, context = store._plan(texts, part, keys)
            else:
                plan, dup_of, context = store._plan(texts, part, keys, known=known)
            # A text the window did not embed (the store changed since it looked): now.
            missing = [texts[i] for i in plan if texts[i] not in vectors.row]
            if missing:
                vectors.extend(embed(missing, prepare(missing)))
            if plan:
                planned = [texts[i] for i in plan]
                store._store_planned(plan, texts, metas, vectors.rows_of(planned), part, context)
                own.committed(store._change_mark(), keys, plan, part.ids)
                result.truncated += sum(t in vectors.cut for t in planned) if vectors.cut else 0
        for i, j in dup_of.items():
            part.ids[i] = part.ids[j]
        result.added += part.added
        result.duplicates += part.duplicates
        if keep_ids:
            result.ids.extend(part.ids)

    def windows():
        source = iter(items)
        while True:
            pending = list(islice(source, window))     # read as each window is wanted: it may have grown
            if not pending:
                return
            yield _Window(pending, store)

    def share_of(base, size):
        """progress(k, n) of embedding a window -> the window's share of done."""
        if progress is not None:
            return lambda k, n: progress(base + size * k // n, total)
        return None

    # An input of one window has nothing to overlap: no helper threads for it.
    one_window = total is not None and total <= window
    ahead = (EmbedNow if one_window else EmbedAhead)(embed, cancel, prepare)
    source = windows()
    queued: deque = deque()       # windows submitted, in input order

    def fill(committing=None):
        """Submit windows until the pipeline is full; each planned before the windows in
        flight (and the one being committed) are stored, so their texts are skipped."""
        while not ahead.full:
            w = next(source, None)
            if w is None:
                return
            w.new = to_embed(w, [*queued, *([committing] if committing else [])])
            ahead.submit(w.new)
            queued.append(w)

    try:
        fill()
        while queued:
            current = queued[0]
            vectors = ahead.result(share_of(done, len(current.texts)))
            queued.popleft()
            if ahead.cancelled():        # set while the window before was committed: stop there
                raise Cancelled("adding cancelled")
            if adaptive:
                window = next_window(window, len(current.new), vectors.seconds)
            fill(current)
            step = batch_size or len(current.texts)
            for s in range(0, len(current.texts), step):
                e = s + step
                commit(current, current.texts[s:e], current.metas[s:e], current.keys[s:e], vectors)
            done += len(current.texts)
            if progress is not None:
                progress(done, total)
    except Cancelled:
        result.cancelled = True
    finally:
        ahead.stop()
        if result.added:
            store._record_encoder(backend, had_vectors)
    store._end_stream()
    return result
