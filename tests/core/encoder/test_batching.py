"""Batch planning (core/encoder/batching.py): every text once, shortest first, within both caps, and as
few batches as the caps allow; and embed() follows the plan without changing a vector."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.encoder.backends import get_backend
from core.encoder.batching import plan_batches, row_cap, token_budget


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(1, 600), max_size=200), st.integers(1, 70),
       st.one_of(st.none(), st.integers(1, 5000)))
def test_a_plan_covers_every_text_once_within_both_caps_and_greedily(lengths, max_rows, max_tokens):
    plan = plan_batches(lengths, max_rows, max_tokens)
    flat = [i for b in plan for i in b]
    assert sorted(flat) == list(range(len(lengths)))
    assert [lengths[i] for i in flat] == sorted(lengths)           # shortest first, across batches
    for b, nxt in zip(plan, plan[1:] + [None]):
        rows, longest = len(b), max(lengths[i] for i in b)
        assert rows <= max_rows
        if max_tokens is not None and rows > 1:
            assert rows * longest <= max_tokens
        if nxt is not None:     # greedy: the next text could not have joined this batch
            assert rows == max_rows or (max_tokens is not None
                                        and (rows + 1) * lengths[nxt[0]] > max_tokens)


def test_the_token_budget_scales_with_width_and_is_per_device():
    assert token_budget(384, "cpu") == 1536 and token_budget(768, "cpu") == 768
    assert token_budget(10**9, "cpu") == 1          # never zero: a batch always holds a text
    # a GPU gets tens of thousands of padded tokens, and far more rows than a CPU
    assert token_budget(384, "cuda") == 32768 and token_budget(768, "cuda") == 16384
    assert row_cap("cpu") == 64 and row_cap("cuda") >= 1024


def test_plan_batches_refuses_zero_rows():
    with pytest.raises(ValueError, match="max_rows"):
        plan_batches([3, 4], 0)


def test_embed_runs_the_planned_batches_and_the_cap_changes_no_vector(monkeypatch):
    be = get_backend("minilm", "scratch", precision="fp32", device="cpu")
    words = "the cat sat on a mat near the old river bank while it rained all day long".split()
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 60)))) for _ in range(50)]
    uncapped = be.embed(texts, batch_size=16, max_tokens=None)
    shapes = []
    forward = be._forward

    def spy(input_ids, mask, *a, **k):
        shapes.append(tuple(input_ids.shape))
        return forward(input_ids, mask, *a, **k)
    monkeypatch.setattr(be, "_forward", spy)
    capped = be.embed(texts, batch_size=16, max_tokens=200)
    lengths = [len(x) for x in be.encode_ids(texts)[0]]
    assert shapes == [(len(b), max(lengths[i] for i in b)) for b in plan_batches(lengths, 16, 200)]
    assert all(r * t <= 200 or r == 1 for r, t in shapes) and len(shapes) > len(texts) / 16 + 1
    np.testing.assert_allclose(capped, uncapped, atol=1e-5)
    shapes.clear()
    be.embed(texts, batch_size=16)                   # "auto" on a CPU: 1536 tokens for 384 wide
    assert max(r * t for r, t in shapes) <= 1536 and max(r for r, _ in shapes) == 16
    shapes.clear()
    be.embed(texts)                                  # no batch size: the CPU's row cap
    assert max(r for r, _ in shapes) <= 64 and max(r * t for r, t in shapes) <= 1536


def test_tokenising_ahead_in_chunks_gives_the_same_vectors_in_input_order(monkeypatch):
    import threading

    from core.encoder.backends import EmbedStats
    from core.errors import InputError
    be = get_backend("minilm", "scratch", precision="fp32", device="cpu")
    words = "the cat sat on a mat near the old river bank while it rained all day long".split()
    rng = np.random.default_rng(2)
    texts = [" ".join(rng.choice(words, int(rng.integers(1, 40)))) for _ in range(50)]
    texts[20] = " ".join(["river"] * 600)             # cut to the model's maximum length
    whole = be.embed(texts)
    names = []
    encode = be.model_tokenizer.encode
    monkeypatch.setattr(be.model_tokenizer, "encode",
                        lambda t: names.append(threading.current_thread().name) or encode(t))
    stats, seen = EmbedStats(), []
    chunked = be.embed(texts, tokenize_ahead=7, stats=stats, progress=lambda done, n: seen.append(done))
    np.testing.assert_allclose(chunked, whole, atol=1e-5)
    assert len(names) == 8 and all(n.startswith("encoderscope-tokenize") for n in names)
    assert stats.truncated_indices == [20] and seen == sorted(seen) and seen[-1] == 50
    with pytest.raises(InputError, match="text 12 is empty"):
        be.embed(texts[:11] + [" "] + texts, tokenize_ahead=7)
