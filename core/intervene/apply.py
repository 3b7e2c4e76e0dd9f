"""Apply an Intervention to our encoder (core/encoder/model.py) for the duration of a ``with``.

Everything is done by forward hooks on the model's own modules, removed on exit: no weight is
touched, so the model after the block is the model before it, bit for bit. The hooks act only on
the thread that entered the block (core/encoder/scoped_hooks.py); another thread using the same
cached model meanwhile sees the model unchanged (the GUI runs an intervention in one worker while
others may embed). Inside the block this thread's forwards go through the modules the hooks sit
on (not the packed CPU fast path); other threads keep theirs.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from core.encoder.model import Encoder
from core.encoder.scoped_hooks import scoped_hooks
from core.errors import InputError, settings_fix
from core.intervene.edges import cut_hook
from core.intervene.spec import Intervention, Site, shuffled_positions


def encoder_of(model) -> Encoder:
    """The Encoder inside a backend, an EncoderForMaskedLM or an Encoder; a clear refusal for
    the transformers backend, whose modules are not ours."""
    if isinstance(model, Encoder):
        return model
    inner = getattr(model, "encoder", None)
    if isinstance(inner, Encoder):
        return inner
    raise InputError("interventions run on Encoderscope's own encoder: load the model with "
                     "the from-scratch encoder (the default)", fix=settings_fix(backend="scratch"))


@contextmanager
def intervene(model, spec: Intervention, means: torch.Tensor | None = None,
              patch_source: dict | None = None):
    """Inside the block, every forward of ``model`` on this thread runs with ``spec`` applied.

    means: (L, H, Dh) mean head outputs (means.mean_head_outputs), needed for head_mode "mean".
    patch_source: {Site: (1, T, D) activation of sentence B at that site} (patching.capture_sites),
    needed when spec.patch is not empty."""
    encoder = encoder_of(model)
    cfg = encoder.config
    spec.check(cfg.n_layers, cfg.n_heads)
    if spec.heads and spec.head_mode == "mean":
        if means is None:
            raise InputError("mean ablation needs the heads' mean outputs over a corpus: "
                             "compute them with core.intervene.means.mean_head_outputs")
        if tuple(means.shape) != (cfg.n_layers, cfg.n_heads, cfg.dim // cfg.n_heads):
            raise InputError(f"the mean head outputs have shape {tuple(means.shape)}, not this model's "
                             f"({cfg.n_layers}, {cfg.n_heads}, {cfg.dim // cfg.n_heads}): compute them for this model")
    missing = [s for s in spec.patch if patch_source is None or s not in patch_source]
    if missing:
        raise InputError(f"no activation of sentence B for {', '.join(s.describe() for s in missing)}: "
                         "run patching.capture_sites on B first")
    with scoped_hooks() as register:
        _install(encoder, spec, means, patch_source or {},
                 lambda module, fn: register(module, "pre", fn), lambda module, fn: register(module, "post", fn))
        yield encoder


def _install(encoder: Encoder, spec: Intervention, means, source: dict, pre, post) -> None:
    cfg = encoder.config
    dh = cfg.dim // cfg.n_heads
    emb = encoder.embeddings
    if spec.positions == "off":
        post(emb.position_embeddings, lambda m, a, out: torch.zeros_like(out))
    elif spec.positions == "shuffle":
        def shuffle(m, args):
            (positions,) = args
            perm = shuffled_positions(positions.shape[-1], spec.shuffle_seed)
            return (positions[..., perm],)
        pre(emb.position_embeddings, shuffle)
    factor = spec.score_factor(dh)
    for layer, block in enumerate(encoder.transformer.layer):
        att = block.attention
        cuts = [c for c in spec.cuts if c.layer == layer]
        if cuts:
            pre(att, cut_hook(cuts, cfg.n_heads))
        if factor != 1.0:
            # q_i . k_j scaled by the factor: every score of the layer, before the mask and softmax
            post(att.q_lin, lambda m, a, out, f=factor: out * f)
        heads = sorted(h for l, h in spec.heads if l == layer)
        patches = [s for s in spec.patch if s.layer == layer]
        head_patches = [s for s in patches if s.kind == "head"]
        if heads or head_patches:
            pre(att.out_lin, _heads_hook(layer, heads, spec.head_mode, means, head_patches, source, dh))
        if layer in spec.attention_off:
            post(att, lambda m, a, out: (torch.zeros_like(out[0]), out[1]))
        if layer in spec.ffn_off:
            post(block.ffn, lambda m, a, out: torch.zeros_like(out))
        for s in patches:
            if s.kind == "ffn":
                post(block.ffn, lambda m, a, out, s=s: _patched(out, source[s], s.token, None))
        if layer in spec.skip:
            post(block, lambda m, args, out: (args[0], out[1]))
        for s in patches:
            if s.kind == "resid":
                post(block, lambda m, a, out, s=s: (_patched(out[0], source[s], s.token, None), out[1]))


def _heads_hook(layer, heads, mode, means, patches: list[Site], source, dh):
    """out_lin's input is the heads' outputs side by side (B, T, H*Dh): head h owns columns
    h*Dh ... (h+1)*Dh - 1. Zero, mean or patch those columns; out_lin and everything after runs
    as usual (its bias included: the head's contribution is gone, the layer's bias is not)."""
    def hook(module, args):
        context = args[0].clone()
        for h in heads:
            cols = slice(h * dh, (h + 1) * dh)
            context[..., cols] = 0.0 if mode == "zero" else means[layer, h].to(context)
        for s in patches:
            cols = slice(s.head * dh, (s.head + 1) * dh)
            context = _patched(context, source[s], s.token, cols)
        return (context,)
    return hook


def _patched(value: torch.Tensor, from_b: torch.Tensor, token: int | None, cols: slice | None):
    """``value`` (B, T, D) with B's numbers at one token or every token (and only ``cols``)."""
    cols = slice(None) if cols is None else cols
    out = value.clone()
    if token is None:
        if from_b.shape[1] != value.shape[1]:
            raise InputError(f"sentence B has {from_b.shape[1]} tokens and A {value.shape[1]}: a site at "
                             "every token needs two sentences of the same length (or give one token, @TOKEN)")
        out[..., cols] = from_b[..., cols].to(out)
    else:
        out[:, token, cols] = from_b[:, token, cols].to(out)
    return out
