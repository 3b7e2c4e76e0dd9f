"""How well a 2-D map keeps each sentence's neighbours: kNN recall.

For a sample of points, take their k nearest neighbours among all points by cosine in the full
space (the search's own measure) and their k nearest in the 2-D picture (Euclidean); the recall
is the share of the first set found in the second, averaged. 1.0: every sentence's closest
sentences are drawn around it; k / n: no better than chance. Unlike scikit-learn's
trustworthiness (n x n distances) it runs in O(sample x n) time and memory, so it can be shown
for a 100k-point map; bench/map.py reports both where trustworthiness fits in memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NEIGHBOURS = 10          # k: the neighbours a map should keep
SAMPLE = 1000            # points whose neighbours are compared (all of them in a smaller corpus)
_CHUNK = 256             # sample rows compared against all points at a time (bounded memory)


@dataclass(frozen=True)
class NeighbourRecall:
    recall: float        # mean share of the k nearest (full space) also k nearest in 2-D, 0..1
    k: int               # neighbours compared per point
    sample: int          # points whose neighbours were compared
    chance: float        # what a random placement would score: k / (n - 1)

    def describe(self) -> str:
        return (f"keeps {self.recall:.0%} of each sentence's {self.k} nearest neighbours "
                f"(chance {self.chance:.1%}; {self.sample:,} sentences sampled)")

    def to_dict(self) -> dict:
        return {"knn_recall": round(self.recall, 4), "k": self.k, "sample": self.sample,
                "chance": round(self.chance, 6)}


def _nearest(points: np.ndarray, rows: np.ndarray, k: int, similarity: bool) -> np.ndarray:
    """(len(rows), k) indices of each row's k nearest points, the row itself left out."""
    out = np.empty((len(rows), k), np.int64)
    for start in range(0, len(rows), _CHUNK):
        part = rows[start:start + _CHUNK]
        q = points[part]
        if similarity:           # unit vectors: larger inner product = nearer
            d = -(q @ points.T)
        else:
            d = (points ** 2).sum(axis=1)[None, :] - 2.0 * (q @ points.T)   # + |q|², the same per row
        d[np.arange(len(part)), part] = np.inf
        idx = np.argpartition(d, k - 1, axis=1)[:, :k]
        out[start:start + len(part)] = idx
    return out


def neighbour_recall(vectors, xy, k: int = NEIGHBOURS, sample: int = SAMPLE, seed: int = 0) -> NeighbourRecall:
    """kNN recall of the 2-D coordinates xy (n, 2) against vectors (n, D) compared by cosine."""
    x = np.asarray(vectors, dtype=np.float32)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    p = np.asarray(xy, dtype=np.float64)
    n = len(x)
    k = max(1, min(k, n - 1))
    if n < 2:
        return NeighbourRecall(1.0, 0, n, 1.0)
    rows = np.arange(n) if n <= sample else np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    high = _nearest(x, rows, k, similarity=True)
    low = _nearest(p, rows, k, similarity=False)
    hits = [len(np.intersect1d(a, b, assume_unique=True)) for a, b in zip(high, low)]
    return NeighbourRecall(float(np.mean(hits)) / k, k, len(rows), k / (n - 1))
