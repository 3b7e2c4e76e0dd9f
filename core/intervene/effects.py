"""What an intervention changes, before | after | difference: attentions, the sentence vector,
fill-mask, Spearman on the shipped pairs, recall@k and MRR on the shipped queries.

Each function runs the clean model, then the same call inside ``intervene``; run them in a worker
(the hooks act on the calling thread only). Store-dependent effects live in index/.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core import assets
from core.encoder.scoped_hooks import modules_path
from core.evaluate.metrics import retrieval_scores, spearman
from core.evaluate.pairs import read_queries, read_scored_pairs
from core.intervene import way_to_b
from core.intervene.apply import intervene
from core.intervene.spec import Intervention
from core.intervene.way_to_b import TowardB


@dataclass
class AttentionEffect:
    tokens: list
    before: np.ndarray      # (L, H, T, T)
    after: np.ndarray

    @property
    def difference(self) -> np.ndarray:
        return self.after - self.before


@dataclass
class VectorEffect:
    before: np.ndarray      # (D,) unit vector, the model's pooling
    after: np.ndarray
    cosine: float


def toward_b(backend, vector: VectorEffect, text_b: str, pooling: str | None = None) -> TowardB:
    """``vector`` is A's before | after a patch from ``text_b``: how far it moved toward B. B runs
    through the modules, as A's before and after did (compare_vector): what the CLI measures."""
    with modules_path():
        b = backend.embed([text_b], pooling=pooling)[0]
    return way_to_b.toward_b(vector.before, vector.after, b)


@dataclass
class FillMaskEffect:
    before: object          # core.encoder.fillmask.FillMaskResult
    after: object
    target: str | None = None
    target_before: float | None = None   # p(target) at the first mask
    target_after: float | None = None


@dataclass
class MetricEffect:
    name: str
    before: float
    after: float
    details: dict | None = None

    @property
    def difference(self) -> float:
        return self.after - self.before

    def to_dict(self) -> dict:
        return {"metric": self.name, "before": self.before, "after": self.after,
                "difference": self.difference, **({"details": self.details} if self.details else {})}


def compare_attentions(backend, text: str, spec: Intervention, means=None, source=None) -> AttentionEffect:
    before = backend.inspect(text)
    with intervene(backend, spec, means, source):
        after = backend.inspect(text)
    return AttentionEffect(before.tokens, before.attentions, after.attentions)


def compare_vector(backend, text: str, spec: Intervention, pooling: str | None = None,
                   means=None, source=None, precision: str | None = None) -> VectorEffect:
    """The sentence's unit vector without and with the intervention, and their cosine."""
    was = backend.precision
    try:
        if precision is not None:
            backend.precision = precision
        with modules_path():    # the kernels the intervened run takes: like compared with like
            before = backend.embed([text], pooling=pooling)[0]
        with intervene(backend, spec, means, source):
            after = backend.embed([text], pooling=pooling)[0]
    finally:
        backend.precision = was
    return VectorEffect(before, after, float(np.dot(before.astype(np.float64), after.astype(np.float64))))


def compare_fill_mask(backend, text: str, spec: Intervention, top_k: int = 5, target: str | None = None,
                      means=None, source=None) -> FillMaskEffect:
    """Top-k at each mask without and with the intervention, and p(target) at the first mask."""
    def run():
        result = backend.fill_mask(text, top_k=top_k)
        score = None
        if target:
            score = backend.fill_mask(text, top_k=1, targets=[target]).masks[0]["predictions"][0]["score"]
        return result, score
    before, target_before = run()
    with intervene(backend, spec, means, source):
        after, target_after = run()
    return FillMaskEffect(before, after, target, target_before, target_after)


def pairs_spearman(backend, pairs=None, pooling: str | None = None, progress=None, cancel=None) -> float:
    pairs = pairs or read_scored_pairs(assets.eval_pairs())
    n = len(pairs)
    v = backend.embed(list(pairs.a) + list(pairs.b), pooling=pooling, progress=progress, cancel=cancel)
    cos = np.sum(v[:n].astype(np.float64) * v[n:], axis=1)
    return float(spearman(cos, pairs.scores))


def compare_pairs(backend, spec: Intervention, pairs=None, pooling: str | None = None, means=None,
                  progress=None, cancel=None) -> MetricEffect:
    """Spearman between the cosines and the gold scores of the shipped eval pairs."""
    before = pairs_spearman(backend, pairs, pooling, progress, cancel)
    with intervene(backend, spec, means):
        after = pairs_spearman(backend, pairs, pooling, progress, cancel)
    return MetricEffect("spearman", before, after)


def query_scores(backend, queries=None, corpus=None, k: int = 10, pooling: str | None = None,
                 progress=None, cancel=None) -> dict:
    """recall@k and MRR of the shipped queries over the sample corpus, by brute-force cosine."""
    queries = queries or read_queries(assets.eval_queries())
    corpus = corpus or sample_corpus()
    v = backend.embed([q for q, _ in queries] + corpus, pooling=pooling, progress=progress, cancel=cancel)
    return retrieval_from_vectors(v[:len(queries)], v[len(queries):], queries, corpus, k)


def retrieval_from_vectors(qv, cv, queries, corpus, k: int) -> dict:
    index = {t: i for i, t in enumerate(corpus)}
    sims = qv.astype(np.float64) @ cv.astype(np.float64).T
    order = np.argsort(-sims, axis=1, kind="stable")
    found = []
    for row, (_, relevant) in enumerate(queries):
        where = np.nonzero(order[row] == index[relevant])[0] if relevant in index else []
        found.append(int(where[0]) + 1 if len(where) else None)
    return retrieval_scores(found, k)


def compare_queries(backend, spec: Intervention, queries=None, corpus=None, k: int = 10, means=None,
                    progress=None, cancel=None) -> tuple[MetricEffect, MetricEffect]:
    """(recall@k effect, MRR effect) of the intervention."""
    before = query_scores(backend, queries, corpus, k, progress=progress, cancel=cancel)
    with intervene(backend, spec, means):
        after = query_scores(backend, queries, corpus, k, progress=progress, cancel=cancel)
    return (MetricEffect(f"recall@{k}", before["recall_at_k"], after["recall_at_k"]),
            MetricEffect(f"mrr@{k}", before["mrr"], after["mrr"]))


def sample_corpus() -> list[str]:
    lines = assets.sample_corpus().read_text(encoding="utf-8").splitlines()
    return list(dict.fromkeys(t.strip() for t in lines if t.strip()))
