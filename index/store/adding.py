"""What goes into a store and how: vectors normalised, texts checked, the plan that stores each
distinct text once, the result of an add, and add_stream, which embeds (text, metadata) items a
window at a time outside the store's lock, one window ahead, and commits them in batches."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import Cancelled, InputError
from index.store import fingerprint as fpmod

ADD_BATCH = 256       # sentences committed per add_stream batch (one transaction each)
# Sentences embedded together by add_stream: the encoder sorts them by length, so the more it
# sees at once, the less its batches pad. Embedding each 256-sentence batch alone ran 14 %
# slower than the whole 2,000 (64 at a time: 40 % slower); 1,024 is within 3 % of it and, at
# minilm's 600 sentences/s, about 2 s of work that a kill or cancel can lose (docs/benchmarks.md).
EMBED_WINDOW = 1024


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


def add_stream(store, items, backend, *, pooling=None, batch_size: int = ADD_BATCH,
               embed_batch_size: int | None = None, progress=None, cancel=None,
               result: AddResult | None = None, keep_ids: bool = False,
               window: int = EMBED_WINDOW) -> AddResult:
    """Store.add_stream on `store` (see its docstring): windows embedded outside the store's
    lock, one ahead on a helper thread, committed in input order batch_size at a time."""
    from core.encoder.backends import EmbedStats
    from index.store.embed_ahead import EmbedAhead
    store._need_writer()
    fp = backend.fingerprint(pooling=pooling or store.pooling)
    fpmod.check(store.model_fingerprint_dict, fp, f"texts embedded with {backend.model_name}",
                where=f"at {store.where}", **store.mismatch_remedy(fp))
    pooling = fp.pooling
    had_vectors = store.count() > 0
    result = result if result is not None else AddResult(ids=[])
    total = len(items) if hasattr(items, "__len__") else None
    window = max(window, batch_size)
    done = 0

    def embed(texts, on_progress=None, cancel_=cancel) -> tuple[dict, set]:
        """text -> vector as the store keeps it; the texts cut to the model's maximum length."""
        if not texts:
            return {}, set()
        stats = EmbedStats()
        vecs = backend.embed(texts, pooling=pooling, batch_size=embed_batch_size, cancel=cancel_,
                             stats=stats, progress=on_progress)
        return (dict(zip(texts, store._to_store_space(normalize(vecs)))),
                {texts[i] for i in stats.truncated_indices})

    def to_embed(chunk, in_flight: set) -> list:
        """The chunk's texts the store lacks (one look-up), less those of the window in flight."""
        texts = [t for t, _ in chunk]
        with store._mutex:    # only to read which texts are stored; embedding runs unlocked
            plan, _, _ = store._plan(texts, AddResult(ids=[None] * len(texts)))
        return [texts[i] for i in plan if texts[i] not in in_flight]

    def commit(chunk, vectors: dict, cut: set):
        texts = [t for t, _ in chunk]
        metas = [m for _, m in chunk]
        part = AddResult(ids=[None] * len(texts))
        with store._mutex, store._commit_guard():
            fpmod.unchanged_since_embedding(store.model_fingerprint_dict, fp, f"at {store.where}")
            plan, dup_of, context = store._plan(texts, part)
            # A text the window did not embed (the store changed since it looked): now.
            missing = [texts[i] for i in plan if texts[i] not in vectors]
            if missing:
                more, more_cut = embed(missing)
                vectors.update(more)
                cut.update(more_cut)
            if plan:
                store._store_planned(plan, texts, metas,
                                    np.stack([vectors[texts[i]] for i in plan]), part, context)
                result.truncated += sum(texts[i] in cut for i in plan)
        for i, j in dup_of.items():
            part.ids[i] = part.ids[j]
        result.added += part.added
        result.duplicates += part.duplicates
        if keep_ids:
            result.ids.extend(part.ids)

    def windows():
        pending = []
        for item in items:
            pending.append((item, None) if isinstance(item, str) else item)
            if len(pending) >= window:
                yield pending
                pending = []
        if pending:
            yield pending

    def share_of(base, size):
        """progress(k, n) of embedding a window -> the window's share of done."""
        if progress is not None:
            return lambda k, n: progress(base + size * k // n, total)
        return None

    ahead = EmbedAhead(embed, cancel)
    source = windows()
    try:
        current = next(source, None)
        if current is not None:
            ahead.start(to_embed(current, set()))
        while current is not None:
            upcoming = next(source, None)
            if upcoming is not None:         # planned before `current` is stored: skip its texts
                in_flight = {t for t, _ in current}
                upcoming_new = to_embed(upcoming, in_flight)
            vectors, cut = ahead.result(share_of(done, len(current)))
            if ahead.cancelled():        # set while the window before was committed: stop there
                raise Cancelled("adding cancelled")
            if upcoming is not None:
                ahead.start(upcoming_new)
            for start in range(0, len(current), batch_size):
                commit(current[start:start + batch_size], vectors, cut)
            done += len(current)
            if progress is not None:
                progress(done, total)
            current = upcoming
    except Cancelled:
        result.cancelled = True
    finally:
        ahead.stop()
        if result.added:
            store._record_encoder(backend, had_vectors)
    store._end_stream()
    return result
