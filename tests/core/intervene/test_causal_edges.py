"""Attention-edge knock-out (core/intervene/edges.py, `ablate --cut`) against transformers' BertModel
whose layer-L self-attention gets an additive mask with -inf at (Q, K) for the chosen heads, built
here and put in by a forward pre-hook on that layer's self-attention."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.errors import InputError
from core.intervene.edges import Cut, parse_cut
from tests.support.causal_models import hooked, tiny_pair, unit_mean

TEXT = "the cat sat on the mat today"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("tiny_causal_edges"))


def hf_cut_hook(cuts, n_heads, n_tokens):
    """The additive mask written independently: (1, H, T, T), -inf at each cut edge."""
    extra = torch.zeros(1, n_heads, n_tokens, n_tokens)
    for head, q, k in cuts:
        extra[0, slice(None) if head is None else head, q, k] = float("-inf")

    def hook(module, args, kwargs):
        mask = kwargs.get("attention_mask")
        kwargs["attention_mask"] = extra if mask is None else mask + extra
        return args, kwargs
    return hook


def test_parse_counts_from_one_and_resolves_words():
    tokens = ["[CLS]", "the", "cat", "sat", "[MASK]", "[SEP]"]
    assert parse_cut("3:[mask]>cat", tokens) == Cut(2, None, 4, 2)
    assert parse_cut("L2.H4:3>0", tokens) == Cut(1, 3, 3, 0)
    for bad, match in (("0:1>2", "not L"), ("3:dog>cat", "occurs 0 times"), ("3:9>1", "past the end"),
                       ("3.1 cat>sat", "not L")):
        with pytest.raises(InputError, match=match):
            parse_cut(bad, tokens)


@pytest.mark.parametrize("cuts", [["2:sat>cat"], ["1.3:cat>0", "3.2:6>7", "3.2:6>2"]])
def test_a_cut_equals_transformers_with_the_mask_in_a_pre_hook(tiny, run, cuts):
    backend, ref = tiny
    folder = str(backend.source.folder)
    out = json.loads(run("ablate", TEXT, "--model", folder, "--pooling", "mean",
                         *[a for c in cuts for a in ("--cut", c)], "--json").stdout)
    ids = backend.encode_ids([TEXT])[0][0]
    tokens = backend.tokenizer.convert_ids_to_tokens(ids)
    parsed = [parse_cut(c, tokens) for c in cuts]
    hooks = []
    for layer in sorted({c.layer for c in parsed}):
        mine = [(c.head, c.query, c.key) for c in parsed if c.layer == layer]
        hooks.append((ref.bert.encoder.layer[layer].attention.self, "pre_kw",
                      hf_cut_hook(mine, ref.config.num_attention_heads, len(ids))))
    with torch.no_grad():
        t = torch.tensor([ids])
        handles = [m.register_forward_pre_hook(fn, with_kwargs=True) for m, _, fn in hooks]
        try:
            att = ref.bert(input_ids=t, output_attentions=True).attentions
        finally:
            for h in handles:
                h.remove()
    h, _ = hooked(ref, hooks, ids)
    h_clean, _ = hooked(ref, [], ids)
    want = unit_mean(h)
    np.testing.assert_allclose(out["vector_after"], want, atol=2e-6)
    assert np.abs(want - unit_mean(h_clean)).max() > 2e-5, "the cut must change the vector to be tested"
    got_att = np.array(out["attentions_after"])
    np.testing.assert_allclose(got_att, torch.stack([a[0] for a in att]).numpy(), atol=2e-6)
    for c in parsed:
        heads = range(ref.config.num_attention_heads) if c.head is None else [c.head]
        for head in heads:
            assert got_att[c.layer, head, c.query, c.key] == 0.0
            assert got_att[c.layer, head, c.query].sum() == pytest.approx(1.0, abs=1e-5)
    assert "attention edges cut" in out["intervention"]


def test_a_cut_that_leaves_a_token_nothing_is_refused(tiny, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    n = len(backend.encode_ids([TEXT])[0][0])
    every = [a for k in range(n) for a in ("--cut", f"1.1:2>{k}")]
    bad = run("ablate", TEXT, "--model", folder, *every, check=False)
    assert bad.returncode == 2 and "nothing to attend to" in bad.stderr
    bad = run("ablate", TEXT, "--model", folder, "--cut", "9:1>2", check=False)
    assert bad.returncode == 2 and "layer 9 does not exist" in bad.stderr


def test_step_by_step_follows_cuts_with_the_other_switches(tiny):
    """tests/core/walkthrough/test_edge_cuts.py checks the walk under cuts against transformers."""
    from core.intervene.spec import Intervention
    from core.walkthrough.steps import explain
    backend, _ = tiny
    spec = Intervention(heads={(1, 1)}, cuts={Cut(0, None, 2, 1)})
    walk = explain(backend, TEXT, layer=0, head=0, intervention=spec)
    assert "not followed" not in walk.note and walk.intervention == spec and walk.worst_diff < 1e-10
    assert np.isneginf(walk.step("masked_scores").values[2, 1])


def test_a_smaller_model_keeps_the_cuts_it_has():
    from core.intervene.spec import Intervention
    spec = Intervention(heads={(0, 1)}, cuts={Cut(0, None, 2, 1), Cut(0, 3, 1, 0), Cut(4, None, 1, 0)})
    assert spec.within(2, 2) == Intervention(heads={(0, 1)}, cuts={Cut(0, None, 2, 1)})
