"""The Causal tab's worker side (no Qt): each function runs in app/gui/workers.py's pool on the
followed model and returns core's plain results, the same the CLI prints.

    sweep_fn(backend, a, b, kind, target)             -> core.intervene.patch_sweep.SweepResult
    attribute_fn(backend, text, method, other, word, steps, baseline) -> core.intervene.attribute.Attribution
    trace_fn(backend, text, words, noise, samples, seed, target) -> core.intervene.trace.TraceResult
    cuts_fn(backend, text, cuts, target)              -> CutEffects
"""
from __future__ import annotations

from dataclasses import dataclass

from app.gui.panels.model_calls import asked, ours, said
from core.errors import InputError


def _word(target: str) -> str | None:
    return target.strip() or None


def sweep_fn(backend, a: str, b: str, kind: str, target: str = "", progress=None, cancel=None):
    from core.intervene.patch_sweep import patch_sweep
    ours(backend)
    if not a.strip() or not b.strip():
        raise InputError("a patching sweep needs sentence A and sentence B (the same length, a word changed)")
    mask = backend.tokenizer.mask_token
    word = _word(target) if mask and mask.lower() in a.lower() else None
    return patch_sweep(backend, a, b, kind, target=word, progress=said(progress, f"Sweep ({kind})"),
                       cancel=asked(cancel))


def attribute_fn(backend, text: str, method: str, other: str | None, word: str | None, steps: int,
                 baseline: str = "pad", progress=None, cancel=None):
    from core.intervene.attribute import attribute
    ours(backend)
    if not text.strip():
        raise InputError("type a sentence whose tokens are scored")
    return attribute(backend, text, method, other=other, word=word, steps=steps, baseline=baseline,
                     progress=said(progress, "Integrated gradients"), cancel=asked(cancel))


def trace_fn(backend, text: str, words: str, noise: float, samples: int, seed: int, target: str = "",
             resample: str | None = None, progress=None, cancel=None):
    from core.intervene.trace import causal_trace
    ours(backend)
    chosen = [w for w in words.replace(",", " ").split() if w]
    mask = backend.tokenizer.mask_token
    word = _word(target) if mask and mask.lower() in text.lower() else None
    return causal_trace(backend, text, chosen, noise=noise, samples=samples, seed=seed, target=word,
                        progress=said(progress, "Causal trace"), cancel=asked(cancel), resample=resample)


def p_note(backend, text: str, target: str) -> str:
    """Why p(word) at a [MASK] is not read for ``text`` ('' when it is, or nothing asked for it)."""
    mask = getattr(backend.tokenizer, "mask_token", None) or "[MASK]"
    has_mask = mask.lower() in text.lower()
    if has_mask and not getattr(backend, "has_mlm", False):
        return (f"A has {mask}, but this model has no masked-LM head: p at the mask cannot be read, so only the "
                "sentence vector's side is shown")
    if not has_mask and target.strip():
        return (f"“p of {target.strip()}” is read at a {mask} in A, and A has none: only the sentence vector's "
                "side is shown")
    return ""


@dataclass
class CutEffects:
    spec: object            # core.intervene.spec.Intervention with the cuts
    tokens: list
    cosine: float           # the sentence vector with the cuts vs without
    attention: object       # core.intervene.effects.AttentionEffect
    fill: object = None     # core.intervene.effects.FillMaskEffect, with [MASK] and a head
    text: str = ""          # the sentence the cuts' positions belong to


def cuts_fn(backend, text: str, cuts: list[str], target: str = "", progress=None, cancel=None) -> CutEffects:
    """What knocking out these attention edges does to the sentence (as `ablate TEXT --cut ...`)."""
    from core.intervene import effects as E
    from core.intervene.edges import parse_cut
    from core.intervene.spec import Intervention
    ours(backend)
    if not text.strip():
        raise InputError("type a sentence whose attention edges are cut")
    if not cuts:
        raise InputError("no edge to cut: click a cell of the Attention tab's heatmap, or type L[.H]:Q>K "
                         "(e.g. 3:[MASK]>cat)")
    ids = backend.encode_ids([text])[0][0]
    tokens = backend.tokenizer.convert_ids_to_tokens(ids)
    spec = Intervention(cuts=frozenset(parse_cut(c, tokens) for c in cuts))
    spec.check(backend.n_layers, backend.n_heads)
    vector = E.compare_vector(backend, text, spec)
    attention = E.compare_attentions(backend, text, spec)
    fill = None
    mask = backend.tokenizer.mask_token
    if mask and mask.lower() in text.lower() and backend.has_mlm:
        fill = E.compare_fill_mask(backend, text, spec, 3, _word(target))
    return CutEffects(spec, tokens, vector.cosine, attention, fill, text)


@dataclass
class HeadGradients:
    gradient: object        # (L, H) Michel's I_h
    map: object             # core.intervene.importance.ImportanceMap (the measured drop)
    spearman: float         # of I_h with the drop, over every head
    spearman_abs: float     # ... with |drop| (I_h has no sign)
    loss: str


def head_gradient_fn(backend, metric: str, seed: int, cache_dir=None, progress=None, cancel=None) -> HeadGradients:
    """Michel's I_h and the measured importance map for ``metric`` (as `importance --gradient`)."""
    import numpy as np

    from core.intervene.head_gradient import LOSSES, agreement, head_gradient_importance
    from core.intervene.importance import importance_map
    ours(backend)
    m = importance_map(backend, metric, seed=seed, cache_dir=cache_dir,
                       progress=said(progress, f"Measured drop ({metric})"), cancel=asked(cancel))
    grads = head_gradient_importance(backend, metric, seed=seed, progress=said(progress, "Gradients"),
                                     cancel=asked(cancel))
    return HeadGradients(grads, m, agreement(grads, m.heads), agreement(grads, np.abs(m.heads)), LOSSES[metric])
