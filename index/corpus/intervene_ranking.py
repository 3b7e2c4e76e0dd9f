"""Which hits of a store's search move when the model is intervened on (core/intervene).

The store's vectors are fixed: they were embedded by the clean model when the texts were
ingested, and re-embedding a whole store per intervention would take minutes. Only the *query*
is embedded again, inside the intervention, and searched against the same stored vectors. So the
ranking shows how the intervened model's reading of the query changes what it finds, not how a
store rebuilt by the intervened model would rank (that would move the stored vectors too).

    changes = ranking_changes(store_or_location, backend, "a query", spec, k=10)
    changes.hits      # the top k after, each with its rank before (None: beyond `depth`)
    changes.entered   # hits in the top k after that were not in it before
    changes.left      # hits of the top k before that are not in it after
    changes.to_dict()

Ranks count from 1 and are the store's own (exact for a flat index; an approximate index, HNSW
or IVF, ranks as its search does). A rank deeper than `depth` is None ("beyond depth").

    texts = store_sample(store_or_location, n=600, seed=0)   # for importance maps over a store
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.intervene.apply import intervene
from core.intervene.spec import Intervention
from index.store.base import Store
from index.store.errors import EmptyStore

SAMPLE = 600          # texts of a store an importance map reads (each ablation embeds them all)
DEPTH = 1000          # how deep ranks outside the top k are looked up
MAX_DEPTH = 16384     # the deepest search every store kind answers (Milvus's topk limit)


@dataclass
class RankMove:
    """One stored sentence's place before and after the intervention (1 = the best hit)."""
    id: int
    text: str
    rank_before: int | None        # None: deeper than the depth searched
    rank_after: int | None
    score_before: float | None     # cosine with the clean / the intervened query vector
    score_after: float | None

    @property
    def moved(self) -> int | None:
        """Places it climbed (negative: fell); None when one of its ranks is beyond the depth."""
        if self.rank_before is None or self.rank_after is None:
            return None
        return self.rank_before - self.rank_after

    def to_dict(self) -> dict:
        return {"id": self.id, "text": self.text, "rank_before": self.rank_before,
                "rank_after": self.rank_after, "moved": self.moved,
                "score_before": self.score_before, "score_after": self.score_after}


@dataclass
class RankingChanges:
    query: str
    intervention: str                  # spec.describe()
    k: int
    depth: int                         # ranks looked up this deep (the store's size if smaller)
    cosine: float                      # between the clean and the intervened query vectors
    hits: list[RankMove]               # the top k after, in order
    left: list[RankMove] = field(default_factory=list)   # of the top k before, gone after

    @property
    def entered(self) -> list[RankMove]:
        return [h for h in self.hits if h.rank_before is None or h.rank_before > self.k]

    @property
    def unchanged(self) -> bool:
        return not self.left and all(h.moved == 0 for h in self.hits)

    def to_dict(self) -> dict:
        return {"query": self.query, "intervention": self.intervention, "k": self.k, "depth": self.depth,
                "query_cosine": self.cosine, "hits": [h.to_dict() for h in self.hits],
                "entered": [h.id for h in self.entered], "left": [h.to_dict() for h in self.left],
                "rank_is": "1 = the best hit; null = deeper than depth"}


def ranking_changes(store_or_corpus, backend, query: str, spec: Intervention, k: int = 10,
                    means=None, source=None, *, depth: int = DEPTH) -> RankingChanges:
    """How the top ``k`` hits of ``query`` over a store move when ``spec`` is applied to the query's
    forward pass (the stored vectors stay as the clean model made them: see the module's note).

    ``store_or_corpus``: an open Store, or a store location (opened read-only here and closed).
    ``means``: the head means for a mean ablation; ``source``: the patch source for patching (see
    core.intervene.apply.intervene). ModelMismatch (its fix as data) when the store's vectors were
    not made by ``backend``: comparing rankings across models would be meaningless."""
    return edited_ranking_changes(store_or_corpus, backend, query,
                                  lambda: intervene(backend, spec, means=means, patch_source=source),
                                  spec.describe(), k, depth=depth)


