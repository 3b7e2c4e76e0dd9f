"""Interventions on features: switch SAE features off (ablate) or add them (steer) at their site,
in one scoped ``with``, keeping the SAE's error term.

    edit = FeatureEdit(sae, "L3.resid", ablate=frozenset({17}), steer={42: +4.0})
    with features_edited(backend, edit):
        vectors = backend.embed(["a query"])      # the model with feature 17 off, 42 pushed

At the site the activation h (every token) becomes

    h' = h - sum_{f in ablate} codes_f(h) W_dec[f] + sum_{f in steer} alpha_f W_dec[f]

which is decode(edited codes) + (h - decode(codes)): the reconstruction with the features
changed plus the SAE's error, the part of h the SAE does not explain. Editing nothing adds an
exact zero: the model bit for bit (tests/core/features/test_edit.py). Only this thread's
forwards are touched (core/encoder/scoped_hooks.py).

``steered_search`` ranks given sentence vectors by a query before and after an edit (brute-force
cosine; a store's search with an edit is index/corpus/intervene_ranking.ranking_changes);
``features_sweep`` asks, feature by feature, which of A's features set to B's values move A's
sentence vector toward B's.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from core.device import autocast
from core.encoder.pooling import l2_normalize, pool
from core.encoder.scoped_hooks import modules_path
from core.errors import Cancelled, InputError
from core.features.collect import check_site, iter_activations, parse_feature_site, site_hooks
from core.features.sae import SparseAutoencoder
from core.intervene.apply import encoder_of
from core.intervene.way_to_b import moved_toward_b


@dataclass(frozen=True)
class FeatureEdit:
    """Features switched off (``ablate``) or added with a strength (``steer``: feature -> alpha,
    in the feature's activation units, added at every token) at ``site``."""
    sae: SparseAutoencoder
    site: str
    ablate: frozenset = field(default_factory=frozenset)
    steer: dict = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "ablate", frozenset(int(f) for f in self.ablate))
        object.__setattr__(self, "steer", {int(f): float(a) for f, a in dict(self.steer).items()})
        parse_feature_site(self.site)
        bad = sorted(f for f in set(self.ablate) | set(self.steer) if not 0 <= f < self.sae.width)
        if bad:
            raise InputError(f"feature {bad[0]} is not one of this SAE's 0 to {self.sae.width - 1}")
        if not all(np.isfinite(a) for a in self.steer.values()):
            raise InputError("a steering strength must be a finite number")

    @property
    def empty(self) -> bool:
        return not self.ablate and not self.steer

    def describe(self) -> str:
        parts = [f"feature {f} off" for f in sorted(self.ablate)]
        parts += [f"feature {f} {a:+g}" for f, a in sorted(self.steer.items())]
        return f"{', '.join(parts) or 'no feature changed'} at {self.site}"

    def delta(self, h: torch.Tensor) -> torch.Tensor:
        """What the edit adds to the site's activation h (..., d_in), in float32."""
        sae = self.sae
        x = h.float()
        out = torch.zeros_like(x)
        if self.ablate:
            out -= sae.feature_contribution(sae.encode(x), self.ablate)
        if self.steer:
            idx = torch.tensor(sorted(self.steer), device=x.device)
            alpha = torch.tensor([self.steer[f] for f in sorted(self.steer)], device=x.device)
            out += alpha @ sae.W_dec.index_select(0, idx).float()
        return out


@contextmanager
def features_edited(model, edit: FeatureEdit):
    """Inside the block every forward of ``model`` (a backend or Encoder) on this thread runs
    with ``edit`` applied at its site; the SAE is moved to the model's device."""
    encoder = encoder_of(model)
    site = parse_feature_site(edit.site)
    check_site(site, encoder.config.n_layers, edit.site)
    device = encoder.embeddings.word_table.device
    edit.sae.to(device)

    def replace(h):
        with torch.no_grad():
            return h + edit.delta(h).to(h.dtype)

    with site_hooks(model, site, replace=replace):
        yield encoder


