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


def test_embedding_texts_tokenised_ahead_gives_the_same_vectors_and_cuts():
    """Backend.tokenize then embed(tokens=...) (what the ingest pipeline runs on two threads) is
    embed(texts) exactly: the same vectors, the same truncated texts, and nothing tokenised twice."""
    from core.encoder.backends import EmbedStats
    b = get_backend(TINY, "scratch", device="cpu", precision="fp32")
    batch = texts(40) + [" ".join(WORDS * 80)]          # the last one is cut to max_length
    whole, whole_stats = b.embed(batch, stats=(s := EmbedStats())), s
    tokens = b.tokenize(batch)
    assert tokens.cut == [len(batch) - 1]
    calls = []
    real = b.model_tokenizer.encode
    b.model_tokenizer.encode = lambda t: calls.append(t) or real(t)
    try:
        ahead = b.embed(batch, stats=(s2 := EmbedStats()), tokens=tokens)
    finally:
        del b.model_tokenizer.encode
    assert calls == []
    assert (ahead == whole).all()
    assert s2.truncated_indices == whole_stats.truncated_indices == [len(batch) - 1]
    with pytest.raises(Exception, match="tokenised"):
        b.embed(batch[:3], tokens=tokens)
