"""The batch-of-two mask (core/walkthrough/batch.py): −∞ at every padded key, weight 0 there, and
the real tokens' results equal to each sentence run alone — checked against transformers, and
shown to fail when the mask is left out."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.walkthrough.batch import explain_batch

LONG, SHORT = "the quick brown fox jumps over the lazy dog in the park", "a red bird"


@pytest.fixture(scope="module")
def backend(tiny_distilbert):
    from core.encoder.backends import get_backend
    return get_backend(str(tiny_distilbert), "scratch", device="cpu")


def test_padding_gets_minus_infinity_and_zero_weight(backend):
    r = explain_batch(backend, SHORT, LONG, layer=1, head=2)
    assert r.padded == 0 and r.n_padding == r.lengths[1] - r.lengths[0] > 0
    keep = r.attention_mask.astype(bool)
    T = keep.shape[1]
    assert r.tokens[0][r.lengths[0]:] == ["[PAD]"] * r.n_padding and "[PAD]" not in r.tokens[1]
    for row in range(2):
        padded_keys = ~keep[row]
        assert np.all(np.isneginf(r.masked_scores[row][:, padded_keys]))
        np.testing.assert_array_equal(r.masked_scores[row][:, ~padded_keys], r.scores[row][:, ~padded_keys])
        assert np.all(r.weights[row][:, padded_keys] == 0.0)          # exactly zero, not small
        np.testing.assert_allclose(r.weights[row].sum(-1), np.ones(T), atol=1e-12)
    assert r.padded_weight_max == 0.0
    assert r.weights_max_abs_diff < 1e-12 and r.real_max_abs_diff < 1e-10


def test_real_tokens_equal_transformers_run_alone(tiny_distilbert, backend):
    from transformers import DistilBertModel
    hf = DistilBertModel.from_pretrained(str(tiny_distilbert)).eval()
    r = explain_batch(backend, SHORT, LONG)
    for row, text in enumerate((SHORT, LONG)):
        ids = backend.encode_ids([text])[0][0]
        with torch.no_grad():
            expected = hf(torch.tensor([ids])).last_hidden_state[0].numpy()
        np.testing.assert_allclose(r.hidden_batched[row, : len(ids)], expected, atol=1e-5)


def test_the_check_fails_without_the_mask(backend, monkeypatch):
    """Leave the mask out (padding read like words): the padded sentence's real tokens change,
    and the checks say so."""
    monkeypatch.setattr("core.walkthrough.numpy_ref.mask_scores", lambda scores, keep, fill=None: scores)
    r = explain_batch(backend, SHORT, LONG)
    assert r.real_max_abs_diff > 1e-3
    assert r.padded_weight_max > 0 and r.weights_max_abs_diff > 1e-3


def test_two_sentences_are_needed(backend):
    from core.errors import InputError
    with pytest.raises(InputError, match="two sentences"):
        explain_batch(backend, SHORT, "  ")
