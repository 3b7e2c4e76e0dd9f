"""Sentence vectors from token vectors: CLS, mean (padding-aware), max; L2 normalisation."""
from __future__ import annotations

import torch

from core.names import POOLINGS


def pool(hidden: torch.Tensor, attention_mask: torch.Tensor, method: str = "mean",
         special_tokens_mask: torch.Tensor | None = None) -> torch.Tensor:
    """hidden (B, T, D), attention_mask (B, T) of 1/0 -> (B, D).

    special_tokens_mask (B, T) of 1 at [CLS]/[SEP]: when given, mean and max skip those too.
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
    raise ValueError(f"pooling must be one of {POOLINGS}, not {method!r}")


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp(min=eps)
