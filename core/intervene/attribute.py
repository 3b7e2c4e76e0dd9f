"""Gradient attributions: one number per input token for one scalar output of the model.

The output f: the cosine of the sentence's vector with another sentence's (fixed) vector, or
p(word) at the sentence's first [MASK]. The input: the tokens' word embeddings (positions, token
types and the LayerNorm come after, as in the model).

* grad x input: a_i = sum_d x_id * df/dx_id at the sentence itself (Shrikumar et al. 2016).
* integrated gradients (Sundararajan et al. 2017): a_i = sum_d (x_id - x'_id) * integral_0^1
  df/dx_id(x' + alpha (x - x')) d alpha, from the baseline x' ("pad": the [PAD] embedding at
  every token but the specials ([CLS], [SEP], [MASK]: kept, so they get 0); "zero": zero vectors
  there). The integral by Gauss-Legendre quadrature with ``steps`` nodes (Captum's default rule).
  Completeness: sum_i a_i = f(x) - f(x'); the gap printed is how far the sum is from it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.device import autocast
from core.errors import Cancelled, InputError
from core.intervene import readout
from core.intervene.apply import encoder_of
from core.intervene.restore import run_from
from core.names import ATTRIBUTION_METHODS as METHODS
from core.names import IG_BASELINES as BASELINES
from core.names import IG_STEPS as STEPS

ROWS = 16          # interpolation points per forward/backward pass


@dataclass
class Attribution:
    tokens: list
    attributions: np.ndarray     # (T,)
    target_value: float          # f(x)
    baseline_value: float | None  # f(x') (integrated gradients)
    method: str
    target: str                  # what f is, in words
    precision: str
    steps: int | None = None
    baseline: str | None = None

    @property
    def completeness_gap(self) -> float | None:
        """|sum of attributions - (f(x) - f(x'))| (integrated gradients only)."""
        if self.baseline_value is None:
            return None
        return abs(float(self.attributions.sum()) - (self.target_value - self.baseline_value))

    @property
    def relative_gap(self) -> float | None:
        gap = self.completeness_gap
        change = abs(self.target_value - (self.baseline_value or 0.0))
        return None if gap is None else gap / max(change, 1e-12)

    def to_dict(self) -> dict:
        return {"tokens": self.tokens, "attributions": [round(float(a), 8) for a in self.attributions],
                "target_value": self.target_value, "baseline_value": self.baseline_value,
                "completeness_gap": self.completeness_gap, "relative_gap": self.relative_gap,
                "method": self.method, "steps": self.steps, "baseline": self.baseline,
                "target": self.target, "precision": self.precision}


class Target:
    """f: final hidden states (N, T, D) -> (N,), and what it is in words."""

    def __init__(self, backend, ids: list[int], other: str | None, word: str | None, pooling: str | None):
        if (other is None) == (word is None):
            raise InputError("attribute what: the cosine with another sentence, or p(word) at the "
                             "sentence's [MASK] (one of the two)")
        self.backend = backend
        if other is not None:
            if not other.strip():
                raise InputError("the other sentence is empty: type the sentence the cosine is taken with")
            self.pooling = backend.choose_pooling(pooling)
            with torch.no_grad(), autocast(backend.device, backend.precision):
                o_ids = torch.tensor(backend.encode_ids([other])[0], device=backend.device)
                end = run_from(encoder_of(backend), 0, encoder_of(backend).embeddings(o_ids))
                self.other = readout.unit_vectors(backend, end, self.pooling)
            self.words = f"cosine with {other!r} ({self.pooling} pooling)"
        else:
            self.position = readout.mask_position(backend, ids)
            if self.position is None:
                raise InputError("p(word) is read at the [MASK]: put [MASK] in the sentence")
            readout.need_mlm(backend, f"p({word}) at the mask")
            self.token = readout.target_token(backend, word)
            self.other = None
            self.words = f"p({word}) at the [MASK] (position {self.position})"

    def __call__(self, y: torch.Tensor) -> torch.Tensor:
        if self.other is not None:
            return (readout.unit_vectors(self.backend, y, self.pooling) * self.other).sum(-1)
        return readout.mask_probability(self.backend, y, self.position, self.token)


def kept_tokens(backend, ids: list[int]) -> list[bool]:
    """True at the tokens the baseline keeps: every special token but [PAD] ([CLS], [SEP], [MASK])."""
    tok = backend.tokenizer
    specials = set(tok.all_special_ids) - {tok.pad_token_id}
    return [i in specials for i in ids]


def baseline_words(backend, ids: list[int], words: torch.Tensor, kind: str) -> torch.Tensor:
    """x' (1, T, D): the [PAD] embedding or zeros at every token the baseline does not keep."""
    if kind not in BASELINES:
        raise InputError(f"the baseline is one of {', '.join(BASELINES)}, not {kind!r}")
    encoder = encoder_of(backend)
    fill = (encoder.embeddings.word_table[backend.tokenizer.pad_token_id].detach()
            if kind == "pad" else torch.zeros(words.shape[-1], device=words.device))
    keep = torch.tensor(kept_tokens(backend, ids), device=words.device)[None, :, None]
    return torch.where(keep, words, fill.to(words.dtype))


def gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes in [0, 1] and their weights (summing to 1) for integral_0^1 g(alpha) d alpha."""
    nodes, weights = np.polynomial.legendre.leggauss(steps)
    return (nodes + 1) / 2, weights / 2


def _gradients(encoder, points: torch.Tensor, f) -> tuple[torch.Tensor, torch.Tensor]:
    """f at each row of word embeddings ``points`` (N, T, D) and df/dpoints (N, T, D)."""
    points = points.detach().requires_grad_(True)
    y = run_from(encoder, 0, encoder.embeddings.from_words(points))     # + positions, LayerNorm
    values = f(y).float()
    (grad,) = torch.autograd.grad(values.sum(), points)
    return values.detach(), grad.float()


def attribute(backend, text: str, method: str = "ig", other: str | None = None, word: str | None = None,
              steps: int = STEPS, baseline: str = "pad", pooling: str | None = None,
              progress=None, cancel=None) -> Attribution:
    """Each token's attribution for f (the cosine with ``other``, or p(``word``) at the [MASK])."""
    if method not in METHODS:
        raise InputError(f"the method is one of {', '.join(METHODS)}, not {method!r}")
    if method == "ig" and steps < 1:
        raise InputError("integrated gradients need at least 1 step (32 is the default)")
    encoder = encoder_of(backend)
    ids = backend.encode_ids([text])[0][0]
    f = Target(backend, ids, other, word, pooling)
    dev = backend.device
    t_ids = torch.tensor([ids], device=dev)
    tokens = backend.tokenizer.convert_ids_to_tokens(ids)
    with torch.enable_grad(), autocast(dev, backend.precision):
        x = encoder.embeddings.words(t_ids).detach().float()
        if method == "grad-x-input":
            value, grad = _gradients(encoder, x, f)
            scores = (x * grad).sum(-1)[0]
            return Attribution(tokens, scores.double().cpu().numpy(), float(value[0]), None, method,
                               f.words, backend.precision)
        x0 = baseline_words(backend, ids, x, baseline)
        alphas, weights = gauss_legendre(steps)
        total = torch.zeros_like(x)
        for start in range(0, steps, ROWS):
            if cancel is not None and cancel():
                raise Cancelled("attribution cancelled")
            a = torch.tensor(alphas[start:start + ROWS], device=dev, dtype=x.dtype)[:, None, None]
            w = torch.tensor(weights[start:start + ROWS], device=dev, dtype=x.dtype)[:, None, None]
            _, grad = _gradients(encoder, x0 + a * (x - x0), f)
            total += (w * grad).sum(0, keepdim=True)
            if progress is not None:
                progress(min(start + ROWS, steps), steps)
        ends, _ = _gradients(encoder, torch.cat([x, x0]), f)
        scores = ((x - x0) * total).sum(-1)[0]
    return Attribution(tokens, scores.double().cpu().numpy(), float(ends[0]), float(ends[1]), method,
                       f.words, backend.precision, steps, baseline)