def sentence_vectors(model, texts: list[str], edit: FeatureEdit | None = None,
                     pooling: str | None = None) -> np.ndarray:
    """Unit sentence vectors (n, dim) through the modules (the kernels an edited run takes), with
    ``edit`` applied when given: before and after compare like with like."""
    if edit is None:
        with modules_path():
            return model.embed(texts, pooling=pooling)
    with features_edited(model, edit):
        return model.embed(texts, pooling=pooling)


@dataclass
class HitMove:
    row: int                      # index into the vectors searched
    text: str | None
    rank_before: int | None       # 1 = the best hit; None: not in the top ``depth``
    rank_after: int | None
    score_before: float
    score_after: float

    @property
    def moved(self) -> int | None:
        """Places climbed (negative: fell); None when a rank is beyond the depth."""
        if self.rank_before is None or self.rank_after is None:
            return None
        return self.rank_before - self.rank_after


@dataclass
class SteeredSearch:
    query: str
    edit: str
    k: int
    cosine: float                 # between the query's vectors before and after
    hits: list                    # HitMove: the top k after, in order
    left: list                    # HitMove: of the top k before, gone after

    @property
    def entered(self) -> list:
        return [h for h in self.hits if h.rank_before is None or h.rank_before > self.k]

    def to_dict(self) -> dict:
        def d(h):
            return {"row": h.row, "text": h.text, "rank_before": h.rank_before, "rank_after": h.rank_after,
                    "moved": h.moved, "score_before": h.score_before, "score_after": h.score_after}
        return {"query": self.query, "edit": self.edit, "k": self.k, "query_cosine": self.cosine,
                "hits": [d(h) for h in self.hits], "entered": [h.row for h in self.entered],
                "left": [d(h) for h in self.left]}


def steered_search(model, edit: FeatureEdit, query: str, vectors: np.ndarray, texts=None, k: int = 10,
                   pooling: str | None = None, depth: int = 1000) -> SteeredSearch:
    """The top ``k`` of ``vectors`` (unit rows, the clean model's) for ``query`` before and after
    ``edit`` is applied to the query's forward pass (the vectors stay as they are)."""
    if k < 1:
        raise InputError("k must be at least 1")
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) == 0 or vectors.shape[1] != model.dim:
        raise InputError(f"the vectors to search are {vectors.shape}, not (n, {model.dim})")
    before = sentence_vectors(model, [query], None, pooling)[0]
    after = sentence_vectors(model, [query], edit, pooling)[0]
    scores = vectors.astype(np.float64) @ np.stack([before, after]).astype(np.float64).T    # (n, 2)
    depth = max(k, min(depth, len(vectors)))
    ranks = []
    for col in range(2):
        order = np.argsort(-scores[:, col], kind="stable")[:depth]
        ranks.append({int(r): i + 1 for i, r in enumerate(order)})

    def move(row):
        return HitMove(row, None if texts is None else texts[row], ranks[0].get(row), ranks[1].get(row),
                       float(scores[row, 0]), float(scores[row, 1]))
    top_after = sorted(ranks[1], key=ranks[1].get)[:k]
    top_before = sorted(ranks[0], key=ranks[0].get)[:k]
    cos = float(np.dot(before.astype(np.float64), after.astype(np.float64)))
    return SteeredSearch(query, edit.describe(), k, cos, [move(r) for r in top_after],
                         [move(r) for r in top_before if r not in set(top_after)])


@dataclass
class FeatureEffect:
    feature: int
    value_a: float            # mean activation over A's tokens
    value_b: float            # over B's
    toward_b: float | None    # the fraction of the way from A's vector to B's (0 none, 1 all; None: A is B)
    cosine_to_b: float        # of A's edited vector with B's


