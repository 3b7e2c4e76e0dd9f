"""Step by step follows attention-edge cuts (numpy_ref.cut_keep): the cut edge's masked score is −∞
and its weight 0 on both sides, every step equals the cut model, the sentence vector equals
`ablate --cut` and transformers' BertForMaskedLM whose self-attention gets the −∞ from a pre-hook,
and a NumPy side that ignores the cut fails its badge."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.intervene.edges import Cut, parse_cut
from core.intervene.spec import Intervention
from core.walkthrough import numpy_ref as nr
from core.walkthrough import steps as W
from tests.support.causal_models import hooked, tiny_pair, unit_mean

TEXT = "the cat sat on the mat today"
CUTS = ["2.3:sat>cat", "2:cat>0"]            # head 3 of layer 2, and every head of layer 2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("walk_edge_cuts"))


def spec_of(backend, cuts=CUTS) -> Intervention:
    tokens = backend.tokenizer.convert_ids_to_tokens(backend.encode_ids([TEXT])[0][0])
    return Intervention(cuts=frozenset(parse_cut(c, tokens) for c in cuts))


def transformers_cut(ref, ids, spec) -> np.ndarray:
    """The last hidden state under transformers with each layer's cut mask added in a pre-hook."""
    H, T = ref.config.num_attention_heads, len(ids)
    hooks = []
    for layer in sorted({c.layer for c in spec.cuts}):
        extra = torch.zeros(1, H, T, T)
        for c in spec.cuts:
            if c.layer == layer:
                extra[0, slice(None) if c.head is None else c.head, c.query, c.key] = float("-inf")

        def hook(module, args, kwargs, extra=extra):
            mask = kwargs.get("attention_mask")
            kwargs["attention_mask"] = extra if mask is None else mask + extra
            return args, kwargs
        hooks.append((ref.bert.encoder.layer[layer].attention.self, "pre_kw", hook))
    return unit_mean(hooked(ref, hooks, ids)[0])


def test_the_walk_under_cuts_equals_the_cut_model_the_cli_and_transformers(tiny, run):
    backend, ref = tiny
    spec = spec_of(backend)
    w = W.explain(backend, TEXT, layer=1, head=2, pooling="mean", intervention=spec)
    assert w.intervention == spec and "not followed" not in w.note
    for step in w.steps:
        assert step.max_abs_diff < 1e-10, (step.name, step.max_abs_diff)
    masked, weights = w.step("masked_scores").values, w.step("weights").values
    cat, sat = w.tokens.index("cat"), w.tokens.index("sat")
    assert np.isneginf(masked[sat, cat]) and np.isneginf(masked[cat, 0])         # both cuts reach head 3
    assert np.isneginf(masked).sum() == 2 and weights[sat, cat] == 0 and weights[cat, 0] == 0
    np.testing.assert_allclose(weights.sum(1), 1.0)
    other = W.explain(backend, TEXT, layer=1, head=0, pooling="mean", intervention=spec)
    assert np.isneginf(other.step("masked_scores").values).sum() == 1              # head 1: only the all-heads cut
    out = json.loads(run("ablate", TEXT, "--model", str(backend.source.folder), "--pooling", "mean",
                         *[a for c in CUTS for a in ("--cut", c)], "--json").stdout)
    vector = w.step("normalized").values
    np.testing.assert_allclose(vector, out["vector_after"], atol=2e-6)
    np.testing.assert_allclose(vector, transformers_cut(ref, backend.encode_ids([TEXT])[0][0], spec), atol=2e-6)
    clean = W.explain(backend, TEXT, layer=1, head=2, pooling="mean")
    assert not np.allclose(vector, clean.step("normalized").values, atol=1e-5)


def test_a_badge_fails_when_the_numpy_side_ignores_the_cut(tiny, monkeypatch):
    backend, _ = tiny
    monkeypatch.setattr(nr, "layer_keep", lambda keep, switch, layer, n_heads: keep)
    w = W.explain(backend, TEXT, layer=1, head=2, pooling="mean", intervention=spec_of(backend))
    assert w.step("masked_scores").max_abs_diff == np.inf and w.step("weights").max_abs_diff > 1e-3
    assert w.step("scores").max_abs_diff < 1e-10


def test_cut_keep_takes_one_edge_of_one_head_or_of_all():
    keep = np.ones(4, bool)
    got = nr.cut_keep(keep, [Cut(0, 1, 2, 3), Cut(0, None, 0, 1), Cut(1, 0, 0, 0)], 0, 3)
    assert got.shape == (3, 4, 4) and (~got).sum() == 1 + 3
    assert not got[1, 2, 3] and got[0, 2, 3] and not got[:, 0, 1].any() and got[0, 0, 0]
    causal = nr.attention_keep(keep, True)
    assert (nr.cut_keep(causal, [Cut(0, None, 3, 0)], 0, 2) == (causal & ~np.eye(4, k=-3, dtype=bool))).all()


def test_the_map_marks_the_cut_head_and_layer(tiny):
    from core.walkthrough.architecture import architecture
    backend, _ = tiny
    spec = spec_of(backend, ["2.3:sat>cat", "1:cat>0"])
    arch = architecture(backend.config, 9, layer=1, head=2, intervention=spec)
    assert "2.3" in arch.switched_off["masked_scores"] and arch.layers_switched == {0, 1}
    assert "masked_scores" not in architecture(backend.config, 9, layer=1, head=0, intervention=spec).switched_off
