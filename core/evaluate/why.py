"""Why is this a hit? An exact split of a cosine score over (query token, hit token) pairs.

Search ranks by ``score = cos(u, v)``, the cosine of the two pooled sentence vectors. ``u`` is
pooled from the query's final-layer token vectors ``h_1..h_n`` and ``v`` from the hit's
``g_1..g_m`` (specials included, exactly as ``Backend.embed`` pools them). For each pooling
the score is a sum over token pairs, with no approximation:

* **mean**: ``u = (1/n) Σ_i h_i`` and ``v = (1/m) Σ_j g_j``, so by bilinearity
  ``u · v = Σ_ij (h_i · g_j) / (n m)`` and
  ``cos = Σ_ij C_ij`` with ``C_ij = (h_i · g_j) / (n · m · |u| · |v|)``.
  A pair whose token vectors point apart gives a *negative* contribution.
* **cls**: ``u = h_1`` and ``v = g_1`` (the [CLS] vectors): the whole score sits on the single
  [CLS]–[CLS] pair.
* **max**: ``u_d = max_i h_id`` is taken from one token per dimension ``d`` (likewise ``v_d``),
  so ``cos = Σ_d u_d v_d / (|u| |v|)``; each dimension's product is credited to the pair of
  tokens that won the max in that dimension. Still exact; ties go to the first token.
* **attention**: ``u = Σ_i a_i h_i`` and ``v = Σ_j b_j g_j`` with the learned query's softmax
  weights ``a``, ``b``, so ``cos = Σ_ij C_ij`` with ``C_ij = a_i b_j (h_i · g_j) / (|u| |v|)``.

Hiding the special tokens ([CLS], [SEP], ...) drops their rows and columns from the view;
what those pairs held is reported as the hidden share, never silently renormalised away.
Pure numpy + the pooling code of ``core.encoder.pooling``; no Qt.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.encoder.pooling import POOLINGS, attention_pool_weights, l2_normalize, pool
from core.inspect.attention_maps import distinct_labels

# ---------------------------------------------------------------------------- the maths, one step each

def mean_pair_contributions(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(n, m): ``(h_i · g_j) / (n m |u| |v|)`` with u, v the mean token vectors."""
    h, g = np.asarray(h, np.float64), np.asarray(g, np.float64)
    u, v = h.mean(axis=0), g.mean(axis=0)
    return (h @ g.T) / (len(h) * len(g) * np.linalg.norm(u) * np.linalg.norm(v))


def cls_pair_contributions(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(n, m): zero everywhere but the [CLS]–[CLS] pair, which holds the whole cosine."""
    h, g = np.asarray(h, np.float64), np.asarray(g, np.float64)
    out = np.zeros((len(h), len(g)))
    out[0, 0] = h[0] @ g[0] / (np.linalg.norm(h[0]) * np.linalg.norm(g[0]))
    return out


def max_pair_contributions(h: np.ndarray, g: np.ndarray) -> np.ndarray:
    """(n, m): each dimension's ``u_d v_d / (|u| |v|)`` credited to the pair (argmax_i h_id,
    argmax_j g_jd) that produced u_d and v_d."""
    h, g = np.asarray(h, np.float64), np.asarray(g, np.float64)
    winners_a, winners_b = h.argmax(axis=0), g.argmax(axis=0)          # (D,) token per dimension
    u, v = h.max(axis=0), g.max(axis=0)
    per_dimension = u * v / (np.linalg.norm(u) * np.linalg.norm(v))
    out = np.zeros((len(h), len(g)))
    np.add.at(out, (winners_a, winners_b), per_dimension)
    return out


def _pool_weights(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Attention pooling's weight of each token (T,), by the pooling the model uses, in float64."""
    t = torch.from_numpy(x)[None]
    return attention_pool_weights(t, torch.ones(t.shape[:2], dtype=torch.bool), torch.from_numpy(q))[0].numpy()


