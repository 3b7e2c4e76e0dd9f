"""Gradient attributions and Michel's gradient head importance (core/intervene/attribute.py,
head_gradient.py) against torch.autograd on transformers' own model, and Captum's axioms for
integrated gradients: completeness (the attributions add up to f(x) - f(baseline)) and the dummy
axiom (a token the output cannot depend on gets exactly 0)."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core import assets
from core.encoder.backends import get_backend
from core.evaluate.pairs import read_scored_pairs
from core.intervene.attribute import attribute
from core.intervene.head_gradient import agreement, head_gradient_importance
from tests.support.causal_models import tiny_pair

TEXT, OTHER = "the cat sat on the mat", "a dog ran in the park"
MASKED = "the cat sat on the [MASK] today"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("tiny_causal_attribute"))


def hf_grad_x_input(ref, ids, f):
    """sum_d x * df/dx over transformers' word embeddings, by torch.autograd."""
    t = torch.tensor([ids])
    words = ref.bert.embeddings.word_embeddings(t).detach().requires_grad_(True)
    out = ref(inputs_embeds=words, attention_mask=torch.ones_like(t), output_hidden_states=True)
    value = f(out)
    (grad,) = torch.autograd.grad(value, words)
    return (words * grad).sum(-1)[0].detach().numpy(), float(value)


def test_grad_x_input_equals_autograd_on_transformers(tiny, run):
    backend, ref = tiny
    folder = str(backend.source.folder)
    with torch.no_grad():
        o = torch.tensor(backend.encode_ids([OTHER])[0])
        v_other = ref.bert(input_ids=o).last_hidden_state[0].mean(0)
        v_other = v_other / v_other.norm()
    cos = lambda out: torch.nn.functional.normalize(out.hidden_states[-1][0].mean(0), dim=0) @ v_other  # noqa: E731
    want, value = hf_grad_x_input(ref, backend.encode_ids([TEXT])[0][0], cos)
    got = json.loads(run("attribute", TEXT, "--to", OTHER, "--method", "grad-x-input", "--model", folder,
                         "--pooling", "mean", "--json").stdout)
    np.testing.assert_allclose(got["attributions"], want, atol=1e-6)
    assert got["target_value"] == pytest.approx(value, abs=1e-6) and np.abs(want).max() > 1e-4
    ids = backend.encode_ids([MASKED])[0][0]
    pos, mat = ids.index(backend.tokenizer.mask_token_id), backend.tokenizer.convert_tokens_to_ids("mat")
    want, value = hf_grad_x_input(ref, ids, lambda out: out.logits[0, pos].softmax(-1)[mat])
    r = attribute(backend, MASKED, "grad-x-input", word="mat")
    np.testing.assert_allclose(r.attributions, want, atol=1e-6)
    assert r.target_value == pytest.approx(value, abs=1e-7) and np.abs(want).max() > 1e-4


def test_integrated_gradients_are_complete_and_start_from_the_stated_baseline(tiny):
    backend, ref = tiny
    for kw in ({"other": OTHER}, {"word": "mat"}):
        text = TEXT if "other" in kw else MASKED
        r = attribute(backend, text, "ig", steps=32, **kw)
        assert r.relative_gap < 0.01, r.to_dict()
        # the specials are kept in the baseline: their attribution is exactly 0
        specials = [i for i, t in enumerate(r.tokens) if t in ("[CLS]", "[SEP]", "[MASK]")]
        assert specials and all(r.attributions[i] == 0.0 for i in specials)
    # f(baseline) is f of the sentence with every other token's word embedding the [PAD] one
    ids = backend.encode_ids([MASKED])[0][0]
    keep = {backend.tokenizer.cls_token_id, backend.tokenizer.sep_token_id, backend.tokenizer.mask_token_id}
    pad_ids = [i if i in keep else backend.tokenizer.pad_token_id for i in ids]
    pos, mat = ids.index(backend.tokenizer.mask_token_id), backend.tokenizer.convert_tokens_to_ids("mat")
    with torch.no_grad():
        want = float(ref(input_ids=torch.tensor([pad_ids])).logits[0, pos].softmax(-1)[mat])
    assert r.baseline_value == pytest.approx(want, abs=1e-6)
    zero = attribute(backend, MASKED, "ig", word="mat", steps=32, baseline="zero")
    assert zero.relative_gap < 0.01     # (this tiny model's [PAD] row is zero, as BERT initialises it)


def test_an_unknown_word_starts_from_the_baseline_like_any_word(tiny):
    # [UNK] is a word of the text: the baseline replaces it (the docs' "every token but [CLS],
    # [SEP] and [MASK]"); kept, it got exactly 0 and the other words' shares moved
    backend, ref = tiny
    text = "the cat sat on the \u4e2d [MASK] today"
    ids = backend.encode_ids([text])[0][0]
    tok = backend.tokenizer
    assert tok.unk_token_id in ids
    r = attribute(backend, text, "ig", word="mat", steps=32)
    unk = ids.index(tok.unk_token_id)
    assert r.attributions[unk] != 0.0 and r.relative_gap < 0.01
    keep = {tok.cls_token_id, tok.sep_token_id, tok.mask_token_id}
    pad_ids = [i if i in keep else tok.pad_token_id for i in ids]
    pos, mat = ids.index(tok.mask_token_id), tok.convert_tokens_to_ids("mat")
    with torch.no_grad():
        want = float(ref(input_ids=torch.tensor([pad_ids])).logits[0, pos].softmax(-1)[mat])
    assert r.baseline_value == pytest.approx(want, abs=1e-6)


