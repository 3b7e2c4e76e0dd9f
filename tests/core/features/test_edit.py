"""Feature edits against independent references: editing nothing is the model bit for bit; an
ablation or a steer equals transformers' BertModel with a forward hook on the layer that
subtracts (adds) the same vector, computed in NumPy from the saved weights (1e-5 at fp32); a
steered search ranks as brute force does; a sweep's effect of one feature equals the hooked
transformers run's."""
import numpy as np
import pytest
import torch

from core.encoder.scoped_hooks import modules_path
from core.errors import InputError
from core.features.edit import FeatureEdit, features_edited, features_sweep, sentence_vectors, steered_search
from core.features.saved import WEIGHTS_FILE, load_sae
from core.intervene.apply import encoder_of
from core.intervene.way_to_b import moved_toward_b
from tests.core.features.test_train_and_saved import numpy_codes

TEXT = "the quick brown dog ran in the park with a happy child."


@pytest.fixture(scope="module")
def saved(trained):
    from safetensors.numpy import load_file
    sae, meta = load_sae(trained[0])
    return sae, meta, load_file(str(trained[0] / WEIGHTS_FILE))


def ours(backend, text, edit=None):
    ids = torch.tensor([backend.encode_ids([text])[0][0]])
    enc = encoder_of(backend)
    with torch.no_grad():
        if edit is None:
            with modules_path():
                return enc(ids, torch.ones_like(ids)).last_hidden_state[0]
        with features_edited(backend, edit):
            return enc(ids, torch.ones_like(ids)).last_hidden_state[0]


