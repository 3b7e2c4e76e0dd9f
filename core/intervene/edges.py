"""Attention-edge knock-out: query token Q may not look at key token K in layer L (one head or all).

The score q_Q . k_K gets -inf before the softmax, so row Q's weights renormalise over the keys it
may still see. Applied as an edit of the site Lk.bias (core/encoder/sites.py): a (1, H, T, T) mask added to
the one the block passes (padding, causal triangle): the fused and the explicit attention
paths both take it as it is.

People type cuts 1-based for layers and heads, tokens as a word of the sentence or a position
(0 = [CLS]): "3:[MASK]>cat" (every head of layer 3), "3.5:2>0" (head 5 of layer 3, token 2 -> [CLS]).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from core.errors import InputError


@dataclass(frozen=True)
class Cut:
    """One knocked-out edge, 0-based: layer, head (None = every head), query and key positions."""
    layer: int
    head: int | None
    query: int
    key: int

    def describe(self, tokens: list[str] | None = None) -> str:
        name = (lambda p: f"{tokens[p]}({p})") if tokens else str
        where = f"{self.layer + 1}" if self.head is None else f"{self.layer + 1}.{self.head + 1}"
        return f"{where}:{name(self.query)}>{name(self.key)}"


_CUT = re.compile(r"L?(\d+)(?:\.H?(\d+))?:(.+)>(.+)", re.IGNORECASE)


def parse_cut(text: str, tokens: list[str]) -> Cut:
    """ "3.5:[MASK]>cat" against the sentence's tokens -> Cut (0-based). A word must occur once."""
    m = _CUT.fullmatch(text.strip())
    if not m or int(m[1]) < 1 or (m[2] is not None and int(m[2]) < 1):
        raise InputError(f"cut {text!r} is not L[.H]:Q>K: layer (and head) from 1, query and key a word of "
                         "the sentence or a position (0 = [CLS]), e.g. 3:[MASK]>cat or 3.5:2>0")
    head = None if m[2] is None else int(m[2]) - 1
    return Cut(int(m[1]) - 1, head, token_position(m[3], tokens), token_position(m[4], tokens))


def token_position(word: str, tokens: list[str]) -> int:
    """A position (digits) or the one token equal to ``word`` ("##" and case ignored)."""
    text = word.strip()
    if text.isdigit():
        p = int(text)
        if p >= len(tokens):
            raise InputError(f"token position {p} is past the end: the sentence has tokens 0-{len(tokens) - 1}")
        return p
    key = text.lower().removeprefix("##")
    hits = [i for i, t in enumerate(tokens) if t.lower().removeprefix("##") == key]
    if len(hits) != 1:
        raise InputError(f"token {text!r} occurs {len(hits)} times in the sentence ({' '.join(tokens)}): "
                         "name a token that occurs once, or give its position (0 = [CLS])")
    return hits[0]


def check_cuts(cuts, n_layers: int, n_heads: int) -> None:
    for c in cuts:
        if not 0 <= c.layer < n_layers:
            raise InputError(f"layer {c.layer + 1} does not exist: this model has layers 1-{n_layers}")
        if c.head is not None and not 0 <= c.head < n_heads:
            raise InputError(f"head {c.head + 1} does not exist: this model has heads 1-{n_heads}")


def cut_mask(cuts, n_heads: int, n_tokens: int, dtype, device) -> torch.Tensor:
    """(1, H, T, T): 0, or -inf at each cut (query row, key column) of the cut heads. Refuses a
    cut that would leave a query row no key at all (its softmax would have nothing to share)."""
    mask = torch.zeros(1, n_heads, n_tokens, n_tokens, dtype=dtype, device=device)
    for c in cuts:
        if c.query >= n_tokens or c.key >= n_tokens:
            raise InputError(f"cut {c.describe()} names a token past the sentence's {n_tokens} tokens")
        heads = slice(None) if c.head is None else slice(c.head, c.head + 1)
        mask[0, heads, c.query, c.key] = float("-inf")
    if bool(torch.isinf(mask).all(-1).any()):
        raise InputError("these cuts leave a token nothing to attend to in some head: keep at least one key")
    return mask


def cut_bias(cuts, n_heads: int):
    """An edit of a layer's attention mask (the site Lk.bias: (B or 1, 1, 1 or T, T), zeros where
    nothing is masked): the cut mask added to it."""
    def edit(bias):
        extra = cut_mask(cuts, n_heads, bias.shape[-1], torch.float32, bias.device)
        return extra + bias.to(extra.dtype)
    return edit
