"""Reading one number of the walkthrough: where a score comes from, and wide matrices in words.

    terms = score_terms(q, k, i=3, j=5)       # q[3, d]·k[5, d] for every d, largest |term| first
    terms.score                               # Σ terms / √Dh = scores[3, 5]
    summary = wide_summary(values, top=3)     # per token: its norm and its largest |dimensions|

BertViz's neuron view shows a score as the element-wise product of a query and a key; here it
is the same on the model's real Q and K, with the sum written out so it can be checked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

WIDE = 128          # a matrix with at least this many columns is summarised, not only coloured


@dataclass
class ScoreTerms:
    dims: np.ndarray        # head dimensions d, largest |q·k term| first
    q: np.ndarray           # q[i, d] in that order
    k: np.ndarray           # k[j, d] in that order
    terms: np.ndarray       # q[i, d] · k[j, d] in that order
    dot: float              # Σ_d terms (in dimension order)
    scale: float            # √Dh

    @property
    def score(self) -> float:
        return self.dot / self.scale


def score_terms(q: np.ndarray, k: np.ndarray, i: int, j: int) -> ScoreTerms:
    """score[i, j] = Σ_d q[i, d]·k[j, d] / √Dh, term by term."""
    qi, kj = np.asarray(q, np.float64)[i], np.asarray(k, np.float64)[j]
    terms = qi * kj
    order = np.argsort(-np.abs(terms), kind="stable")
    return ScoreTerms(dims=order, q=qi[order], k=kj[order], terms=terms[order], dot=float(terms.sum()),
                      scale=math.sqrt(len(qi)))


@dataclass
class WideSummary:
    norms: np.ndarray       # (rows,) Euclidean length of each row
    top_dims: np.ndarray    # (rows, top) column index of each row's largest |values|, largest first
    top_values: np.ndarray  # (rows, top) those values (signed)
    mean_abs: np.ndarray    # (rows,) mean |value|: what a typical cell holds

    def describe(self, r: int) -> str:
        """One row in words: "‖x‖ 12.3 · top d17 +3.21, d300 −2.90"."""
        tops = ", ".join(f"d{d} {v:+.3g}" for d, v in zip(self.top_dims[r], self.top_values[r]))
        return f"‖x‖ {self.norms[r]:.4g} · mean |x| {self.mean_abs[r]:.3g} · top {tops}"


def wide_summary(values, top: int = 3) -> WideSummary:
    """Per row: its norm, its mean |value|, and its ``top`` columns by |value|."""
    m = np.atleast_2d(np.asarray(values, np.float64))
    top = min(top, m.shape[1])
    order = np.argsort(-np.abs(m), axis=1, kind="stable")[:, :top]
    return WideSummary(norms=np.linalg.norm(m, axis=1), top_dims=order,
                       top_values=np.take_along_axis(m, order, axis=1), mean_abs=np.abs(m).mean(axis=1))


def is_wide(values) -> bool:
    return np.ndim(values) >= 1 and np.shape(values)[-1] >= WIDE
