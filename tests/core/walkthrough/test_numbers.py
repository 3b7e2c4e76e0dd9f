"""The walkthrough's weights (core/walkthrough/weights.py) and readable numbers
(core/walkthrough/numbers.py): the tensors are the state_dict's, the breakdowns add up."""
import math

import numpy as np
import pytest

from core.walkthrough.numbers import score_terms, wide_summary
from core.walkthrough.steps import explain
from core.walkthrough.weights import step_input

SENTENCE = "The animal didn't cross the street because it was tired."


@pytest.fixture(scope="module")
def walk(minilm):
    return explain(minilm, SENTENCE, layer=2, head=5)


def test_weights_are_the_models_tensors(walk, minilm):
    sd = {k: v.detach().numpy() for k, v in minilm.encoder.state_dict().items()}
    lyr = "transformer.layer.2"
    expected = {
        "q": [sd[f"{lyr}.attention.q_lin.weight"][160:192].T, sd[f"{lyr}.attention.q_lin.bias"][160:192]],
        "k": [sd[f"{lyr}.attention.k_lin.weight"][160:192].T, sd[f"{lyr}.attention.k_lin.bias"][160:192]],
        "v": [sd[f"{lyr}.attention.v_lin.weight"][160:192].T, sd[f"{lyr}.attention.v_lin.bias"][160:192]],
        "attention_output": [sd[f"{lyr}.attention.out_lin.weight"].T, sd[f"{lyr}.attention.out_lin.bias"]],
        "ffn_hidden": [sd[f"{lyr}.ffn.lin1.weight"].T, sd[f"{lyr}.ffn.lin1.bias"]],
        "ffn_output": [sd[f"{lyr}.ffn.lin2.weight"].T, sd[f"{lyr}.ffn.lin2.bias"]],
        "embeddings_layernorm": [sd["embeddings.LayerNorm.weight"], sd["embeddings.LayerNorm.bias"]],
        "layernorm_1": [sd[f"{lyr}.sa_layer_norm.weight"], sd[f"{lyr}.sa_layer_norm.bias"]],
        "layernorm_2": [sd[f"{lyr}.output_layer_norm.weight"], sd[f"{lyr}.output_layer_norm.bias"]],
    }
    for step in walk.steps:
        got = [w.values for w in step.weights]
        assert len(got) == len(expected.get(step.name, [])), step.name
        for g, e in zip(got, expected.get(step.name, [])):
            assert g.shape == e.shape and np.array_equal(g, e.astype(np.float64)), step.name


def test_weights_reproduce_the_step_from_its_named_input(walk):
    """input → weights → output: X·W + b of the step named as the input is the step's output."""
    for name in ("q", "k", "v", "attention_output", "ffn_hidden", "ffn_output"):
        step = walk.step(name)
        assert step.input_step == step_input(name, "post")
        x = walk.step(step.input_step).values
        w, b = (w.values for w in step.weights)
        np.testing.assert_allclose(x @ w + b, step.values, atol=1e-9, err_msg=name)
    ln = walk.step("layernorm_1")
    x = walk.step(ln.input_step).values
    g, b = (w.values for w in ln.weights)
    normed = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-12)
    np.testing.assert_allclose(normed * g + b, ln.values, atol=1e-8)


def test_score_breakdown_sums_to_the_score(walk):
    q, k, scores = (walk.step(n).values for n in ("q", "k", "scores"))
    i, j = walk.tokens.index("it"), walk.tokens.index("animal")
    t = score_terms(q, k, i, j)
    assert sorted(t.dims.tolist()) == list(range(32))
    assert np.all(np.diff(np.abs(t.terms)) <= 0)                       # largest |term| first
    for d, qd, kd, term in zip(t.dims, t.q, t.k, t.terms):
        assert qd == q[i, d] and kd == k[j, d] and term == q[i, d] * k[j, d]
    assert t.scale == math.sqrt(32)
    assert t.score == pytest.approx(float(np.dot(q[i], k[j]) / math.sqrt(32)), abs=1e-12)
    assert t.score == pytest.approx(float(scores[i, j]), abs=1e-9)


def test_wide_summary_norms_and_top_dimensions(walk):
    h = walk.step("ffn_hidden").values
    s = wide_summary(h, top=4)
    np.testing.assert_allclose(s.norms, np.sqrt((h ** 2).sum(1)))
    for r in range(h.shape[0]):
        brute = sorted(range(h.shape[1]), key=lambda c: -abs(h[r, c]))[:4]
        assert s.top_dims[r].tolist() == brute
        assert s.top_values[r].tolist() == [h[r, c] for c in brute]
    assert s.describe(0).startswith(f"‖x‖ {s.norms[0]:.4g}")


def test_final_layernorm_reads_the_last_layers_output(tmp_path):
    from core.encoder.backends import get_backend
    backend = get_backend("random:norm=pre,layers=2,dim=32,heads=4,ffn=64", "scratch", device="cpu")
    last = explain(backend, "a cat", layer=1)
    step = last.step("final_layernorm")
    assert step.input_step == "residual_2"
    x = last.step("residual_2").values
    g, b = (w.values for w in step.weights)
    normed = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + backend.config.layer_norm_eps)
    np.testing.assert_allclose(normed * g + b, step.values, atol=1e-9)
    assert explain(backend, "a cat", layer=0).step("final_layernorm").input_step is None