def attention_pair_contributions(h: np.ndarray, g: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(n, m): ``a_i b_j (h_i · g_j) / (|u| |v|)`` with a, b the query's softmax weights of
    each sentence's tokens and u, v the weighted sums."""
    h, g, q = np.asarray(h, np.float64), np.asarray(g, np.float64), np.asarray(query, np.float64)
    a, b = (_pool_weights(x, q) for x in (h, g))
    u, v = a @ h, b @ g
    return np.outer(a, b) * (h @ g.T) / (np.linalg.norm(u) * np.linalg.norm(v))


PAIR_CONTRIBUTIONS = {"mean": mean_pair_contributions, "cls": cls_pair_contributions,
                      "max": max_pair_contributions}


def pair_contributions(h: np.ndarray, g: np.ndarray, pooling: str = "mean", query=None) -> np.ndarray:
    """The (n, m) matrix of token-pair contributions; it sums to cos(pool(h), pool(g)).
    query: attention pooling's learned vector."""
    if pooling == "attention":
        return attention_pair_contributions(h, g, query)
    if pooling not in PAIR_CONTRIBUTIONS:
        raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")
    return PAIR_CONTRIBUTIONS[pooling](h, g)


def sentence_vector(hidden: np.ndarray, pooling: str = "mean", query=None) -> np.ndarray:
    """The L2-normalised sentence vector, pooled by the very code ``Backend.embed`` runs."""
    t = torch.from_numpy(np.ascontiguousarray(hidden, dtype=np.float32))[None]
    mask = torch.ones(t.shape[:2], dtype=torch.long)
    q = None if query is None else torch.as_tensor(np.asarray(query, np.float32))
    return l2_normalize(pool(t, mask, pooling, query=q))[0].numpy()


def embed_score(h: np.ndarray, g: np.ndarray, pooling: str = "mean", query=None) -> float:
    """cos of the two sentence vectors, as search computes it (float32 inner product)."""
    return float(np.dot(sentence_vector(h, pooling, query), sentence_vector(g, pooling, query)))


# ---------------------------------------------------------------------------- results

# A whitened store's score is the cosine of whitened vectors; Why splits the model's own cosine.
WHITENED_NOTE = ("the store is whitened: its search score {score:.4f} compares whitened vectors, "
                 "and this splits the model's own cosine")
SAME_SCORE = 1e-5     # |Σ − search score| within which a recomputation is the stored vector's


@dataclass
class HitRun:
    """One way the hit's stored vector may have been made: a precision, and alone or as a row of
    an ingest batch padded to some length (bf16 kernels differ between these)."""
    precision: str                # "fp32" | "bf16"
    padded_to: int                # 0: alone; else the padded length of the batch it ran in

    def describe(self) -> str:
        return f"{self.precision}, {'in a padded batch' if self.padded_to else 'alone'}"


# Padded lengths tried, shortest first: transformers picks its bf16 attention kernels by the
# padded length (a text of 6 tokens padded to 7 and to 22 differs by 1e-4), ours does not.
PADDED_LENGTHS = (1, 16, 32, 64, 128)


def hit_runs(precision: str) -> list[HitRun]:
    """The ways to try, most likely first: the backend's precision in an ingest batch, alone, then
    the other precision (a store may mix fp32 and bf16 vectors: PRECISION_POLICY)."""
    other = "fp32" if precision == "bf16" else "bf16"
    return [HitRun(p, padded) for p in (precision, other) for padded in (*PADDED_LENGTHS, 0)]


@dataclass
class Why:
    pooling: str                  # "mean" | "cls" | "max" | "attention": how the sentence vectors were pooled
    score: float                  # cosine of the two `embed` vectors: what search shows for the hit
    tokens_a: list                # the query's tokens, specials included
    tokens_b: list                # the hit's tokens, specials included
    special_a: np.ndarray         # (n,) bool: the query token is a special ([CLS], [SEP], ...)
    special_b: np.ndarray         # (m,) bool: the hit token is a special
    contributions: np.ndarray     # (n, m) float64: pair (i, j)'s share of the score; sums to it
    query_precision: str = "fp32"  # what the query ran in: the precision search embedded it in
    hit_run: HitRun | None = None  # how the hit ran: as its stored vector was made

    @property
    def total(self) -> float:
        """Σ of every pair's contribution (= score, up to float64 vs float32 rounding)."""
        return float(self.contributions.sum())

    def describe_precision(self) -> str:
        """"query bf16, hit bf16 in a padded batch": the runs the numbers come from."""
        hit = self.hit_run.describe() if self.hit_run else self.query_precision
        return f"query {self.query_precision}, hit {hit}"

    def view(self, hide_special: bool = False) -> WhyView:
        """What to show: every pair, or the pairs of two non-special tokens."""
        rows = np.flatnonzero(~self.special_a) if hide_special else np.arange(len(self.tokens_a))
        cols = np.flatnonzero(~self.special_b) if hide_special else np.arange(len(self.tokens_b))
        if not len(rows) or not len(cols):      # a text of nothing but specials: show it all
            rows, cols = np.arange(len(self.tokens_a)), np.arange(len(self.tokens_b))
        matrix = self.contributions[np.ix_(rows, cols)]
        return WhyView(why=self, rows=rows, cols=cols, matrix=matrix,
                       hidden_sum=float(self.contributions.sum() - matrix.sum()))


@dataclass
class WhyView:
    why: Why                      # the full decomposition this view shows part of
    rows: np.ndarray              # indices of the query tokens shown
    cols: np.ndarray              # indices of the hit tokens shown
    matrix: np.ndarray            # (len(rows), len(cols)) contributions shown
    hidden_sum: float             # what the hidden pairs add to the score (0 when none is hidden)

    @property
    def tokens_a(self) -> list:
        return [self.why.tokens_a[i] for i in self.rows]

    @property
    def tokens_b(self) -> list:
        return [self.why.tokens_b[j] for j in self.cols]

    @property
    def hidden_pairs(self) -> int:
        return self.why.contributions.size - self.matrix.size

    @property
    def row_sums(self) -> np.ndarray:
        """Each shown query token's total over the shown hit tokens."""
        return self.matrix.sum(axis=1)

    @property
    def col_sums(self) -> np.ndarray:
        """Each shown hit token's total over the shown query tokens."""
        return self.matrix.sum(axis=0)

    @property
    def hidden_share(self) -> float:
        """The hidden pairs' part of the score (a fraction; 0 when nothing is hidden)."""
        return self.hidden_sum / self.why.score if self.why.score else 0.0

    def top_pairs(self, k: int = 5, negative: bool = False) -> list[tuple[str, str, float]]:
        """The ``k`` largest (or, with ``negative``, most negative) shown contributions as
        (query token, hit token, value); a token that occurs twice carries its position."""
        m = self.matrix
        order = np.argsort(m, axis=None, kind="stable")
        order = order if negative else order[::-1]
        names_a, names_b = distinct_labels(self.tokens_a), distinct_labels(self.tokens_b)
        out = []
        for f in order[:k]:
            i, j = np.unravel_index(f, m.shape)
            if (m[i, j] < 0) if negative else (m[i, j] > 0):
                out.append((names_a[i], names_b[j], float(m[i, j])))
        return out

    def describe_hidden(self) -> str:
        """'' when nothing is hidden, else how much of the score the hidden pairs hold."""
        if not self.hidden_pairs:
            return ""
        return (f"special tokens hidden: their {self.hidden_pairs} pairs add {self.hidden_sum:+.4f} "
                f"to the score ({self.hidden_share:.0%} of it)")


def format_pairs(pairs, digits: int = 2) -> str:
    """"moons ↔ moons 0.21, planet ↔ Jupiter 0.09"."""
    return ", ".join(f"{a} ↔ {b} {pair_value(v, digits)}" for a, b, v in pairs)


def pair_value(v: float, digits: int) -> str:
    """``v`` with ``digits`` decimals, or two significant digits where those would read 0
    ("-2.1e-05", never "-0.0000" among the most negative pairs)."""
    text = f"{v:.{digits}f}"
    return f"{v:.2g}" if v != 0 and float(text) == 0 else text


def format_sums(tokens, sums, digits: int = 4) -> str:
    """"the 0.0120, cat 0.1040, ..." in token order."""
    return ", ".join(f"{t} {s:.{digits}f}" for t, s in zip(distinct_labels(list(tokens)), sums))


# ---------------------------------------------------------------------------- with a model

def explain(backend, query: str, text: str, pooling: str = "mean",
            search_score: float | None = None) -> Why:
    """Split ``backend``'s cosine between ``query`` and ``text`` over their token pairs.

    The query runs as search embeds it (alone, in the backend's precision). The hit runs as its
    stored vector was made: with ``search_score`` (the score search showed), each of ``hit_runs``
    is tried until the contributions add up to it within SAME_SCORE (else the closest is kept);
    without, as an ingest batch in the backend's precision makes it."""
    from core.errors import DeviceUnavailable
    pooling = backend.choose_pooling(pooling)
    q = None if backend.pooling_query is None else backend.pooling_query.detach().float().cpu().numpy()
    tokens_a, h, special_a = backend.token_vectors(query)
    best = None
    for run in hit_runs(backend.precision):
        try:
            tokens_b, g, special_b = backend.token_vectors(text, run.precision, run.padded_to)
        except DeviceUnavailable:      # no bf16 on this device: its vectors cannot come from here
            continue
        why = Why(pooling=pooling, score=embed_score(h, g, pooling, q), tokens_a=tokens_a, tokens_b=tokens_b,
                  special_a=special_a, special_b=special_b, contributions=pair_contributions(h, g, pooling, q),
                  query_precision=backend.precision, hit_run=run)
        if search_score is None:
            return why
        if best is None or abs(why.total - search_score) < abs(best.total - search_score):
            best = why
        if abs(why.total - search_score) <= SAME_SCORE:
            break
    return best


def explain_job(backend, pooling: str, query: str, text: str, search_score: float | None = None,
                progress=None, cancel=None) -> Why:
    """``explain`` in the shape the app's workers call (progress/cancel keywords)."""
    return explain(backend, query, text, pooling, search_score)


def to_dict(why: Why, hide_special: bool = False, top: int = 10) -> dict:
    """The CLI's JSON: score, tokens, the n × m contributions (of the tokens shown), specials."""
    view = why.view(hide_special)
    out = {"score": why.score, "pooling": why.pooling, "query_precision": why.query_precision,
           "hit_run": None if why.hit_run is None else {"precision": why.hit_run.precision,
                                                        "padded_to": why.hit_run.padded_to},
           "tokens_a": view.tokens_a, "tokens_b": view.tokens_b,
           "contributions": view.matrix.tolist(),
           "special_tokens_a": [k for k, i in enumerate(view.rows) if why.special_a[i]],
           "special_tokens_b": [k for k, j in enumerate(view.cols) if why.special_b[j]],
           "row_sums": view.row_sums.tolist(), "col_sums": view.col_sums.tolist(),
           "top_pairs": [{"a": a, "b": b, "value": v} for a, b, v in view.top_pairs(top)],
           "most_negative": [{"a": a, "b": b, "value": v} for a, b, v in view.top_pairs(top, negative=True)]}
    if view.hidden_pairs:
        out["hidden"] = {"tokens_a": [t for t, s in zip(why.tokens_a, why.special_a) if s],
                         "tokens_b": [t for t, s in zip(why.tokens_b, why.special_b) if s],
                         "pairs": view.hidden_pairs, "sum": view.hidden_sum, "share": view.hidden_share}
    return out
