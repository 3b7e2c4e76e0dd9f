"""Which texts run through the encoder together.

Texts are sorted by token length so a batch pads little (padding is wasted compute), then cut
into batches of at most ``max_rows`` rows and at most ``max_tokens`` padded tokens (rows x the
batch's longest text), both set per device (``row_cap``, ``token_budget``). On a CPU the token cap
matters for long texts: 64 rows of 60 tokens make activations (a few MB per layer) that fall out
of a 2-core CPU's cache, so the matrix products run slower per token than on smaller batches;
short texts still run 64 to a batch. On a GPU the budget is far larger (tens of thousands of tokens).
"""
from __future__ import annotations

# Measured on a 2-core Zen 5 (docs/benchmarks.md, encoder throughput): capping batches at ~1,536 padded
# tokens for minilm (384 wide) and ~768 for a 768-wide model was the best of 512..4096 (+6-8 %
# in bf16, +2-3 % in fp32), and the optimum scales with 1 / width, i.e. a constant
# activation size: tokens x width. The curve is flat within a factor of two either way.
PADDED_TOKENS_X_WIDTH = 1536 * 384


# On a GPU the batch is sized by padded tokens too, but far larger: a GPU's throughput grows with
# the work per kernel launch until its cores are busy, and the host pays a fixed cost per batch.
# 32,768 padded tokens for minilm (384 wide), scaled like the CPU's by 1 / width: tens of
# thousands of tokens, a few hundred MB of activations. Not yet measured on a card
# (docs/benchmarks.md lists it as open); the CPU figures above are.
GPU_PADDED_TOKENS_X_WIDTH = 32768 * 384
# Rows per batch when the caller does not say: on a CPU the token cap decides for all but the
# shortest texts (64 rows measured best of 32..256 there, docs/benchmarks.md); on a GPU rows are
# cheap and only the token budget bounds a batch.
CPU_ROWS = 64
GPU_ROWS = 4096


def token_budget(width: int, device_type: str) -> int:
    """The padded-token cap for a model `width` wide on a device of this type ("cpu", "cuda",
    "mps"): sized for a CPU's cache, or for a GPU's cores."""
    per_width = PADDED_TOKENS_X_WIDTH if device_type == "cpu" else GPU_PADDED_TOKENS_X_WIDTH
    return max(1, per_width // width)


def row_cap(device_type: str) -> int:
    """The most rows a batch holds on this device type when the caller sets no limit."""
    return CPU_ROWS if device_type == "cpu" else GPU_ROWS


def plan_batches(lengths: list[int], max_rows: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices into `lengths`, shortest first, grouped into batches of at most `max_rows` rows
    whose rows x longest length stays within `max_tokens` (a text longer than the cap runs alone).
    Every index appears exactly once; ties keep input order, so the plan is deterministic."""
    if max_rows < 1:
        raise ValueError(f"max_rows must be at least 1, not {max_rows}")
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        end = start + 1
        # Sorted ascending, so order[end] is the longest if it joins: rows x its length.
        while (end < len(order) and end - start < max_rows
               and (max_tokens is None or (end + 1 - start) * lengths[order[end]] <= max_tokens)):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches
