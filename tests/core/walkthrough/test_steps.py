"""The step-by-step walkthrough (core/walkthrough/steps.py): every step is the model's number.

References, each independent of the NumPy steps: the torch encoder's own intermediates (forward
hooks), Hugging Face transformers' hidden states and attentions for the same folder, the
backend's `embed` vectors, and closed forms (softmax rows, sinusoidal table).
"""
import itertools
import json

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.backends.scratch import RandomScratchBackend
from core.errors import InputError
from core.walkthrough import numpy_ref
from core.walkthrough.steps import POST_ORDER, PRE_ORDER, TOLERANCE, explain
from tests.support.tiny_models import make_tiny_checkpoint

SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def prenorm_folder(tmp_path_factory):
    """Pre-norm, sinusoidal positions, tanh GELU, token types: our own checkpoint layout."""
    return make_tiny_checkpoint(tmp_path_factory.mktemp("prenorm") / "model")


def all_equal_to_the_model(walk):
    for s in walk.steps:
        assert s.max_abs_diff is not None and s.max_abs_diff <= TOLERANCE, (s.name, s.max_abs_diff)
        # the fp32 forward pass `embed` runs agrees to fp32 rounding of the step's scale
        assert s.fp32_rel_diff <= 1e-5, (s.name, s.fp32_max_abs_diff, s.scale)


def test_the_float64_walkthrough_stays_float64_through_attention(minilm):
    """Every step, the attention weights included, is computed in float64 by the model's own
    modules: they agree with NumPy's float64 to rounding, far below TOLERANCE (an fp32 step in
    the middle, e.g. a softmax done in fp32, shows as ~1e-8)."""
    walk = explain(minilm, "The cat sat on the mat near the river.")
    worst = max(walk.steps, key=lambda s: s.max_abs_diff)
    assert worst.max_abs_diff <= 1e-10, (worst.name, worst.max_abs_diff)


def test_minilm_every_step_is_the_models(minilm):
    for layer, head in ((0, 0), (5, 11)):
        walk = explain(minilm, SENTENCE, layer=layer, head=head)
        assert [s.name for s in walk.steps] == list(POST_ORDER)
        all_equal_to_the_model(walk)
        T = len(walk.tokens)
        assert walk.tokens[0] == "[CLS]" and walk.tokens[-1] == "[SEP]"
        assert walk.step("q").values.shape == (T, 32)
        assert walk.step("scores").values.shape == (T, T)
        assert walk.step("scores").col_labels == walk.tokens
        assert walk.step("q").col_labels is None
        assert walk.step("ffn_hidden").values.shape == (T, 1536)
        assert walk.step("normalized").values.shape == (384,)
        assert walk.step("q").shape_text == f"({T} tokens × 384) @ (384 × 32) → {T} × 32"


def test_tiny_distilbert_every_step(tiny_distilbert):
    b = get_backend(str(tiny_distilbert))
    walk = explain(b, "the cat sat on the mat", layer=1, head=3, pooling="cls")
    assert [s.name for s in walk.steps] == [n for n in POST_ORDER if n != "token_type_embeddings"]
    assert walk.token_type_ids is None
    all_equal_to_the_model(walk)


def test_prenorm_sinusoidal_every_step(prenorm_folder):
    b = get_backend(str(prenorm_folder))
    assert (b.config.norm, b.config.positions, b.config.activation) == ("pre", "sinusoidal", "gelu_tanh")
    for layer in range(3):
        walk = explain(b, "the small dog ran in the park", pair="a cat sat", layer=layer, head=layer,
                       pooling="max")
        assert [s.name for s in walk.steps] == list(PRE_ORDER)
        all_equal_to_the_model(walk)
    # the sinusoidal rows are the closed form
    T = len(walk.tokens)
    p = np.arange(T)[:, None]
    np.testing.assert_allclose(walk.step("position_embeddings").values[:, 0::2],
                               np.sin(p / 10000 ** (np.arange(0, 32, 2) / 32)), atol=1e-12)


def test_steps_compose(minilm):
    walks = [explain(minilm, SENTENCE, layer=layer, head=2) for layer in range(minilm.n_layers)]
    for walk in walks:
        np.testing.assert_allclose(walk.step("weights").values.sum(axis=1), 1.0, atol=1e-12)
        v = walk.step
        np.testing.assert_allclose(v("head_output").values, v("heads_concat").values[:, 64:96])
        np.testing.assert_allclose(v("residual_1").values, v("layer_input").values + v("attention_output").values)
        ln = v("layernorm_2")
        np.testing.assert_allclose(ln.extra["mean"], v("residual_2").values.mean(axis=1))
        assert np.linalg.norm(v("normalized").values) == pytest.approx(1.0)
    for before, after in itertools.pairwise(walks):
        np.testing.assert_array_equal(before.step("layernorm_2").values, after.step("layer_input").values)
    np.testing.assert_allclose(walks[0].step("layer_input").values, walks[0].step("embeddings_layernorm").values)
    # the sentence vector does not depend on which layer was opened up
    for walk in walks[1:]:
        np.testing.assert_allclose(walk.step("normalized").values, walks[0].step("normalized").values, atol=1e-12)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_normalized_is_embeds_vector(minilm, pooling):
    walk = explain(minilm, SENTENCE, layer=5, pooling=pooling)
    vec = minilm.embed([SENTENCE], pooling=pooling)[0]
    np.testing.assert_allclose(walk.step("normalized").values, vec, atol=1e-6)