def hooked_transformers(ref, backend, text, layer, change):
    """transformers' last hidden state (T, D) with h -> h + change(h) (NumPy, float64) on block ``layer``'s output."""
    def hook(module, args, out):
        h = out[0] if isinstance(out, tuple) else out
        new = h + torch.from_numpy(np.array(change(h[0].double().numpy()))).to(h.dtype)[None]
        return (new,) + tuple(out[1:]) if isinstance(out, tuple) else new
    handle = ref.encoder.layer[layer].register_forward_hook(hook)
    try:
        ids = torch.tensor([backend.encode_ids([text])[0][0]])
        with torch.no_grad():
            return ref(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state[0]
    finally:
        handle.remove()


def firing_feature(w, backend, ref, meta, text):
    """A feature that fires on the text at the site (strongest summed activation)."""
    ids = torch.tensor([backend.encode_ids([text])[0][0]])
    with torch.no_grad():
        out = ref(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
        h = out.hidden_states[meta.layer + 1]
    codes = numpy_codes(w, h[0].double().numpy(), meta.k)
    return int(codes.sum(0).argmax()), codes


def test_editing_nothing_is_the_model_bit_for_bit(bert_pair, saved):
    backend, _ = bert_pair
    sae, meta, _ = saved
    nothing = FeatureEdit(sae, meta.site)
    assert nothing.empty
    assert torch.equal(ours(backend, TEXT, nothing), ours(backend, TEXT))
    corpus = [TEXT, "a cat sat.", "the old king read a book in the city of music and food."]
    assert np.array_equal(sentence_vectors(backend, corpus, nothing), sentence_vectors(backend, corpus))


def test_a_feature_ablation_equals_transformers_with_a_hook_subtracting_it(bert_pair, saved):
    backend, ref = bert_pair
    sae, meta, w = saved
    f, codes = firing_feature(w, backend, ref, meta, TEXT)
    assert codes[:, f].max() > 0

    def minus_feature(h):
        return -numpy_codes(w, h, meta.k)[:, [f]] * w["W_dec"][f].astype(np.float64)[None]
    want = hooked_transformers(ref, backend, TEXT, meta.layer, minus_feature)
    got = ours(backend, TEXT, FeatureEdit(sae, meta.site, ablate={f}))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert (got - ours(backend, TEXT)).abs().max() > 1e-3         # the ablation changed something


def test_steering_equals_transformers_with_a_hook_adding_the_direction(bert_pair, saved):
    backend, ref = bert_pair
    sae, meta, w = saved
    f, alpha = 5, 2.5
    want = hooked_transformers(ref, backend, TEXT, meta.layer,
                               lambda h: np.broadcast_to(alpha * w["W_dec"][f].astype(np.float64), h.shape))
    got = ours(backend, TEXT, FeatureEdit(sae, meta.site, steer={f: alpha}))
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_edits_are_checked(saved):
    sae, meta, _ = saved
    with pytest.raises(InputError, match="not one of"):
        FeatureEdit(sae, meta.site, ablate={sae.width})
    with pytest.raises(InputError):
        FeatureEdit(sae, "L2.H1")
    with pytest.raises(InputError, match="finite"):
        FeatureEdit(sae, meta.site, steer={1: float("nan")})
    assert FeatureEdit(sae, meta.site, ablate={3}, steer={4: -1.5}).describe() == \
        "feature 3 off, feature 4 -1.5 at L2.resid"


def test_steered_search_ranks_as_brute_force(bert_pair, saved, corpus):
    backend, _ = bert_pair
    sae, meta, _ = saved
    texts = corpus[:60]
    vectors = backend.embed(texts)
    edit = FeatureEdit(sae, meta.site, steer={7: 6.0})
    got = steered_search(backend, edit, TEXT, vectors, texts, k=5)
    after = sentence_vectors(backend, [TEXT], edit)[0].astype(np.float64)
    before = sentence_vectors(backend, [TEXT])[0].astype(np.float64)
    want_after = np.argsort(-(vectors @ after), kind="stable")[:5]
    assert [h.row for h in got.hits] == want_after.tolist()
    assert [h.rank_after for h in got.hits] == [1, 2, 3, 4, 5]
    rank_before = {int(r): i + 1 for i, r in enumerate(np.argsort(-(vectors @ before), kind="stable"))}
    assert [h.rank_before for h in got.hits] == [rank_before[h.row] for h in got.hits]
    assert got.cosine == pytest.approx(float(before @ after), abs=1e-6) and got.cosine < 0.999
    assert {h.row for h in got.left} == set(np.argsort(-(vectors @ before), kind="stable")[:5].tolist()) - set(
        want_after.tolist())
    still = steered_search(backend, FeatureEdit(sae, meta.site), TEXT, vectors, texts, k=5)
    assert all(h.moved == 0 for h in still.hits) and not still.left and still.cosine == pytest.approx(1.0)


def test_a_sweep_feature_equals_transformers_with_b_values_put_in(bert_pair, saved):
    backend, ref = bert_pair
    sae, meta, w = saved
    a, b = "the cat sat on the mat.", "the dog ran in the park."
    sweep = features_sweep(backend, sae, meta, a, b)
    assert sweep.alignment == "by position" and len(sweep.effects) > 3
    toward = [e.toward_b for e in sweep.effects]
    assert toward == sorted(toward, reverse=True)

    def hidden(text, layer):
        ids = torch.tensor([backend.encode_ids([text])[0][0]])
        with torch.no_grad():
            out = ref(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True)
            return out.hidden_states[layer]

    def unit_mean(h):
        v = h.double().mean(0).numpy()
        return v / np.linalg.norm(v)
    codes_b = numpy_codes(w, hidden(b, meta.layer + 1)[0].double().numpy(), meta.k)
    vec_a, vec_b = unit_mean(hidden(a, -1)[0]), unit_mean(hidden(b, -1)[0])
    for e in sweep.effects[:2] + sweep.effects[-1:]:
        f = e.feature

        def put_b(h, f=f):
            return (codes_b[:, [f]] - numpy_codes(w, h, meta.k)[:, [f]]) * w["W_dec"][f].astype(np.float64)[None]
        vec = unit_mean(hooked_transformers(ref, backend, a, meta.layer, put_b))
        assert e.toward_b == pytest.approx(moved_toward_b(vec_a, vec, vec_b), abs=1e-4)
        assert e.cosine_to_b == pytest.approx(float(vec @ vec_b), abs=1e-5)
    other = features_sweep(backend, sae, meta, a, "a bird.")
    assert other.alignment == "B's mean" and other.effects


def test_a_sweep_reports_its_progress_and_stops_when_asked(bert_pair, saved):
    from core.errors import Cancelled
    backend, _ = bert_pair
    sae, meta, _ = saved
    a, b = "the cat sat on the mat.", "the dog ran in the park."
    seen = []
    sweep = features_sweep(backend, sae, meta, a, b, batch=4, progress=lambda d, t, note="": seen.append((d, t)))
    n = len(sweep.effects)
    assert seen == [(min(i + 4, n), n) for i in range(0, n, 4)]
    asked = []
    with pytest.raises(Cancelled):
        features_sweep(backend, sae, meta, a, b, batch=4, should_stop=lambda: asked.append(1) or len(asked) > 2)
    assert len(asked) == 3
