"""Batched "replace one activation, run the rest": the engine under patching sweeps and causal tracing.

A sweep asks the same question at many sites of one kind: with the numbers at site s taken from
another run, what does the model output? Every site of one layer shares everything before that
layer, so each layer's variants are stacked along the batch and run once through the rest of the
network (one forward of the later layers per layer, not one per cell), as core/intervene/sweep.py
does for importance maps. The block is run through its seams (core/encoder/model.py:
``attention.heads``, ``attention.project``, ``block.finish``), exactly as TransformerBlock.forward
runs them (eval: dropout is the identity).

Hidden index i: 0 = the embeddings' output, i = the output of block i (1-based), as in
EncoderOutput.hidden_states. One sentence per run (no padding); call inside inference_mode and
the backend's autocast, on an encoder that carries no hooks.
"""
from __future__ import annotations

import torch

from core.encoder.model import Encoder


def bias_for(encoder: Encoder, x: torch.Tensor) -> torch.Tensor | None:
    """The additive attention mask of unpadded rows: None, or the causal triangle."""
    return encoder.bias(torch.ones(x.shape[:2], dtype=torch.long, device=x.device), x)


def run_from(encoder: Encoder, index: int, x: torch.Tensor) -> torch.Tensor:
    """The final hidden states (N, T, D) given hidden state ``index`` (N, T, D): blocks index+1.. on."""
    return encoder.run_from(index, x, bias_for(encoder, x))


def heads_context(block, x: torch.Tensor, bias) -> torch.Tensor:
    """The heads' outputs side by side (N, T, D) (the site Lk.heads): head h owns columns
    h*Dh ... (h+1)*Dh - 1."""
    context, _ = block.attention.heads(block.attention_input(x), bias)
    return context


def finish_block(block, x: torch.Tensor, context: torch.Tensor,
                 ffn_out: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The block's output given its input x and the heads' context, and the FFN's output
    (before its residual add). ffn_out: use this FFN output instead (FFN patching)."""
    y = block.add_attention(x, block.attention.project(context).to(x.dtype))
    f = block.ffn_branch(y) if ffn_out is None else ffn_out.to(y.dtype)
    return block.add_ffn(y, f), f


def clean_run(encoder: Encoder, ids: torch.Tensor, word_noise: torch.Tensor | None = None) -> list[torch.Tensor]:
    """Every hidden state (1, T, D) of one sentence, index 0 .. L; the final LayerNorm of a
    pre-norm model is applied by run_from, not here. word_noise (1, T, D): added to the word
    embeddings before positions and the LayerNorm (causal tracing's corruption)."""
    emb = encoder.embeddings
    if word_noise is None:
        x = emb(ids)
    else:
        words = emb.words(ids)
        x = emb.from_words(words + word_noise.to(words.dtype))
    bias = bias_for(encoder, x)
    hidden = [x]
    for block in encoder.transformer.layer:
        x, _ = block(x, bias)
        hidden.append(x)
    return hidden


def resid_variants(base: torch.Tensor, source: torch.Tensor, tokens: list[int]) -> torch.Tensor:
    """len(tokens) copies of ``base`` (1, T, D), copy j with token tokens[j] taken from ``source``."""
    out = base.repeat(len(tokens), 1, 1)
    for j, t in enumerate(tokens):
        out[j, t] = source[0, t].to(out.dtype)
    return out


def head_variants(context: torch.Tensor, source: torch.Tensor, n_heads: int) -> torch.Tensor:
    """n_heads copies of the context (1, T, D), copy h with head h's columns (every token) from ``source``."""
    dh = context.shape[-1] // n_heads
    out = context.repeat(n_heads, 1, 1)
    for h in range(n_heads):
        out[h, :, h * dh:(h + 1) * dh] = source[0, :, h * dh:(h + 1) * dh].to(out.dtype)
    return out