def test_prenorm_normalized_is_embeds_vector(prenorm_folder):
    b = get_backend(str(prenorm_folder))
    walk = explain(b, "the small dog ran", layer=0)
    np.testing.assert_allclose(walk.step("normalized").values, b.embed(["the small dog ran"])[0], atol=1e-6)
    # pre-norm: the last layer's residual_2 is the un-normalised output the final LayerNorm reads
    last = explain(b, "the small dog ran", layer=2)
    inspection = b.inspect("the small dog ran")
    np.testing.assert_allclose(last.step("residual_2").values, inspection.hidden_states[-1], atol=1e-5)


def test_steps_equal_transformers_own_numbers(minilm):
    """Independent of our torch encoder: Hugging Face's BertModel on the same folder."""
    hf = get_backend("minilm", backend="hf")
    ins = hf.inspect(SENTENCE, pair="A fox.")
    for layer in (0, 3, 5):
        walk = explain(minilm, SENTENCE, pair="A fox.", layer=layer, head=4)
        assert walk.tokens == ins.tokens
        np.testing.assert_allclose(walk.step("embeddings_layernorm").values, ins.hidden_states[0], atol=1e-4)
        np.testing.assert_allclose(walk.step("layernorm_2").values, ins.hidden_states[layer + 1], atol=1e-4)
        np.testing.assert_allclose(walk.step("weights").values, ins.attentions[layer, 4], atol=1e-5)


def test_last_layer_output_is_the_forward_result(tiny_distilbert):
    b = get_backend(str(tiny_distilbert))
    text = "the quick brown dog"
    walk = explain(b, text, layer=1)
    input_ids = torch.tensor([walk.ids])
    with torch.no_grad():
        last = b.encoder(input_ids, torch.ones_like(input_ids)).last_hidden_state[0].numpy()
    np.testing.assert_allclose(walk.step("layernorm_2").values, last, atol=1e-5)


def test_hf_backend_walks_our_encoder_and_says_so(tiny_distilbert):
    hf = get_backend(str(tiny_distilbert), backend="hf")
    walk = explain(hf, "the cat sat", layer=0, head=1)
    assert "transformers" in walk.note
    all_equal_to_the_model(walk)
    ins = hf.inspect("the cat sat")
    np.testing.assert_allclose(walk.step("weights").values, ins.attentions[0, 1], atol=1e-5)


def test_sentence_pair_has_token_types(minilm):
    walk = explain(minilm, "A cat sat.", pair="A dog ran on the mat.", layer=2)
    types = walk.token_type_ids
    assert types[0] == 0 and types[-1] == 1 and sorted(set(types)) == [0, 1]
    assert walk.tokens.count("[SEP]") == 2
    rows = walk.step("token_type_embeddings").values
    table = minilm.encoder.embeddings.token_type_embeddings.weight.detach().numpy()
    np.testing.assert_allclose(rows, table[types])
    all_equal_to_the_model(walk)


def test_long_text_is_cut_and_says_how_much(tiny_distilbert):
    b = get_backend(str(tiny_distilbert))
    walk = explain(b, "the cat sat on the mat " * 40, layer=0)
    assert len(walk.ids) == b.max_length == 128
    assert walk.truncated == 6 * 40 + 2 - 128
    all_equal_to_the_model(walk)
    pair = explain(b, "the cat sat " * 50, pair="a dog ran " * 50, layer=1)
    assert len(pair.ids) == 128 and pair.truncated == 300 + 3 - 128


def test_out_of_range_choices_are_input_errors(minilm):
    with pytest.raises(InputError, match="layer 7 does not exist: this model has 6 layers"):
        explain(minilm, "hi", layer=6)
    with pytest.raises(InputError, match="head 13 does not exist"):
        explain(minilm, "hi", head=12)
    with pytest.raises(InputError, match="pooling"):
        explain(minilm, "hi", pooling="sum")
    with pytest.raises(InputError):
        explain(minilm, "   ")


def test_a_wrong_step_is_caught(minilm, monkeypatch):
    """The check has teeth: change one step's maths and its difference exceeds the tolerance."""
    monkeypatch.setattr(numpy_ref, "gelu", lambda x, approximate: 0.5 * x * (1 + np.tanh(
        np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))))           # the tanh GELU where minilm uses erf
    walk = explain(minilm, SENTENCE, layer=0)
    assert walk.step("ffn_activation").max_abs_diff > 1e-4
    assert walk.step("ffn_hidden").max_abs_diff <= TOLERANCE       # the steps before are still right


