"""Backend.embed's host work per batch, not per text: the torch operations one call dispatches grow
with its number of batches, not of sentences (a GPU waits on the host for each of them: a profile
on an H200 found ~7 per sentence, from building each batch row by row, capping embed at ~47k
sentences/s). Counted with a dispatch mode on a tiny model on the CPU; the same code runs on a GPU."""
from __future__ import annotations

import pytest
from torch.utils._python_dispatch import TorchDispatchMode

from core.encoder.backends import get_backend

TINY = "random:dim=32,layers=1,heads=2,ffn=64"
WORDS = "the cat sat on a warm mat while rain fell outside".split()


class CountOps(TorchDispatchMode):
    """Counts the aten operations dispatched while it is active."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


def texts(n: int) -> list[str]:
    """n texts of 1 to 11 words: every batch of a sorted plan holds several lengths (padding)."""
    return [" ".join(WORDS[: 1 + i % len(WORDS)]) for i in range(n)]


def ops_of_embed(backend, n: int, batches: int, **options) -> int:
    batch = texts(n)
    backend.embed(batch, batch_size=n // batches, max_tokens=None, **options)      # warm
    with CountOps() as ops:
        backend.embed(batch, batch_size=n // batches, max_tokens=None, **options)
    return ops.count


@pytest.fixture(scope="module")
def tiny():
    return get_backend(TINY, "scratch", device="cpu", precision="fp32")


@pytest.mark.parametrize("options", [{}, {"shape_buckets": True}], ids=["as on a CPU", "buckets as on a GPU"])
def test_torch_ops_per_embed_grow_with_batches_not_sentences(tiny, options):
    small = ops_of_embed(tiny, 512, 2, **options)
    large = ops_of_embed(tiny, 2048, 2, **options)
    assert abs(large - small) <= 8, (small, large)     # 1,536 more sentences, the same 2 batches
    more_batches = ops_of_embed(tiny, 512, 4, **options)
    assert more_batches > small                         # the counter does see the per-batch work
    assert small < 400, small                           # a fixed cost per batch, not per text
