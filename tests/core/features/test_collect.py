"""Activations at a site equal transformers' hidden state after that block, token by token."""
import pytest
import torch

from core.errors import InputError
from core.features.collect import default_site, iter_activations, parse_feature_site
from tests.support.feature_models import hidden_after


def test_activations_are_transformers_hidden_states_without_specials(bert_pair, corpus):
    backend, ref = bert_pair
    sentences = corpus[:30]
    batches = list(iter_activations(backend, sentences, "L2.resid", batch_size=7))
    acts = torch.cat([b.acts for b in batches])
    sid = torch.cat([b.sentence_ids for b in batches])
    pos = torch.cat([b.positions for b in batches])
    ids, _ = backend.encode_ids(sentences)
    assert len(acts) == sum(len(x) - 2 for x in ids)        # every token but [CLS] and [SEP]
    assert acts.dtype == torch.float32
    for s in range(len(sentences)):
        want = hidden_after(ref, ids[s], layer=1)
        rows = (sid == s).nonzero().flatten()
        assert sorted(pos[rows].tolist()) == list(range(1, len(ids[s]) - 1))
        torch.testing.assert_close(acts[rows], want[pos[rows]], atol=1e-5, rtol=1e-5)


def test_specials_included_on_request(bert_pair, corpus):
    backend, _ = bert_pair
    n = sum(len(b.acts) for b in iter_activations(backend, corpus[:5], "L1.resid", include_special=True))
    ids, _ = backend.encode_ids(corpus[:5])
    assert n == sum(len(x) for x in ids)


def test_sites_named_as_patch_names_them():
    assert parse_feature_site("L3.resid").layer == 2
    assert default_site(6) == "L3.resid" and default_site(3) == "L2.resid"
    for bad in ("L3.H2", "L3.resid@cat", "3", "L0.resid"):
        with pytest.raises(InputError):
            parse_feature_site(bad)


def test_a_site_past_the_model_is_refused(bert_pair, corpus):
    with pytest.raises(InputError, match="past this model's 3 layers"):
        next(iter_activations(bert_pair[0], corpus[:2], "L4.resid"))