def test_a_changed_weight_is_seen_by_both_sides():
    """Weights changed in place (training) reach the float64 copy: no stale cache."""
    b = RandomScratchBackend("random:dim=32,layers=2,heads=4,ffn=64", torch.device("cpu"))
    before = explain(b, "the cat sat", layer=1).step("normalized").values
    with torch.no_grad():
        w = b.encoder.transformer.layer[1].ffn.lin2.weight      # (a constant bias shift would vanish in LN)
        w.add_(torch.randn(w.shape, generator=torch.Generator().manual_seed(0)))
    after = explain(b, "the cat sat", layer=1)
    all_equal_to_the_model(after)
    assert np.abs(after.step("normalized").values - before).max() > 1e-3


def test_to_dict_is_the_cli_json(minilm):
    walk = explain(minilm, "A cat.", layer=1, head=2)
    d = json.loads(json.dumps(walk.to_dict()))
    assert (d["layer"], d["head"]) == (2, 3)
    assert [s["name"] for s in d["steps"]] == [s.name for s in walk.steps]
    q = d["steps"][[s["name"] for s in d["steps"]].index("q")]
    assert q["shape"] == [len(walk.tokens), 32] and np.array(q["values"]).shape == (len(walk.tokens), 32)
    ln = d["steps"][[s["name"] for s in d["steps"]].index("embeddings_layernorm")]
    assert len(ln["extra"]["mean"]) == len(walk.tokens)


# ------------------------------------------------------------------ positions, permutation, pooling

def test_permutation_demo_claims_hold(minilm):
    from core.walkthrough.positions_demo import permutation_demo
    demo = permutation_demo(minilm, "the cat sat on the mat", seed=3, layer=0)
    assert demo.tokens[0] == demo.shuffled_tokens[0] == "[CLS]"
    assert demo.tokens[-1] == demo.shuffled_tokens[-1] == "[SEP]"
    assert sorted(demo.shuffled_tokens) == sorted(demo.tokens) and demo.shuffled_tokens != demo.tokens
    assert sorted(demo.permutation) == list(range(len(demo.tokens)))
    # without positions: the shuffled sentence's attention output is the original's rows, permuted
    assert demo.without_positions_diff < 1e-5
    original, moved = demo.without_positions
    np.testing.assert_allclose(moved, original[demo.permutation], atol=1e-5)
    # with positions: it is not
    assert demo.with_positions_diff > 1e-2
    # and the demo runs on the model: with positions, the original is the walkthrough's attention output
    walk = explain(minilm, "the cat sat on the mat", layer=0)
    np.testing.assert_allclose(demo.with_positions[0], walk.step("attention_output").values, atol=1e-5)


def test_permutation_demo_deeper_layer_and_errors(prenorm_folder):
    from core.walkthrough.positions_demo import permutation_demo
    b = get_backend(str(prenorm_folder))
    demo = permutation_demo(b, "the small dog ran in the park", seed=0, layer=2)
    assert demo.without_positions_diff < 1e-5
    assert demo.with_positions_diff > 1e-3
    with pytest.raises(InputError, match="two different words"):
        permutation_demo(b, "dog dog dog")


def test_positions_view(minilm, prenorm_folder):
    from core.encoder.model import sinusoidal_table
    from core.walkthrough.positions_demo import positions_view
    view = positions_view(minilm, n_positions=40)
    assert view.model_positions == "learned" and view.learned.shape == (40, 384)
    np.testing.assert_allclose(view.learned,
                               minilm.encoder.embeddings.position_embeddings.weight[:40].detach().numpy())
    np.testing.assert_allclose(view.sinusoidal, sinusoidal_table(40, 384).numpy(), atol=1e-6)
    np.testing.assert_allclose(np.diag(view.sinusoidal_cosine), 1.0)
    np.testing.assert_allclose(np.diag(view.learned_cosine), 1.0)
    assert view.learned_cosine.shape == (40, 40)
    # column 2i is sin(2π p / wavelength_2i): its wavelength, in positions
    p = np.arange(40)
    for j in (0, 10, 100):
        np.testing.assert_allclose(view.sinusoidal[:, j], np.sin(2 * np.pi * p / view.wavelengths[j]), atol=1e-12)
    sinus = positions_view(get_backend(str(prenorm_folder)), n_positions=1000)
    assert sinus.model_positions == "sinusoidal" and sinus.learned is None
    assert sinus.n_positions == 64                       # the model's maximum


def test_pooling_comparison(minilm):
    from core.walkthrough.positions_demo import pooling_comparison
    a, b = "A cat sat on the mat.", "A kitten rested on the rug."
    cmp = pooling_comparison(minilm, a, b)
    assert cmp.poolings == ("mean", "cls", "max")
    for pooling in cmp.poolings:
        va, vb = minilm.embed([a, b], pooling=pooling)
        np.testing.assert_allclose(cmp.vectors[pooling], va, atol=1e-6)
        assert cmp.cosines[pooling] == pytest.approx(float(va @ vb), abs=1e-6)
    assert len({round(c, 4) for c in cmp.cosines.values()}) == 3     # the three poolings differ
    alone = pooling_comparison(minilm, a)
    assert alone.cosines == {} and set(alone.vectors) == {"mean", "cls", "max"}
