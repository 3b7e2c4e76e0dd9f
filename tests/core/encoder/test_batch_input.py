"""core/encoder/batch_input.py: a batch's ids and mask against a row-by-row reference, the shape
buckets' rounding, and vectors that do not change when embed pads batches to the buckets (forced
on here, on the CPU; "auto" turns them on off the CPU)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.backends.base import full_rows
from core.encoder.batch_input import LENGTH_STEP, bucket_length, bucket_rows, input_tensors
from core.encoder.model import needs_mask
from tests.support.tiny_models import make_tiny_bert

CPU = torch.device("cpu")
# 1 to 40 words: batches of many lengths, and of fewer rows than a full batch
TEXTS = [" ".join(["word"] * (1 + (i * 7) % 40)) + f" number {i}." for i in range(75)]


def reference(ids, pad_id, length=0, rows=0):
    """Row by row, in plain Python: the texts' ids then pad_id; 1 over the texts' tokens; filler
    rows of one attended pad token."""
    T, B = max([len(x) for x in ids] + [length]), max(len(ids), rows)
    out = [list(x) + [pad_id] * (T - len(x)) for x in ids] + [[pad_id] * T for _ in range(B - len(ids))]
    mask = [[1] * len(x) + [0] * (T - len(x)) for x in ids] + [[1] + [0] * (T - 1) for _ in range(B - len(ids))]
    return out, mask


@pytest.mark.parametrize("ids,length,rows", [
    ([[101, 7, 102]], 0, 0),                                   # one text: nothing padded
    ([[101, 7, 8, 9, 102], [101, 102], [101, 5, 102]], 0, 0),
    ([[101, 7, 8, 9, 102], [101, 102], [101, 5, 102]], 8, 4),  # bucketed: longer, one filler row
    ([[101, 4, 102], [101, 5, 102]], 0, 0),                    # all one length
])
def test_input_tensors_equal_a_row_by_row_reference(ids, length, rows):
    input_ids, mask, padded = input_tensors(ids, 0, CPU, length, rows)
    want_ids, want_mask = reference(ids, 0, length, rows)
    assert input_ids.dtype == mask.dtype == torch.long
    assert input_ids.tolist() == want_ids and mask.tolist() == want_mask
    assert padded == (not all(all(r) for r in want_mask))


def test_a_pad_id_other_than_zero_fills_the_padding():
    input_ids, mask, _ = input_tensors([[5, 6], [5]], 3, CPU, 4, 3)
    assert input_ids.tolist() == [[5, 6, 3, 3], [5, 3, 3, 3], [3, 3, 3, 3]]
    assert mask.tolist() == [[1, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]


def test_bucket_length_is_a_step_multiple_within_the_cap():
    cap = 130
    for longest in range(1, 140):
        got = bucket_length(longest, LENGTH_STEP, cap)
        assert got >= longest and got - longest < LENGTH_STEP
        assert got == longest if longest >= cap else (got % LENGTH_STEP == 0 or got == cap) and got <= cap


@pytest.mark.parametrize("rows,cap,want", [(1, 64, 1), (3, 64, 4), (5, 64, 8), (33, 64, 64), (64, 64, 64),
                                           (40, 48, 48), (100, 64, 100)])
def test_bucket_rows_is_a_power_of_two_within_the_cap(rows, cap, want):
    assert bucket_rows(rows, cap) == want


def test_full_rows_keep_the_token_budget():
    assert full_rows(16, 64, None) == 64
    assert full_rows(16, 4096, 32768) == 2048
    assert full_rows(48, 4096, 32768) == 682 and 682 * 48 <= 32768
    assert full_rows(600, 64, 512) == 1        # a text longer than the budget runs alone


def shapes_of(backend, texts, **options):
    """embed's vectors, and the (rows, length) of every batch its model ran."""
    seen, forward = [], backend._forward

    def spy(input_ids, mask, types, **kw):
        seen.append(tuple(input_ids.shape))
        return forward(input_ids, mask, types, **kw)
    backend._forward = spy
    try:
        return backend.embed(texts, **options), seen
    finally:
        del backend._forward


TINY_CAUSAL = "random:dim=32,layers=2,heads=2,ffn=64,attention=causal"


@pytest.mark.parametrize("name,kind,pooling", [
    pytest.param("minilm", "scratch", "mean", marks=pytest.mark.slow),
    pytest.param("minilm", "hf", "mean", marks=pytest.mark.slow),
    ("tiny bert", "hf", "mean"), (TINY_CAUSAL, "scratch", "mean"), (TINY_CAUSAL, "scratch", "cls"),
    (TINY_CAUSAL, "scratch", "max")])
def test_bucketed_batches_give_the_same_vectors(name, kind, pooling, tmp_path):
    """Padding keys get weight 0 and filler rows are dropped: fp32 vectors within 1e-6."""
    if name == "tiny bert":
        name = str(make_tiny_bert(tmp_path / "bert", mlm=False))
    b = get_backend(name, kind, device="cpu", precision="fp32")
    plain, plain_shapes = shapes_of(b, TEXTS, pooling=pooling, batch_size=16, max_tokens=256)
    bucketed, shapes = shapes_of(b, TEXTS, pooling=pooling, batch_size=16, max_tokens=256, shape_buckets=True)
    np.testing.assert_allclose(bucketed, plain, atol=1e-6, rtol=0)
    assert all(T % LENGTH_STEP == 0 or T == b.max_length for _, T in shapes)
    assert len(set(shapes)) < len(set(plain_shapes))
    assert any(B & (B - 1) == 0 and B < 16 and B * T <= 256 for B, T in shapes)   # a short batch, rounded up
    assert sum(B for B, _ in shapes) > len(TEXTS)                                    # filler rows ran


def test_buckets_are_on_off_the_cpu_only():
    b = get_backend("random:dim=32,layers=1,heads=2,ffn=64", "scratch", device="cpu", precision="fp32")
    _, shapes = shapes_of(b, TEXTS, batch_size=16, max_tokens=256)
    assert any(T % LENGTH_STEP for _, T in shapes)


def test_a_mask_off_the_cpu_is_kept_without_reading_it():
    """Reading a GPU's mask (is any of it padding?) would make the host wait for the GPU once a
    batch; embed passes None where it knows there is none. A meta tensor has no data to read."""
    assert needs_mask(torch.ones(2, 5, dtype=torch.long, device="meta"))
    assert not needs_mask(torch.ones(2, 5, dtype=torch.long))
    assert needs_mask(torch.tensor([[1, 1, 0]]))
    assert not needs_mask(None)
