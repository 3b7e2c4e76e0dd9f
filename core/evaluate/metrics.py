"""How good a model's sentence vectors are: rank and linear correlation of pair cosines with
graded similarity scores (Spearman, Pearson), anisotropy (the mean cosine of random pairs), and
retrieval measures (recall@k, MRR) from the ranks of the relevant texts.

Pure NumPy: no model and no store here (core/evaluate/pairs.py runs a model on a pairs file;
index/corpus/evaluation.py runs a store's search on a queries file).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InputError

ANISOTROPY_PAIRS = 2000     # random pairs averaged (all distinct pairs when there are fewer)
ANISOTROPY_SEED = 0         # fixed: the same vectors give the same number on every run


def ranks(values) -> np.ndarray:
    """1-based ranks, ties sharing the mean of the ranks they span (the 'average' method)."""
    x = np.asarray(values, dtype=np.float64)
    order = np.argsort(x, kind="mergesort")
    sorted_x = x[order]
    # Runs of equal values: each gets the mean of first and last rank of its run.
    starts = np.r_[True, sorted_x[1:] != sorted_x[:-1]]
    run_id = np.cumsum(starts) - 1
    first = np.flatnonzero(starts)
    last = np.r_[first[1:], len(x)] - 1
    mean_rank = (first + last) / 2.0 + 1.0
    out = np.empty(len(x), np.float64)
    out[order] = mean_rank[run_id]
    return out


def pearson(a, b) -> float:
    """Pearson's r of two equal-length series; an InputError when either is constant."""
    x, y = _paired(a, b)
    xc, yc = x - x.mean(), y - y.mean()
    denom = np.sqrt((xc @ xc) * (yc @ yc))
    if denom == 0:
        raise InputError("a correlation needs values that vary: one of the series is constant")
    return float((xc @ yc) / denom)


def spearman(a, b) -> float:
    """Spearman's rho: Pearson's r of the ranks (ties averaged)."""
    x, y = _paired(a, b)
    return pearson(ranks(x), ranks(y))


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if len(x) != len(y):
        raise InputError(f"a correlation needs series of one length ({len(x)} and {len(y)} given)")
    if len(x) < 2:
        raise InputError("a correlation needs at least two pairs")
    return x, y


def unit_rows(x) -> np.ndarray:
    """float64 rows scaled to unit length (zero rows stay zero)."""
    v = np.asarray(x, np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return v / np.where(norms == 0, 1.0, norms)


def pair_cosines(a, b) -> np.ndarray:
    """Cosine of each row of ``a`` with the same row of ``b``."""
    return np.sum(unit_rows(a) * unit_rows(b), axis=1)


@dataclass(frozen=True)
class Anisotropy:
    """The mean cosine of random pairs of distinct vectors: near 0 for directions spread over
    the sphere, near 1 when every vector points into one narrow cone."""
    value: float      # the mean cosine
    pairs: int        # how many pairs it averages
    seed: int         # the random pairs' seed
    vectors: int      # how many vectors they were drawn from


def random_pairs(n: int, sample: int = ANISOTROPY_PAIRS, seed: int = ANISOTROPY_SEED):
    """(i, j) index arrays of distinct pairs i < j: every pair when there are at most
    ``sample``, else ``sample`` pairs drawn with a fixed seed."""
    if n < 2:
        raise InputError("anisotropy needs at least two vectors")
    total = n * (n - 1) // 2
    if total <= sample:
        i, j = np.triu_indices(n, 1)
        return i, j
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, sample)
    j = (i + rng.integers(1, n, sample)) % n      # never i itself
    return np.minimum(i, j), np.maximum(i, j)


def anisotropy(vectors, sample: int = ANISOTROPY_PAIRS, seed: int = ANISOTROPY_SEED) -> Anisotropy:
    """The mean cosine of random pairs of ``vectors`` (rows)."""
    v = unit_rows(vectors)
    i, j = random_pairs(len(v), sample, seed)
    return Anisotropy(float(np.mean(np.sum(v[i] * v[j], axis=1))), len(i), seed, len(v))


def retrieval_scores(ranks_found, k: int) -> dict:
    """recall@k and MRR@k from the 1-based rank of each query's relevant text (None: not in
    the top k): recall is the share found, MRR the mean of 1/rank (0 when not found)."""
    if not ranks_found:
        raise InputError("no queries to score")
    found = [r for r in ranks_found if r is not None and r <= k]
    return {"n": len(ranks_found), "recall_at_k": len(found) / len(ranks_found),
            "mrr": sum(1.0 / r for r in found) / len(ranks_found), "k": int(k)}
