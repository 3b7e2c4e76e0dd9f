"""Interventions (core/intervene) against independent computations: transformers' own BertModel
with forward hooks on its modules, the NumPy reference with the same switch, and a mean computed
by a separate loop; patching against the runs of A and B themselves."""
from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.errors import InputError
from core.intervene.apply import intervene
from core.intervene.means import mean_head_outputs
from core.intervene.patching import patched_run
from core.intervene.spec import NOTHING, Intervention, Site, parse_heads, parse_layers, parse_site, shuffled_positions
from core.walkthrough import numpy_ref
from tests.support.tiny_models import make_tiny_bert

SENTENCES = ["the cat sat on the mat", "a dog ran in the park today", "hello world"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny random BERT folder: ours (scratch backend) and transformers' BertModel of it."""
    from transformers import BertModel
    folder = make_tiny_bert(tmp_path_factory.mktemp("tiny_bert_intervene"), n_layers=3, n_heads=4, mlm=False)
    # Random init gives near-uniform attention, where scaling and temperature change nothing:
    # sharpen the queries and keys so that every switch shows.
    model = BertModel.from_pretrained(str(folder))
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.mul_(12)
            layer.attention.self.key.weight.mul_(12)
            layer.attention.self.value.weight.mul_(8)
    model.save_pretrained(str(folder))
    backend = get_backend(str(folder), "scratch", device="cpu")
    ref = BertModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    return backend, ref


def hf_hooks(ref, spec: Intervention, means=None):
    """The intervention on transformers' BertModel, written independently of core/intervene."""
    handles = []
    dh = ref.config.hidden_size // ref.config.num_attention_heads
    emb = ref.embeddings.position_embeddings
    if spec.positions == "off":
        handles.append(emb.register_forward_hook(lambda m, a, o: torch.zeros_like(o)))
    elif spec.positions == "shuffle":
        def shuffle(m, a):
            perm = torch.tensor(shuffled_positions(a[0].shape[-1], spec.shuffle_seed))
            return (a[0][..., perm],)
        handles.append(emb.register_forward_pre_hook(shuffle))
    factor = (dh ** 0.5 if spec.no_scale else 1.0) / spec.temperature
    for i, layer in enumerate(ref.encoder.layer):
        if factor != 1.0:
            handles.append(layer.attention.self.query.register_forward_hook(lambda m, a, o: o * factor))
        heads = [h for l, h in spec.heads if l == i]
        if heads:
            def ablate(m, a, heads=heads, i=i):
                x = a[0].clone()
                for h in heads:
                    x[..., h * dh:(h + 1) * dh] = 0.0 if means is None else means[i, h]
                return (x,)
            handles.append(layer.attention.output.dense.register_forward_pre_hook(ablate))
        if i in spec.attention_off:
            handles.append(layer.attention.output.dense.register_forward_hook(lambda m, a, o: torch.zeros_like(o)))
        if i in spec.ffn_off:
            handles.append(layer.output.dense.register_forward_hook(lambda m, a, o: torch.zeros_like(o)))
        if i in spec.skip:
            handles.append(layer.register_forward_hook(
                lambda m, a, kw, o: a[0] if a else kw["hidden_states"], with_kwargs=True))
    return handles


def hf_last_hidden(ref, ids, spec=NOTHING, means=None):
    handles = hf_hooks(ref, spec, means)
    try:
        with torch.no_grad():
            t = torch.tensor([ids])
            return ref(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0].numpy()
    finally:
        for h in handles:
            h.remove()


def ours_last_hidden(backend, ids, spec=NOTHING, means=None):
    with torch.no_grad(), intervene(backend, spec, means):
        t = torch.tensor([ids])
        return backend.encoder(t, torch.ones_like(t)).last_hidden_state[0].numpy()


SPECS = {
    "heads zeroed": Intervention(heads={(0, 1), (2, 3), (2, 0)}),
    "attention off": Intervention(attention_off={1}),
    "ffn off": Intervention(ffn_off={0, 2}),
    "block skipped": Intervention(skip={1}),
    "positions off": Intervention(positions="off"),
    "positions shuffled": Intervention(positions="shuffle", shuffle_seed=3),
    "no scaling": Intervention(no_scale=True),
    "temperature": Intervention(temperature=0.4),
    "combined": Intervention(heads={(1, 2)}, ffn_off={0}, skip={2}, positions="shuffle", temperature=0.5),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_intervention_equals_transformers_hooks_and_numpy(tiny, name):
    backend, ref = tiny
    spec = SPECS[name]
    ids = backend.encode_ids([SENTENCES[1]])[0][0]
    clean = hf_last_hidden(ref, ids)
    want = hf_last_hidden(ref, ids, spec)
    got = ours_last_hidden(backend, ids, spec)
    assert np.abs(want - clean).max() > 2e-3, "the intervention must change the output to be tested"
    np.testing.assert_allclose(got, want, atol=2e-5)
    params = numpy_ref.params_from_torch(backend.encoder)
    np_out = numpy_ref.forward(params, backend.encoder.config, ids, switch=spec)[0]
    np.testing.assert_allclose(got, np_out, atol=2e-5)


def test_minilm_heads_and_ffn_equal_transformers_hooks(minilm):
    from transformers import BertModel

    from core.encoder.sources import resolve
    ref = BertModel.from_pretrained(str(resolve("minilm").folder), attn_implementation="eager").eval()
    spec = Intervention(heads=parse_heads("3.5,4.1,6.12"), ffn_off=parse_layers("2"))
    ids = minilm.encode_ids(["which heads matter for retrieval?"])[0][0]
    np.testing.assert_allclose(ours_last_hidden(minilm, ids, spec), hf_last_hidden(ref, ids, spec), atol=1e-4)


def test_model_is_unchanged_after_the_block_and_other_threads_never_see_it(tiny):
    backend, _ = tiny
    before_state = {k: v.clone() for k, v in backend.encoder.state_dict().items()}
    before = backend.embed(SENTENCES)
    spec = SPECS["combined"]
    seen_elsewhere = []
    with intervene(backend, spec):
        inside = backend.embed(SENTENCES)
        t = threading.Thread(target=lambda: seen_elsewhere.append(backend.embed(SENTENCES)))
        t.start()
        t.join()
    after = backend.embed(SENTENCES)
    assert np.abs(inside - before).max() > 1e-2
    np.testing.assert_array_equal(seen_elsewhere[0], before)
    np.testing.assert_array_equal(after, before)
    for k, v in backend.encoder.state_dict().items():
        assert torch.equal(v, before_state[k]), k
    assert not any(m._forward_hooks or m._forward_pre_hooks for m in backend.encoder.modules())


def test_embed_under_an_intervention_is_the_transformers_run_pooled(tiny):
    backend, ref = tiny
    spec = Intervention(heads={(0, 0)}, ffn_off={1})
    ids = backend.encode_ids([SENTENCES[0]])[0][0]
    want = hf_last_hidden(ref, ids, spec).mean(axis=0)
    with intervene(backend, spec):
        got = backend.embed([SENTENCES[0]], pooling="mean")[0]
    np.testing.assert_allclose(got, want / np.linalg.norm(want), atol=1e-5)


def test_mean_ablation_uses_the_mean_a_separate_loop_finds(tiny):
    backend, ref = tiny
    dh = ref.config.hidden_size // ref.config.num_attention_heads
    # The separate loop: transformers' model, one sentence at a time, out_lin's input summed by hand.
    sums, count = [np.zeros(ref.config.hidden_size) for _ in ref.encoder.layer], 0
    for text in SENTENCES:
        ids = backend.encode_ids([text])[0][0]
        handles = [layer.attention.output.dense.register_forward_pre_hook(
            lambda m, a, i=i: sums.__setitem__(i, sums[i] + a[0][0].double().sum(0).numpy()))
            for i, layer in enumerate(ref.encoder.layer)]
        with torch.no_grad():
            ref(input_ids=torch.tensor([ids]))
        for h in handles:
            h.remove()
        count += len(ids)
    loop_means = np.stack([s / count for s in sums]).reshape(len(sums), -1, dh)
    means = mean_head_outputs(backend, SENTENCES, batch_size=2)       # padded batches: padding left out
    np.testing.assert_allclose(means.numpy(), loop_means, atol=1e-5)
    spec = Intervention(heads={(0, 2), (2, 1)}, head_mode="mean")
    ids = backend.encode_ids([SENTENCES[2]])[0][0]
    got = ours_last_hidden(backend, ids, spec, means)
    np.testing.assert_allclose(got, hf_last_hidden(ref, ids, spec, torch.tensor(loop_means).float()), atol=2e-5)
    np_out = numpy_ref.forward(numpy_ref.params_from_torch(backend.encoder), backend.encoder.config, ids,
                               switch=spec, means=loop_means)[0]
    np.testing.assert_allclose(got, np_out, atol=2e-5)
    assert np.abs(got - ours_last_hidden(backend, ids, Intervention(heads=spec.heads))).max() > 1e-3
    with pytest.raises(InputError, match="mean ablation needs"):
        ours_last_hidden(backend, ids, spec)


def _run_patched(backend, a, b, sites):
    spec, source, alignment, ids = patched_run(backend, a, b, [parse_site(s) for s in sites])
    return ours_last_hidden_with_source(backend, ids, spec, source), alignment


def ours_last_hidden_with_source(backend, ids, spec, source):
    with torch.no_grad(), intervene(backend, spec, patch_source=source):
        t = torch.tensor([ids])
        return backend.encoder(t, torch.ones_like(t)).last_hidden_state[0].numpy()


def test_patching_a_with_itself_is_the_identity(tiny):
    backend, _ = tiny
    a = SENTENCES[0]
    ids = backend.encode_ids([a])[0][0]
    every_site = [f"L{l}.H{h}" for l in (1, 2, 3) for h in (1, 2, 3, 4)] + \
                 [f"L{l}.{k}" for l in (1, 2, 3) for k in ("ffn", "resid")] + ["L2.resid@cat"]
    got, _ = _run_patched(backend, a, a, every_site)
    np.testing.assert_array_equal(got, ours_last_hidden(backend, ids))


def test_patching_every_site_reproduces_b(tiny):
    backend, _ = tiny
    a, b = "the cat sat on the mat", "the dog ran in a park"
    ids_a, ids_b = (backend.encode_ids([t])[0][0] for t in (a, b))
    assert len(ids_a) == len(ids_b)
    run_b = ours_last_hidden(backend, ids_b)
    # every token of the residual stream after layer 1: from there on A's run is B's
    got, alignment = _run_patched(backend, a, b, ["L1.resid"])
    np.testing.assert_allclose(got, run_b, atol=1e-6)
    # every token, one site each: the same
    got, _ = _run_patched(backend, a, b, [f"L1.resid@{p}" for p in range(len(ids_a))])
    np.testing.assert_allclose(got, run_b, atol=1e-6)
    # in the last layer, one token: that token is B's, the others stay A's
    got, alignment = _run_patched(backend, a, b, ["L3.resid@cat"])
    run_a = ours_last_hidden(backend, ids_a)
    p = alignment.tokens_a.index("cat")
    assert alignment.tokens_b[p] == "dog"
    np.testing.assert_array_equal(got[p], run_b[p])
    np.testing.assert_array_equal(np.delete(got, p, 0), np.delete(run_a, p, 0))


def test_patching_refuses_tokens_that_do_not_align(tiny):
    backend, _ = tiny
    with pytest.raises(InputError, match="no token-by-token alignment"):
        _run_patched(backend, "the cat sat", "a dog ran in the park today", ["L2.H1"])
    with pytest.raises(InputError, match="occurs 0 times in sentence B"):
        _run_patched(backend, "the cat sat", "a dog ran in the park", ["L2.resid@cat"])
    with pytest.raises(InputError, match="occurs 2 times in sentence A"):
        _run_patched(backend, "the cat saw the dog", "a cat ran", ["L2.resid@the"])
    got, alignment = _run_patched(backend, "the cat sat", "a dog ran in the park today", ["L2.resid@the"])
    assert alignment.pairs[Site("resid", 1, token=1)] == {1: 5}


def test_user_surface_counts_from_one_and_refuses_clearly():
    assert parse_heads("3.5, 4.1") == {(2, 4), (3, 0)}
    assert parse_layers("2") == {1}
    assert parse_site("L5.H3") == (Site("head", 4, 2), None)
    assert parse_site("l5.resid@cat") == (Site("resid", 4), "cat")
    assert Intervention(heads={(2, 4)}, ffn_off={1}).describe() == "heads 3.5 zeroed; FFN 2 off"
    for bad in ("3", "0.1", "3.x"):
        with pytest.raises(InputError, match="LAYER.HEAD"):
            parse_heads(bad)
    with pytest.raises(InputError, match="L5.H3"):
        parse_site("layer5")
    with pytest.raises(InputError, match="head 7.1 does not exist: this model has layers 1-6"):
        Intervention(heads={(6, 0)}).check(6, 12)
    both = Intervention(heads={(0, 0)}) | Intervention(ffn_off={1}, temperature=2.0)
    assert both == Intervention(heads={(0, 0)}, ffn_off={1}, temperature=2.0)
    assert Intervention().is_empty


def test_the_transformers_backend_is_refused_with_the_fix(minilm_hf):
    with pytest.raises(InputError, match="the from-scratch encoder") as e, \
            intervene(minilm_hf, Intervention(ffn_off={0})):
        pass
    assert e.value.fix == {"kind": "settings", "settings": {"backend": "scratch"}}
