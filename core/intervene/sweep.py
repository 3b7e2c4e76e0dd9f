"""Every single-part ablation of one layer in one batched forward: what makes importance maps fast.

An importance map switches off each part of each layer alone: the layer's H heads (zeroed), its
attention branch and its FFN branch: H + 2 variants that agree on everything before that layer
and share its queries, keys, values and attention weights. So the clean run's input to every
layer is kept (one pass), and for layer l:

* Q, K, V and the attention context are computed once from the kept input;
* each variant's attention output is the projection of the context with that head's columns zeroed
  (exactly what core.intervene.apply's hook does), zero for "attention off", the clean one for
  "FFN off";
* the H + 2 variants are stacked along the batch and run through the rest of layer l and every
  later layer as one batch (bigger matrix products, one Python loop instead of H + 2).

The numbers are those of running each ablation through the hooked modules, up to float
rounding (a bigger batch may sum in another order): tests/core/intervene/test_importance.py compares
every part's metric with the one-at-a-time path and re-measures the top head by a full,
independent run. Runs the model's own modules (their packed or bf16 kernels) at the backend's
precision, like its embed().
"""
from __future__ import annotations

import torch

from core.encoder.model import Encoder
from core.intervene.spec import Intervention


def layer_variants(n_heads: int, layer: int) -> list[Intervention]:
    """The single-part ablations of `layer`, in the order layer_sweep returns them: each head
    zeroed, then the attention branch off, then the FFN branch off."""
    return ([Intervention(heads={(layer, h)}) for h in range(n_heads)]
            + [Intervention(attention_off={layer}), Intervention(ffn_off={layer})])


def layer_sweep(encoder: Encoder, layer: int, x: torch.Tensor, mask: torch.Tensor | None,
                fill: torch.Tensor | None = None) -> list[torch.Tensor]:
    """The final hidden states (B, T, D) of each of layer_variants(n_heads, layer), given the clean
    run's input to `layer` (B, T, D) and the attention mask (B, T). Call inside inference_mode and
    the backend's autocast; the encoder must carry no hooks of its own here.
    fill: (H, Dh) what an ablated head's columns hold instead of zeros (its mean: mean ablation)."""
    cfg = encoder.config
    H, (B, T, D) = cfg.n_heads, x.shape
    dh = D // H
    block = encoder.transformer.layer[layer]
    att = block.attention
    bias = encoder.bias(mask, x)
    context, _ = att.heads(block.attention_input(x), bias)          # the heads side by side
    # H copies of the context, copy h with head h's columns zeroed: projected all H at once
    per_head = context.unsqueeze(0).repeat(H, 1, 1, 1)             # (H, B, T, D)
    for h in range(H):
        per_head[h, ..., h * dh:(h + 1) * dh] = 0.0 if fill is None else fill[h].to(per_head)
    a_heads = att.project(per_head.reshape(H * B, T, D))
    a_clean = att.project(context)
    a = torch.cat([a_heads.to(a_clean.dtype), torch.zeros_like(a_clean), a_clean])   # (V*B, T, D)
    V = H + 2
    xs = x.repeat(V, 1, 1)
    y = block.add_attention(xs, a.to(xs.dtype))
    f = block.ffn_branch(y)
    f[(V - 1) * B:] = 0.0                                            # the last variant: FFN off
    y = block.add_ffn(y, f)
    stacked_bias = bias.repeat(V, *([1] * (bias.dim() - 1))) if bias is not None and bias.shape[0] == B else bias
    return list(encoder.run_from(layer + 1, y, stacked_bias).split(B))


def heads_off_forward(encoder: Encoder, x: torch.Tensor, mask: torch.Tensor | None,
                      keep: torch.Tensor) -> list[torch.Tensor]:
    """Final hidden states (B, T, D) of V variants of the model, variant v with the heads where
    keep[v] (V, L, H) is False zeroed, run as one stacked batch from the embeddings ``x`` (B, T, D,
    the clean run's input to layer 0). What cumulative head removal measures in one forward."""
    cfg = encoder.config
    V, B, D = keep.shape[0], x.shape[0], x.shape[2]
    bias = encoder.bias(mask, x)
    if bias is not None and bias.shape[0] == B:
        bias = bias.repeat(V, *([1] * (bias.dim() - 1)))
    y = x.repeat(V, 1, 1)
    dh = D // cfg.n_heads
    for layer, block in enumerate(encoder.transformer.layer):
        context, _ = block.attention.heads(block.attention_input(y), bias)      # (V*B, T, D)
        gate = keep[:, layer].to(context.dtype).repeat_interleave(B, 0).repeat_interleave(dh, -1)[:, None, :]
        y = block.finish(y, block.attention.project(context * gate).to(y.dtype))
    return list(encoder.normalise_layer(y).split(B))