def edited_ranking_changes(store_or_corpus, backend, query: str, edited, description: str, k: int = 10,
                           *, depth: int = DEPTH) -> RankingChanges:
    """ranking_changes for any scoped edit of the query's forward pass: ``edited()`` returns the
    ``with`` that applies it (e.g. core.features.edit.features_edited(backend, edit)), and
    ``description`` says what it is."""
    from core.errors import InputError
    if k < 1:
        raise InputError("k must be at least 1")
    store = _open(store_or_corpus)
    try:
        if store.count() == 0:
            where = _where(store_or_corpus)
            raise EmptyStore(f"the store at {where} is empty: there are no hits whose ranks could move",
                             location=where)
        return _changes(store, backend, query, k, depth, edited, description)
    finally:
        if store is not store_or_corpus:
            store.close()


def store_sample(store_or_corpus, n: int = SAMPLE, seed: int = 0) -> list[str]:
    """A seeded sample of ``n`` different texts of the store (all of them, shuffled, when it holds
    fewer), in a seeded order: what core.intervene.importance measures over a store. The same
    store contents and seed give the same sample; a changed store gives another (and so its own
    cached map)."""
    from core.errors import InputError
    from index.corpus.door import read_rows
    if n < 1:
        raise InputError("the sample needs at least one text")
    store = _open(store_or_corpus)
    try:
        _, texts = read_rows(store)
    finally:
        if store is not store_or_corpus:
            store.close()
    texts = list(dict.fromkeys(t.strip() for t in texts if t.strip()))
    if not texts:
        raise EmptyStore(f"the store at {_where(store_or_corpus)} is empty: there are no texts to measure",
                         location=_where(store_or_corpus))
    pick = np.random.default_rng(seed).permutation(len(texts))[:n]
    return [texts[i] for i in pick]


def _where(store_or_corpus) -> str:
    """The store's location in words (an open Store: its own)."""
    if isinstance(store_or_corpus, Store):
        return str(getattr(store_or_corpus, "location", None) or getattr(store_or_corpus, "path", "") or "this store")
    return str(store_or_corpus)


def _open(store_or_corpus) -> Store:
    if isinstance(store_or_corpus, Store):
        return store_or_corpus
    from index.corpus.door import open_corpus
    from index.store.errors import StoreNotFound
    store = open_corpus(store_or_corpus)
    if store is None:
        # the location is the fix as data: a caller offers to ingest there
        raise StoreNotFound(f"there is no store at {store_or_corpus}", location=str(store_or_corpus))
    return store


def _changes(store: Store, backend, query, k, depth, edited, description: str) -> RankingChanges:
    from index.corpus.door import require_match
    pooling = store.pooling
    require_match(store, backend, pooling, "the query's vectors")
    fp = backend.fingerprint(pooling=pooling)
    before = backend.embed([query], pooling=pooling)[0]
    with edited():
        after = backend.embed([query], pooling=pooling)[0]
    depth = max(k, min(int(depth), MAX_DEPTH, store.count()))
    ranked_before, ranked_after = store.search(np.stack([before, after]), depth, fingerprint=fp)
    place_before = {h.id: (r, h) for r, h in enumerate(ranked_before, 1)}
    place_after = {h.id: (r, h) for r, h in enumerate(ranked_after, 1)}

    def move(hit) -> RankMove:
        rb, hb = place_before.get(hit.id, (None, None))
        ra, ha = place_after.get(hit.id, (None, None))
        return RankMove(hit.id, hit.text, rb, ra, None if hb is None else hb.score,
                        None if ha is None else ha.score)

    after_ids = {h.id for h in ranked_after[:k]}
    cos = float(np.dot(before.astype(np.float64), after.astype(np.float64))
                / (np.linalg.norm(before) * np.linalg.norm(after)))
    return RankingChanges(query, description, k, depth, cos,
                          [move(h) for h in ranked_after[:k]],
                          [move(h) for h in ranked_before[:k] if h.id not in after_ids])
