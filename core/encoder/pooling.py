"""Sentence vectors from token vectors: CLS, mean (padding-aware), max, attention (a learned
query's softmax weights over the real tokens); L2 normalisation."""
from __future__ import annotations

import math

import torch

from core.names import POOLINGS


class NoPoolingQuery(ValueError):
    """Attention pooling asked of a model that has no learned query vector."""


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, method: str = "mean",
         special_tokens_mask: torch.Tensor | None = None, query: torch.Tensor | None = None) -> torch.Tensor:
    """hidden (B, T, D), attention_mask (B, T) of 1/0 -> (B, D).

    special_tokens_mask (B, T) of 1 at [CLS]/[SEP]: when given, mean, max and attention skip those too.
    query (D): attention pooling's learned vector (the model's ``pooling_query``).
    """
    if method == "cls":
        return hidden[:, 0]
    keep = attention_mask.bool()
    if special_tokens_mask is not None:
        keep = keep & ~special_tokens_mask.bool()
        # A text of nothing but specials would pool over nothing: fall back to its tokens.
        empty = ~keep.any(dim=1)
        keep[empty] = attention_mask.bool()[empty]
    keep = keep.unsqueeze(-1)                                   # (B, T, 1)
    if method == "mean":
        summed = (hidden * keep).sum(dim=1)                     # (B, D)
        return summed / keep.sum(dim=1).clamp(min=1)
    if method == "max":
        return hidden.masked_fill(~keep, torch.finfo(hidden.dtype).min).max(dim=1).values
    if method == "attention":
        weights = attention_pool_weights(hidden, keep.squeeze(-1), query)   # (B, T)
        return (weights.unsqueeze(-1) * hidden).sum(dim=1)
    raise ValueError(f"pooling must be one of {POOLINGS}, not {method!r}")


def attention_pool_weights(hidden: torch.Tensor, keep: torch.Tensor, query: torch.Tensor | None) -> torch.Tensor:
    """softmax over the kept tokens of q · h_t / √D: (B, T) weights, 0 at the others."""
    if query is None:
        raise NoPoolingQuery("attention pooling needs the model's learned query vector, and this model has none")
    scores = hidden @ query.to(hidden.dtype) / math.sqrt(hidden.shape[-1])         # (B, T)
    return scores.masked_fill(~keep, float("-inf")).softmax(dim=-1)


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp(min=eps)
