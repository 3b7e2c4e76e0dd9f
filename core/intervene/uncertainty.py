"""How sure a measured drop is: a seeded bootstrap over the items a metric reads.

Every metric of an importance map is a function of per-item values: a cosine per scored pair
(Spearman against the gold scores), a reciprocal rank or a hit per query (MRR, recall), a
log-probability per masked token (mlm). A bootstrap resample draws n items with replacement; it
is written here as counts (how often each item was drawn), so one (R, n) matrix of counts scores
every part of a map on the same resamples (a paired bootstrap: the clean model and the ablated
one see the same items). A part's 95 % interval is the 2.5th..97.5th percentile of its drop over
the resamples; a part is distinguishable from no change when that interval leaves out 0.
"""
from __future__ import annotations

import numpy as np

ROUNDS = 1000           # resamples: the interval's ends move by about 0.1 % of its width between seeds
LEVEL = 0.95


def resample_counts(n: int, seed: int, rounds: int = ROUNDS) -> np.ndarray:
    """(rounds, n) how many times each of n items is drawn in each seeded resample."""
    rng = np.random.default_rng([seed, n, 49])
    draws = rng.integers(0, n, size=(rounds, n))
    counts = np.zeros((rounds, n), dtype=np.float64)
    np.add.at(counts, (np.arange(rounds)[:, None], draws), 1.0)
    return counts


def mean_scores(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(R,) the mean of the per-item values in each resample."""
    return counts @ np.asarray(values, np.float64) / counts.sum(axis=1)


def resampled_ranks(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """(R, n) each item's rank (from 1, ties averaged) among the items of each resample, its
    copies included: the rank its copies share in the resample's ranking."""
    x = np.asarray(values, np.float64)
    below = (x[None, :] < x[:, None]).astype(np.float64)         # below[i, j]: x_j < x_i
    equal = (x[None, :] == x[:, None]).astype(np.float64)
    less = counts @ below.T                                       # (R, n): drawn items below item i
    same = counts @ equal.T                                       # drawn items equal to item i
    return less + (same + 1.0) / 2.0


def weighted_pearson(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """(R,) Pearson's r of rows x and y (R, n) with weights w (R, n)."""
    total = w.sum(axis=1, keepdims=True)
    xc = x - (w * x).sum(axis=1, keepdims=True) / total
    yc = y - (w * y).sum(axis=1, keepdims=True) / total
    cov = (w * xc * yc).sum(axis=1)
    denom = np.sqrt((w * xc * xc).sum(axis=1) * (w * yc * yc).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, cov / np.where(denom > 0, denom, 1.0), 0.0)


def spearman_scores(values: np.ndarray, gold: np.ndarray, counts: np.ndarray,
                    gold_ranks: np.ndarray | None = None) -> np.ndarray:
    """(R,) Spearman's rho of (values, gold) over each resample (ties averaged, copies counted).
    gold_ranks: resampled_ranks(gold, counts), computed once for every part of a map."""
    g = resampled_ranks(gold, counts) if gold_ranks is None else gold_ranks
    return weighted_pearson(resampled_ranks(values, counts), g, counts)


def interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap samples."""
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(np.asarray(samples, np.float64), [tail, 100.0 - tail])
    return float(lo), float(hi)


def excludes_zero(lo: float, hi: float) -> bool:
    """A drop whose interval leaves out 0: distinguishable from no change."""
    return lo > 0.0 or hi < 0.0