def test_dummy_axiom_tokens_after_the_mask_of_a_causal_model_get_zero():
    backend = get_backend("random:dim=32,layers=2,heads=4,ffn=64,attention=causal,seed=3", device="cpu")
    r = attribute(backend, "the cat [MASK] on the mat", "ig", word="sat", steps=16)
    m = r.tokens.index("[MASK]")
    assert all(a == 0.0 for a in r.attributions[m + 1:])        # the output cannot see them
    assert np.abs(r.attributions[1:m]).max() > 0                   # the tokens before it can
    g = attribute(backend, "the cat [MASK] on the mat", "grad-x-input", word="sat")
    assert all(a == 0.0 for a in g.attributions[m + 1:])


def test_attribute_cli_refusals(tiny, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    bad = run("attribute", TEXT, "--mask-token", "mat", "--model", folder, check=False)
    assert bad.returncode == 2 and "[MASK]" in bad.stderr
    bad = run("attribute", MASKED, "--mask-token", "zebra", "--model", folder, check=False)
    assert bad.returncode == 2 and "choose a word that is one token" in bad.stderr
    text = run("attribute", TEXT, "--to", OTHER, "--model", folder, "--steps", "8").stdout
    assert "completeness gap" in text and "8 steps" in text


@pytest.mark.slow
def test_minilm_integrated_gradients_complete_within_one_percent_at_the_default_steps(minilm):
    r = attribute(minilm, "the cat sat on the mat", "ig", other="a kitten rested on a rug")
    assert r.relative_gap <= 0.01 and abs(r.target_value - r.baseline_value) > 0.1


def test_michel_head_importance_equals_a_hook_gradient_on_transformers(tiny):
    backend, ref = tiny
    got = head_gradient_importance(backend, "spearman")
    pairs = read_scored_pairs(assets.eval_pairs())
    L, H = ref.config.num_hidden_layers, ref.config.num_attention_heads
    dh = ref.config.hidden_size // H
    total = torch.zeros(L, H, dtype=torch.float64)
    tok = backend.tokenizer
    for start in range(0, len(pairs), 16):
        rows = range(start, min(start + 16, len(pairs)))
        gates = torch.ones(len(rows), L, H, requires_grad=True)
        handles = [layer.attention.output.dense.register_forward_pre_hook(
            lambda m, a, i=i, gates=gates: (a[0] * gates[:, i].repeat_interleave(dh, -1)[:, None, :],))
            for i, layer in enumerate(ref.bert.encoder.layer)]
        try:
            vs = []
            for texts in (pairs.a, pairs.b):
                enc = tok([texts[i] for i in rows], padding=True, return_tensors="pt")
                h = ref.bert(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
                m = enc["attention_mask"][..., None].float()
                vs.append(torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1))
        finally:
            for handle in handles:
                handle.remove()
        gold = torch.tensor([pairs.scores[i] / 5.0 for i in rows], dtype=torch.float32)
        loss = (((vs[0] * vs[1]).sum(-1) - gold) ** 2).sum()
        (grad,) = torch.autograd.grad(loss, gates)
        total += grad.abs().double().sum(0)
    want = (total / len(pairs)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-9)
    assert want.max() > 1e-6 and want.std() > 1e-7
    assert agreement(got, want) == pytest.approx(1.0)


# ---- the Gauss-Legendre nodes: O(n^2), numpy's leggauss (an O(n^3) eigen-solve) only as the reference


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 16, 31, 32, 64, 101, 128])
def test_gauss_legendre_equals_numpys_leggauss(n):
    from core.intervene.attribute import gauss_legendre
    nodes, weights = gauss_legendre(n)
    x, w = np.polynomial.legendre.leggauss(n)
    np.testing.assert_allclose(nodes, (x + 1) / 2, rtol=0, atol=1e-13)
    np.testing.assert_allclose(weights, w / 2, rtol=0, atol=1e-13)


def test_many_gauss_legendre_nodes_come_without_the_eigen_solve_and_stay_exact(monkeypatch):
    from core.intervene import attribute as A

    def eigen(*a):
        raise AssertionError("leggauss (O(n^3)) called")
    monkeypatch.setattr(np.polynomial.legendre, "leggauss", eigen)
    nodes, weights = A.gauss_legendre(4096)
    assert nodes.shape == weights.shape == (4096,) and np.all(np.diff(nodes) > 0) and np.all(weights > 0)
    assert 0 < nodes[0] and nodes[-1] < 1 and weights.sum() == pytest.approx(1, abs=1e-12)
    for degree in (1, 7, 50, 301):                 # exact for polynomials of degree < 2n
        assert (weights * nodes ** degree).sum() == pytest.approx(1 / (degree + 1), rel=1e-11)
    np.testing.assert_allclose(nodes, 1 - nodes[::-1], atol=1e-15)          # symmetric about 1/2
