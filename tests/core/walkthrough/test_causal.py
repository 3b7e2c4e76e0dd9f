"""Step by step on a causal model and on an attention-pooled one: the masked scores show the
−∞ triangle, every step still equals the model's (and the check catches a model that ignores
the mask). The app's step view of it: tests/gui/panels/walkthrough/test_causal_model.py."""
import json

import numpy as np
import pytest
import torch

from core.encoder.backends.scratch import RandomScratchBackend
from core.walkthrough import capture as walkthrough_capture
from core.walkthrough import steps as W
from core.walkthrough.steps import TOLERANCE, explain

CAUSAL = "random:dim=32,layers=2,heads=4,ffn=64,attention=causal"


@pytest.fixture(scope="module")
def causal():
    return RandomScratchBackend(CAUSAL, torch.device("cpu"))


def test_masked_scores_show_minus_infinity_above_the_diagonal(causal):
    walk = explain(causal, "the cat sat on the mat", layer=1, head=2)
    masked = walk.step("masked_scores").values
    T = len(walk.tokens)
    above = np.triu(np.ones((T, T), bool), 1)
    assert np.all(np.isneginf(masked[above])) and np.all(np.isfinite(masked[~above]))
    np.testing.assert_array_equal(masked[~above], walk.step("scores").values[~above])
    weights = walk.step("weights").values
    assert np.all(weights[above] == 0) and np.allclose(weights.sum(1), 1)
    for step in walk.steps:                                   # the proof badge of every step holds
        assert step.max_abs_diff <= TOLERANCE, step.name
    text = walk.step("masked_scores")
    assert "causal" in text.title.lower() and "j > i" in text.formula
    assert "itself and the tokens before it" in text.description


def test_the_check_fails_for_a_model_that_ignores_the_causal_mask(causal, monkeypatch):
    """The model side made bidirectional (its mask builder told 'not causal'): the masked scores
    and everything after them no longer match the causal NumPy steps."""
    real = walkthrough_capture.attention_bias
    monkeypatch.setattr(walkthrough_capture, "attention_bias",
                        lambda mask, T, dtype, device, causal: real(mask, T, dtype, device, False))
    walk = explain(causal, "the cat sat on the mat", layer=0)
    assert walk.step("masked_scores").max_abs_diff == np.inf
    assert walk.step("scores").max_abs_diff <= TOLERANCE
    assert W.max_abs_diff(np.array([-np.inf, 1.0]), np.array([-np.inf, 1.0])) == 0
    assert W.max_abs_diff(np.array([-np.inf, 1.0]), np.array([0.5, 1.0])) == np.inf


def test_json_writes_masked_scores_as_null(causal):
    d = explain(causal, "the cat sat").to_dict()
    step = next(s for s in d["steps"] if s["name"] == "masked_scores")
    json.dumps(d, allow_nan=False)                           # strict JSON: no -Infinity
    assert step["values"][0][1] is None and step["values"][1][0] is not None


def test_attention_pooled_walkthrough_pools_with_the_learned_query(tmp_path):
    from transformers import AutoTokenizer

    from core.encoder.backends import clear_cache, get_backend
    from core.encoder.model import EncoderForMaskedLM
    from core.encoder.sources import DEFAULT_MODEL, resolve
    from core.encoder.weights import save_checkpoint
    from tests.core.encoder.test_parts import randomised, small_config
    tok = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder))
    model = randomised(EncoderForMaskedLM(small_config(vocab_size=len(tok), pooling="attention",
                                                       attention="causal")), seed=2)
    save_checkpoint(model, tok, tmp_path)
    clear_cache()
    b = get_backend(str(tmp_path), "scratch", device="cpu", precision="fp32")
    walk = explain(b, "a cat sat on the mat", pooling=None)       # None: the model's own pooling
    assert walk.pooling == "attention"
    assert walk.step("pooled").max_abs_diff <= TOLERANCE
    np.testing.assert_allclose(walk.step("normalized").values, b.embed([walk.text])[0], atol=1e-5)
    assert "learned query" in walk.step("pooled").description


def test_notebook_of_a_causal_attention_pooled_model_checks_itself(tmp_path, run):
    """The exported notebook (NumPy only) recomputes the causal mask and the attention pooling
    and asserts every step equals Encoderscope's."""
    pytest.importorskip("nbformat", reason="running the exported notebook needs nbformat")
    from transformers import AutoTokenizer

    from core.encoder.model import EncoderForMaskedLM
    from core.encoder.sources import DEFAULT_MODEL, resolve
    from core.encoder.weights import save_checkpoint
    from tests.cli.test_walkthrough import run_notebook
    from tests.core.encoder.test_parts import randomised, small_config
    tok = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder))
    model = randomised(EncoderForMaskedLM(small_config(vocab_size=len(tok), attention="causal",
                                                       pooling="attention")), seed=7)
    save_checkpoint(model, tok, tmp_path / "m")
    out = tmp_path / "walk.ipynb"
    run("explain", "the cat sat on the mat", "--model", str(tmp_path / "m"), "--layer", "2",
        "--notebook", str(out))
    result = run_notebook(out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"all {len(W.POST_ORDER) - 1} steps equal the numbers Encoderscope computed" in result.stdout
