"""CPU inference of core/model.py's Encoder in few Python steps: the last hidden state only.

Why: for one sentence the Python around the kernels (nn.Module calls, eval-mode dropouts,
attribute look-ups) is a fixed cost per call, where onnxruntime's C++ graph runner is ahead at
batch 1. Skipping it made one sentence of 8-32 tokens 1.09-1.17x faster (0.4-0.6 ms of
3.4-6.5 ms, same process, alternating blocks, AMD Zen 5, 2 threads). This path runs the same operations, in the same order,
on the same packed weights (core.model.pack_for_cpu_inference) and gives the same numbers
(tests/test_fast_paths.py: identical to the hand-written modules, within 1e-5 in any case);
it calls the modules' own methods for what has logic of its own (Linear's kernel choice, the
fused Q/K/V and its checks, attention) and skips only the machinery around them.

The hand-written modules stay the model that the walkthrough, the inspector's hooks, the
parity tests and training read: ``usable()`` sends anything else there (training, gradients,
hooks anywhere in the encoder, another device).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from .model import Encoder, additive_mask


class PackedEncoder:
    """``PackedEncoder(encoder)(input_ids, attention_mask, token_type_ids)`` -> (B, T, D), the
    encoder's ``last_hidden_state`` for inference on a CPU, fp32 or under bf16 autocast."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self.pre_norm = encoder.config.norm == "pre"
        emb = encoder.embeddings
        self.word, self.position = emb.word_embeddings.weight, emb.position_embeddings.weight
        self.token_type = None if emb.token_type_embeddings is None else emb.token_type_embeddings.weight
        self.embed_norm = _norm_args(emb.LayerNorm)
        # Per block: (attention, lin1, lin2, the GELU lin1 fuses, first LayerNorm, second LayerNorm)
        self.blocks = [(b.attention, b.ffn.lin1, b.ffn.lin2, b.ffn.approximate,
                        _norm_args(b.sa_layer_norm), _norm_args(b.output_layer_norm))
                       for b in encoder.transformer.layer]
        self.final_norm = None if encoder.final_layer_norm is None else _norm_args(encoder.final_layer_norm)
        self.modules = list(encoder.modules())

    def usable(self, input_ids) -> bool:
        """True when this path gives what the modules would: CPU, eval, no gradients, no hooks."""
        return (input_ids.is_cpu and not self.encoder.training and not torch.is_grad_enabled()
                and not torch.nn.modules.module._global_forward_hooks
                and not torch.nn.modules.module._global_forward_pre_hooks
                and not any(m._forward_hooks or m._forward_pre_hooks for m in self.modules))

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
        B, T = input_ids.shape
        x = F.embedding(input_ids, self.word) + self.position[:T]             # (B, T, D)
        if self.token_type is not None:
            x = x + (self.token_type[0] if token_type_ids is None else F.embedding(token_type_ids, self.token_type))
        x = F.layer_norm(x, *self.embed_norm)
        padded = attention_mask is not None and not bool(attention_mask.all())
        mask = additive_mask(attention_mask, x.dtype) if padded else None
        D = x.shape[-1]
        for att, lin1, lin2, gelu, norm1, norm2 in self.blocks:
            h = F.layer_norm(x, *norm1) if self.pre_norm else x
            q, k, v = (att.split_heads(t) for t in att.project_qkv(h))      # each (B, H, T, Dh)
            context, _ = att.attend(q, k, v, mask)
            a = att.out_lin.forward(context.transpose(1, 2).reshape(B, T, D))
            if self.pre_norm:                                              # x + f(LN(x))
                x = x + a
                x = x + lin2.forward(lin1.forward(F.layer_norm(x, *norm2), gelu=gelu))
            else:                                                          # LN(x + f(x))
                x = F.layer_norm(x + a, *norm1)
                x = F.layer_norm(x + lin2.forward(lin1.forward(x, gelu=gelu)), *norm2)
        return x if self.final_norm is None else F.layer_norm(x, *self.final_norm)


def _norm_args(ln: torch.nn.LayerNorm) -> tuple:
    return (ln.normalized_shape, ln.weight, ln.bias, ln.eps)
