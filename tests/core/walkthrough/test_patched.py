"""Step by step follows a patch from sentence B (core/walkthrough/patched.py): under a residual, a
head and an FFN patch, every step equals the patched model; the sentence vector equals the
project's own `patch --site` run and transformers' BertForMaskedLM with a forward hook that writes
B's captured value at the site; the steps before the patched one are A's unpatched walk; and a
NumPy side that ignores B fails its badge."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.intervene.patching import patched_run
from core.intervene.spec import NOTHING, Intervention, parse_site
from core.walkthrough import patched as P
from core.walkthrough import steps as W
from core.walkthrough.architecture import architecture
from tests.support.causal_models import capture, hooked, tiny_pair, unit_mean

A, B = "the cat sat on the mat today", "the dog ran on the mat today"
# site, the step B's numbers come in at, A's own value just before it, the layer's output
CASES = [("L2.resid@cat", "patched_resid", "layernorm_2"), ("L2.H3", "patched_head", "head_output"),
         ("L3.ffn", "patched_ffn", "ffn_output")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("walk_patched"))


def walk(backend, site_text, a=A, b=B, rest=NOTHING, aligned=True, **kw):
    site, token = parse_site(site_text)
    spec, _, alignment, _ = patched_run(backend, a, b, [(site, token)], rest)
    patch_from = P.PatchFrom(a, b, alignment if aligned else None)
    kw = {"layer": site.layer, "head": site.head or 0, "pooling": "mean", **kw}
    return W.explain(backend, a, intervention=spec, patch_from=patch_from, **kw), spec


def transformers_patched(ref, backend, site_text) -> np.ndarray:
    """A's unit mean vector from transformers with a hook writing B's captured value at the site."""
    ids_a, ids_b = (backend.encode_ids([t])[0][0] for t in (A, B))
    site, _ = parse_site(site_text)
    src = capture(ref, ids_b)
    layer = ref.bert.encoder.layer[site.layer]
    dh = ref.config.hidden_size // ref.config.num_attention_heads
    if site.kind == "resid":
        t = ids_a.index(backend.tokenizer.convert_tokens_to_ids("cat"))
        def fn(m, a, o):
            o = o.clone()
            o[0, t] = src["layer"][site.layer][0, t]
            return o
        hooks = [(layer, "post", fn)]
    elif site.kind == "head":
        cols = slice(site.head * dh, (site.head + 1) * dh)
        def fn(m, a):
            x = a[0].clone()
            x[..., cols] = src["context"][site.layer][..., cols]
            return (x,)
        hooks = [(layer.attention.output.dense, "pre", fn)]
    else:
        hooks = [(layer.output.dense, "post", lambda m, a, o: src["ffn"][site.layer].clone())]
    return unit_mean(hooked(ref, hooks, ids_a)[0])


@pytest.mark.parametrize("site, patched, own", CASES, ids=[c[0] for c in CASES])
def test_the_walk_equals_the_patched_model_the_cli_and_transformers(tiny, run, site, patched, own):
    backend, ref = tiny
    w, spec = walk(backend, site)
    names = [s.name for s in w.steps]
    assert w.intervention == spec and w.patched_from == B
    assert names.index(patched) == names.index(own) + 1           # B's numbers right after A's own
    for step in w.steps:                                          # every badge: the patched model's
        assert step.max_abs_diff < 1e-10, (step.name, step.max_abs_diff)
        assert step.fp32_max_abs_diff < 1e-5, (step.name, step.fp32_max_abs_diff)
    vector = w.step("normalized").values
    out = json.loads(run("patch", A, B, "--site", site, "--model", str(backend.source.folder),
                         "--pooling", "mean", "--json").stdout)
    np.testing.assert_allclose(vector, out["vector_patched"], atol=2e-6)       # (a) the project's patch run
    np.testing.assert_allclose(vector, transformers_patched(ref, backend, site), atol=2e-6)   # (b) transformers
    clean = W.explain(backend, A, layer=w.layer, head=w.head, pooling="mean")
    assert not np.allclose(vector, clean.step("normalized").values, atol=1e-4)  # the patch moved A


@pytest.mark.parametrize("site, patched, own", CASES, ids=[c[0] for c in CASES])
def test_steps_before_the_patch_are_a_and_the_patched_rows_are_b(tiny, site, patched, own):
    backend, ref = tiny
    w, _ = walk(backend, site)
    clean = W.explain(backend, A, layer=w.layer, head=w.head, pooling="mean")
    names = [s.name for s in w.steps]
    for name in names[:names.index(patched)]:                     # up to A's own value: A's unpatched walk
        np.testing.assert_allclose(w.step(name).values, clean.step(name).values, rtol=0, atol=1e-12,
                                   err_msg=name)
    step, mine = w.step(patched), w.step(own).values
    rows = np.flatnonzero(step.extra["from B"])
    ids_b = backend.encode_ids([B])[0][0]
    src = capture(ref, ids_b)
    layer = w.layer
    if patched == "patched_resid":
        assert rows.tolist() == [2] and step.row_labels[2] == "cat ← dog (B)"
        want = src["layer"][layer][0].double().numpy()
    elif patched == "patched_head":
        assert rows.tolist() == list(range(len(w.tokens)))
        dh = backend.config.dim // backend.config.n_heads
        want = src["context"][layer][0, :, w.head * dh:(w.head + 1) * dh].double().numpy()
    else:
        assert rows.tolist() == list(range(len(w.tokens)))
        want = src["ffn"][layer][0].double().numpy()
    np.testing.assert_allclose(step.values[rows], want[rows], atol=1e-5)       # B's numbers, from transformers
    keep = np.setdiff1d(np.arange(len(w.tokens)), rows)
    np.testing.assert_array_equal(step.values[keep], mine[keep])               # A's own elsewhere
    assert not np.allclose(step.values[rows], mine[rows], atol=1e-4)
    assert "this value is B's" in step.description and step.title.startswith("Patched from B")


def test_the_alignment_is_found_again_and_the_map_draws_the_patch(tiny):
    backend, _ = tiny
    w, _ = walk(backend, "L2.resid@cat")
    again, _ = walk(backend, "L2.resid@cat", aligned=False)        # no alignment given: worked out the same
    np.testing.assert_array_equal(again.step("normalized").values, w.step("normalized").values)
    arch = architecture(backend.config, len(w.tokens), w.layer, w.head, w.intervention)
    assert arch.steps == [s.name for s in w.steps]
    assert "patched_resid" in arch.switched_off and ("layernorm_2", "patched_resid") in {
        (e.source, e.target) for e in arch.edges}
    elsewhere, _ = walk(backend, "L2.resid@cat", layer=0)          # another layer: no patched step, said so
    assert not set(P.PATCH_STEPS) & {s.name for s in elsewhere.steps}
    assert "choose layer 2" in elsewhere.note and elsewhere.worst_diff < 1e-10


def test_a_patch_is_left_out_on_another_sentence_or_a_pair_with_the_reason(tiny):
    backend, _ = tiny
    site, token = parse_site("L2.H3")
    spec, _, alignment, _ = patched_run(backend, A, B, [(site, token)], Intervention(heads={(0, 1)}))
    pf = P.PatchFrom(A, B, alignment)
    other = W.explain(backend, "a bird sat on the mat today", layer=1, head=2, intervention=spec, patch_from=pf)
    assert other.intervention == Intervention(heads={(0, 1)}) and other.patched_from is None
    assert "followed on its sentence A" in other.note and other.worst_diff < 1e-10
    pair = W.explain(backend, A, pair="a dog", layer=1, intervention=spec, patch_from=pf)
    assert "not for a pair" in pair.note and pair.intervention == Intervention(heads={(0, 1)})


def test_with_an_ablation_b_runs_ablated_too_and_every_step_still_equals_the_model(tiny):
    """Heads and an FFN switched off as well (B runs with them off too, as the Intervene tab's
    patch does): the walk's vector is that run's, embedded inside ``intervene``."""
    from core.intervene.apply import intervene
    backend, _ = tiny
    rest = Intervention(heads={(0, 1), (1, 2)}, ffn_off={0})
    w, spec = walk(backend, "L3.ffn", rest=rest)
    assert w.worst_diff < 1e-10 and spec.heads == rest.heads
    spec, source, _, _ = patched_run(backend, A, B, [parse_site("L3.ffn")], rest)
    with intervene(backend, spec, patch_source=source):
        want = backend.embed([A], pooling="mean")[0]
    np.testing.assert_allclose(w.step("normalized").values, want, atol=2e-6)
    plain, _ = walk(backend, "L3.ffn")
    assert not np.allclose(plain.step("normalized").values, want, atol=1e-4)


@pytest.fixture(scope="module")
def prenorm(tmp_path_factory):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_checkpoint
    return get_backend(str(make_tiny_checkpoint(tmp_path_factory.mktemp("walk_patched_pre"))), "scratch",
                       device="cpu", precision="fp32")


@pytest.mark.parametrize("site, rest", [
    ("L2.H3", Intervention(heads={(1, 2)})),             # the patched head is switched off too
    ("L2.ffn@cat", Intervention(ffn_off={1})),          # so is the patched FFN
    ("L2.resid@cat", Intervention(skip={1})),            # the patched block is skipped
], ids=["head", "ffn", "resid"])
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_patch_on_a_switched_off_site_still_equals_the_model(tiny, prenorm, norm, site, rest):
    """The model's hooks switch off, then patch; B's value is what B's block computed. Both sides agree
    on post-norm (BERT) and pre-norm (our checkpoint) blocks."""
    backend = tiny[0] if norm == "post" else prenorm
    w, _ = walk(backend, site, a="the cat sat on the mat", b="the dog sat on the mat", rest=rest)
    assert backend.config.norm == norm and set(P.PATCH_STEPS) & {s.name for s in w.steps}
    assert all(s.max_abs_diff <= W.TOLERANCE for s in w.steps), [(s.name, s.max_abs_diff) for s in w.steps]


def test_a_badge_fails_when_the_numpy_side_ignores_b(tiny, monkeypatch):
    backend, _ = tiny
    real = P.numpy_sources
    monkeypatch.setattr(P, "numpy_sources", lambda *a: {s: np.zeros_like(v) for s, v in real(*a).items()})
    w, _ = walk(backend, "L2.resid@cat")
    assert w.step("patched_resid").max_abs_diff > 1e-2 and w.step("normalized").max_abs_diff > 1e-4
    assert w.step("layernorm_2").max_abs_diff < 1e-10                          # A's own value is still A's


def test_a_patched_walk_is_not_written_as_a_notebook_it_would_not_recompute(tiny, tmp_path):
    from core.errors import InputError
    from core.walkthrough.notebook_export import write_notebook
    backend, _ = tiny
    w, _ = walk(backend, "L2.resid@cat")
    with pytest.raises(InputError, match="clear the patch"):
        write_notebook(w, backend, tmp_path / "walk.ipynb")
    assert not list(tmp_path.iterdir())


def test_minilm_residual_patch_equals_a_hooked_bert_model(minilm):
    """Real weights: minilm (BERT layout) under transformers' BertModel with a forward hook."""
    from transformers import BertModel

    from core.encoder.sources import resolve
    a, b = "The cat sat on the mat.", "The dog sat on the mat."
    w, _ = walk(minilm, "L4.resid@cat", a=a, b=b)
    assert w.worst_diff < 1e-9 and w.step("patched_resid").fp32_max_abs_diff < 1e-4
    ref = BertModel.from_pretrained(str(resolve("minilm").folder), attn_implementation="eager").eval()
    ids_a, ids_b = (minilm.encode_ids([t])[0][0] for t in (a, b))
    t = w.tokens.index("cat")
    layer = ref.encoder.layer[3]
    with torch.no_grad():
        kept = {}
        handle = layer.register_forward_hook(lambda m, i, o: kept.setdefault("b", o.clone()))
        ref(input_ids=torch.tensor([ids_b]))
        handle.remove()
        def put_b(m, i, o):
            o = o.clone()
            o[0, t] = kept["b"][0, t]
            return o
        handle = layer.register_forward_hook(put_b)
        h = ref(input_ids=torch.tensor([ids_a])).last_hidden_state[0]
        handle.remove()
    np.testing.assert_allclose(w.step("normalized").values, unit_mean(h), atol=2e-6)