@dataclass
class FeatureSweep:
    a: str
    b: str
    alignment: str            # "by position" (same token count) or "B's mean" (each of A's tokens gets it)
    all_features: float | None   # toward_b with every feature of A set to B's values at once
    effects: list             # FeatureEffect, the most toward B first

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "alignment": self.alignment, "all_features": self.all_features,
                "effects": [e.__dict__ for e in self.effects]}


def features_sweep(model, sae: SparseAutoencoder, meta, a: str, b: str, pooling: str | None = None,
                   batch: int = 32, progress=None, should_stop=None) -> FeatureSweep:
    """For every feature active in A or B: A's run with that feature's activations set to B's
    (token by token when A and B have as many tokens, else B's mean over its tokens at each of
    A's), A's error term kept; how far that moves A's sentence vector toward B's.
    progress(done, total, note) after each batch of features; should_stop() -> True raises
    Cancelled before the next batch."""
    from core.features.saved import check_model
    check_model(meta, model)
    encoder = encoder_of(model)
    site = parse_feature_site(meta.site)
    device = encoder.embeddings.word_table.device
    sae = sae.to(device)
    pooling = model.choose_pooling(pooling)

    def codes_of(text):
        acts = torch.cat([x.acts for x in iter_activations(model, [text], meta.site, 1, include_special=True)])
        with torch.no_grad():
            return sae.encode(acts.to(device))            # (T, width), every token
    ca, cb = codes_of(a), codes_of(b)
    same = len(ca) == len(cb)
    target = cb if same else cb[1:-1].mean(0, keepdim=True).expand_as(ca)
    if not same:
        target = target.clone()
        target[[0, -1]] = cb[[0, -1]]       # [CLS] and [SEP] take B's own
    candidates = sorted(set(torch.nonzero((ca > 0).any(0) | (cb > 0).any(0)).flatten().tolist()))
    ids = torch.tensor(model.encode_ids([a])[0][0], device=device)[None]
    vec_b = sentence_vectors(model, [b], None, pooling)[0]

    def run(deltas: torch.Tensor) -> np.ndarray:
        """A's unit vectors with each row's delta (V, T, D) added at the site."""
        rows = deltas.shape[0]
        input_ids = ids.expand(rows, -1)
        mask = torch.ones_like(input_ids)

        def replace(h):
            return h + deltas.to(h.dtype)
        with torch.inference_mode(), autocast(device, model.precision), site_hooks(model, site, replace=replace):
            hidden = encoder(input_ids, mask).last_hidden_state
            return l2_normalize(pool(hidden.float(), mask, pooling, query=model.pooling_query)).cpu().numpy()

    w_dec = sae.W_dec.detach()
    vec_a = run(torch.zeros(1, *ca.shape[:1], sae.d_in, device=device))[0]
    every = ((target - ca) @ w_dec)[None]
    all_features = moved_toward_b(vec_a, run(every)[0], vec_b)
    effects = []
    for start in range(0, len(candidates), batch):
        if should_stop is not None and should_stop():
            raise Cancelled()
        chunk = candidates[start:start + batch]
        diff = (target - ca)[:, chunk]                            # (T, V)
        deltas = diff.T[:, :, None] * w_dec[chunk][:, None, :]    # (V, T, D)
        vecs = run(deltas)
        for j, f in enumerate(chunk):
            effects.append(FeatureEffect(f, float(ca[1:-1, f].mean()) if len(ca) > 2 else float(ca[:, f].mean()),
                                         float(cb[1:-1, f].mean()) if len(cb) > 2 else float(cb[:, f].mean()),
                                         moved_toward_b(vec_a, vecs[j], vec_b),
                                         float(np.dot(vecs[j].astype(np.float64), vec_b.astype(np.float64)))))
        if progress is not None:
            progress(len(effects), len(candidates), "features set to B's values")
    effects.sort(key=lambda e: (-(e.toward_b if e.toward_b is not None else -np.inf), e.feature))
    return FeatureSweep(a, b, "by position" if same else "B's mean", all_features, effects)
