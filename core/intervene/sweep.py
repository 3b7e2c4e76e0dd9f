"""Every single-part ablation of one layer in one batched forward: what makes importance maps fast.

An importance map switches off each part of each layer alone: the layer's H heads (zeroed), its
attention branch and its FFN branch: H + 2 variants that agree on everything before that layer
and share its queries, keys, values and attention weights. So the clean run's input to every
layer is kept (one pass), and for layer l:

* Q, K, V and the attention context are computed once from the kept input;
* each variant's attention output is out_lin of the context with that head's columns zeroed
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

from core.encoder.model import Encoder, attention_bias
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
    causal = cfg.attention == "causal"
    block = encoder.transformer.layer[layer]
    att = block.attention
    bias = attention_bias(mask, T, x.dtype, x.device, causal)
    h_in = block.sa_layer_norm(x) if block.pre_norm else x
    q, k, v = (att.split_heads(t) for t in att.project_qkv(h_in))
    context, _ = att.attend(q, k, v, bias)
    context = context.transpose(1, 2).reshape(B, T, D)             # the heads side by side
    # H copies of the context, copy h with head h's columns zeroed: out_lin of all H at once
    per_head = context.unsqueeze(0).repeat(H, 1, 1, 1)             # (H, B, T, D)
    for h in range(H):
        per_head[h, ..., h * dh:(h + 1) * dh] = 0.0 if fill is None else fill[h].to(per_head)
    a_heads = att.out_lin(per_head.reshape(H * B, T, D))
    a_clean = att.out_lin(context)
    a = torch.cat([a_heads.to(a_clean.dtype), torch.zeros_like(a_clean), a_clean])   # (V*B, T, D)
    V = H + 2
    xs = x.repeat(V, 1, 1)
    ffn_off = slice((V - 1) * B, V * B)                              # the last variant's rows
    if block.pre_norm:
        y = xs + a.to(xs.dtype)
        f = block.ffn(block.output_layer_norm(y))
        f[ffn_off] = 0.0
        y = y + f
    else:
        y = block.sa_layer_norm(xs + a.to(xs.dtype))
        f = block.ffn(y)
        f[ffn_off] = 0.0
        y = block.output_layer_norm(y + f)
    if layer + 1 < cfg.n_layers:
        stacked_bias = bias.repeat(V, *([1] * (bias.dim() - 1))) if bias is not None and bias.shape[0] == B else bias
        for later in encoder.transformer.layer[layer + 1:]:
            y, _ = later(y, stacked_bias)
    if encoder.final_layer_norm is not None:
        y = encoder.final_layer_norm(y)
    return list(y.split(B))


def heads_off_forward(encoder: Encoder, x: torch.Tensor, mask: torch.Tensor | None,
                      keep: torch.Tensor) -> list[torch.Tensor]:
    """Final hidden states (B, T, D) of V variants of the model, variant v with the heads where
    keep[v] (V, L, H) is False zeroed, run as one stacked batch from the embeddings ``x`` (B, T, D,
    the clean run's input to layer 0). What cumulative head removal measures in one forward."""
    cfg = encoder.config
    V, (B, T, D) = keep.shape[0], x.shape
    bias = attention_bias(mask, T, x.dtype, x.device, cfg.attention == "causal")
    if bias is not None and bias.shape[0] == B:
        bias = bias.repeat(V, *([1] * (bias.dim() - 1)))
    y = x.repeat(V, 1, 1)
    for layer, block in enumerate(encoder.transformer.layer):
        att = block.attention
        h_in = block.sa_layer_norm(y) if block.pre_norm else y
        q, k, v = (att.split_heads(t) for t in att.project_qkv(h_in))
        context, _ = att.attend(q, k, v, bias)                       # (V*B, H, T, Dh)
        gate = keep[:, layer].to(context.dtype).repeat_interleave(B, 0)[:, :, None, None]
        context = (context * gate).transpose(1, 2).reshape(V * B, T, D)
        a = att.out_lin(context).to(y.dtype)
        if block.pre_norm:
            y = y + a
            y = y + block.ffn(block.output_layer_norm(y))
        else:
            y = block.sa_layer_norm(y + a)
            y = block.output_layer_norm(y + block.ffn(y))
    if encoder.final_layer_norm is not None:
        y = encoder.final_layer_norm(y)
    return list(y.split(B))
