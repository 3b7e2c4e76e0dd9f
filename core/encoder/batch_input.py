"""One batch of token ids as the model's input: (B, T) ids and attention mask, built in NumPy with
a fixed number of torch operations per batch, whatever its number of texts, and sent to the
device in one copy.

Why: a Python loop with a ``torch.tensor`` and two slice assignments per text cost ~7 torch
operations per sentence on the host (8,192 sentences: 16k lift_fresh, 16k copy_, 16k select, 13k
slice, 8k fill_ in a profile on an H200), which capped embed at ~47k sentences/s while the GPU
needed time for ~130k. On a GPU the ids and the mask are written into one pinned buffer and
copied without waiting (non_blocking), so the host goes on planning the next batch.

Shape buckets (GPU): every new (rows, length) shape makes cuDNN's attention build a new execution
plan (a cold first pass ran at 2.7k sentences/s against 12.6k warm), and a length-sorted corpus
pads every batch to a length of its own. Rounding the length up to a multiple of LENGTH_STEP and
the rows of a short batch up to a power of two bounds the shapes to a few per length step. The
extra keys are padding (attention weight exactly 0: their additive mask is the most negative
float, whose exp is 0) and the extra rows are thrown away before pooling, so the vectors stay the
same (tests/core/encoder/test_batch_input.py).
"""
from __future__ import annotations

from itertools import chain

import numpy as np
import torch

# Padded lengths on a GPU are multiples of this: <= 7 keys more per row, and at most
# max_length / 8 lengths (64 for a 512-token model) instead of one per batch. Not yet measured on a card.
LENGTH_STEP = 8


def bucket_length(longest: int, step: int, cap: int) -> int:
    """`longest` rounded up to a multiple of `step`, but never past `cap` (the model's maximum
    length: its position table ends there) nor below `longest`."""
    return max(longest, min(-(-longest // step) * step, cap))


def bucket_rows(rows: int, cap: int) -> int:
    """`rows` rounded up to a power of two, but never past `cap` (a full batch's rows, so the
    token budget holds) nor below `rows`."""
    return max(rows, min(1 << (rows - 1).bit_length(), cap))


def input_tensors(ids: list[list[int]], pad_id: int, device: torch.device, length: int = 0,
                  rows: int = 0) -> tuple[torch.Tensor, torch.Tensor, bool]:
    """(input_ids (B, T) long, attention mask (B, T) long of 1/0, padded) for the token ids of
    len(ids) texts, on `device`: T = max(longest text, length), B = max(len(ids), rows).

    Rows past the texts are fillers (one pad token, attended to, so no row is all masked): their
    outputs are to be dropped. ``padded`` says whether any key is padding (known here, on the
    host: a device need not be asked)."""
    n = len(ids)
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=n)
    longest = int(lengths.max())
    T, B = max(longest, length), max(n, rows)
    pinned = device.type == "cuda"       # page-locked: copied by the GPU's DMA without the host waiting
    buf = torch.empty((2, B, T), dtype=torch.long, pin_memory=pinned)
    ids_np, mask_np = buf.numpy()
    keep = np.arange(T) < lengths[:, None]                              # (n, T): the real tokens
    ids_np.fill(pad_id)
    ids_np[:n][keep] = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
    mask_np[:n] = keep
    mask_np[n:] = 0
    mask_np[n:, 0] = 1
    if device.type != "cpu":
        buf = buf.to(device, non_blocking=pinned)
    return buf[0], buf[1], B > n or T > int(lengths.min())
