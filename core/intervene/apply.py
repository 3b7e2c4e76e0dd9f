"""Apply an Intervention to our encoder (core/encoder/model.py) for the duration of a ``with``.

Everything is done by edits of the encoder's sites (core/encoder/sites.py: forward hooks on the
model's own modules), removed on exit: no weight is
touched, so the model after the block is the model before it, bit for bit. The hooks act only on
the thread that entered the block (core/encoder/scoped_hooks.py); another thread using the same
cached model meanwhile sees the model unchanged (the GUI runs an intervention in one worker while
others may embed). Inside the block this thread's forwards go through the modules the hooks sit
on (not the packed CPU fast path); other threads keep theirs.
"""
from __future__ import annotations

from contextlib import contextmanager

import torch

from core.encoder import sites
from core.encoder.model import Encoder
from core.errors import InputError, settings_fix
from core.intervene.edges import cut_bias
from core.intervene.spec import Intervention, shuffled_positions


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
    with sites.hooks(encoder) as at:
        _install(at, spec, means, patch_source or {})
        yield encoder


def _install(at: sites.Hooks, spec: Intervention, means, source: dict) -> None:
    """Every part of ``spec`` as edits of the encoder's sites (core/encoder/sites.py), in a fixed
    order: positions, then per layer the attention mask (cuts), the queries (score scaling), the
    heads (ablation, then patches), the attention and FFN branches, the block's output."""
    cfg = at.encoder.config
    dh = cfg.dim // cfg.n_heads
    if spec.positions == "off":
        at.edit("positions", torch.zeros_like)
    elif spec.positions == "shuffle":
        # the tokens read the position vectors of a permutation of their positions
        at.edit("positions", lambda v: v[:, shuffled_positions(v.shape[1], spec.shuffle_seed)])
    factor = spec.score_factor(dh)
    for layer in range(cfg.n_layers):
        def at_layer(kind, head=None, layer=layer):
            return sites.site_name(kind, layer, head)
        cuts = [c for c in spec.cuts if c.layer == layer]
        if cuts:
            at.edit(at_layer("bias"), cut_bias(cuts, cfg.n_heads))
        if factor != 1.0:
            # q_i . k_j scaled by the factor: every score of the layer, before the mask and softmax
            at.edit(at_layer("q"), lambda q, f=factor: q * f)
        for head in sorted(h for l, h in spec.heads if l == layer):
            if spec.head_mode == "zero":
                at.edit(at_layer("head", head), torch.zeros_like)
            else:
                at.edit(at_layer("head", head), lambda v, m=means[layer, head]: m.to(v).expand_as(v).clone())
        patches = [s for s in spec.patch if s.layer == layer]
        for s in patches:
            if s.kind == "head":      # B's numbers: the heads side by side; this head's columns
                cols = slice(s.head * dh, (s.head + 1) * dh)
                at.replace(at_layer("head", s.head), source[s][..., cols], s.token)
        if layer in spec.attention_off:
            at.edit(at_layer("attn"), torch.zeros_like)
        if layer in spec.ffn_off:
            at.edit(at_layer("ffn"), torch.zeros_like)
        for s in patches:
            if s.kind == "ffn":
                at.replace(at_layer("ffn"), source[s], s.token)
        if layer in spec.skip:        # the block's output is its input
            entering: list = [None]
            at.read(at_layer("resid_pre"), lambda x, slot=entering: slot.__setitem__(0, x))
            at.edit(at_layer("resid"), lambda y, slot=entering: slot[0])
        for s in patches:
            if s.kind == "resid":
                at.replace(at_layer("resid"), source[s], s.token)
