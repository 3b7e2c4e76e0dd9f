"""The quality table against brute force: normalised MSE, L0 and the floors from every held-out
token at once in NumPy; the spliced cosine and recall@10 from transformers' BertModel with a hook
that puts the NumPy reconstruction in place of the layer's output."""
import numpy as np
import pytest
import torch

from core.features.quality import evaluate_sae
from core.features.saved import WEIGHTS_FILE, load_sae
from core.features.train import held_out_mask
from tests.core.features.test_train_and_saved import numpy_codes


@pytest.fixture(scope="module")
def report(trained, bert_pair, corpus):
    sae, meta = load_sae(trained[0])
    return evaluate_sae(bert_pair[0], sae, meta, corpus)


def transformers_vector(ref, ids, layer=None, change=None):
    """Mean-pooled unit vector of one sentence; ``change(h, special)`` replaces block ``layer``'s output."""
    handle = None
    if change is not None:
        def hook(module, args, out):
            h = out[0] if isinstance(out, tuple) else out
            new = torch.from_numpy(change(h[0].double().numpy())).to(h.dtype)[None]
            return (new,) + tuple(out[1:]) if isinstance(out, tuple) else new
        handle = ref.encoder.layer[layer].register_forward_hook(hook)
    try:
        t = torch.tensor([ids])
        with torch.no_grad():
            v = ref(input_ids=t, attention_mask=torch.ones_like(t)).last_hidden_state[0].double().mean(0).numpy()
    finally:
        if handle is not None:
            handle.remove()
    return v / np.linalg.norm(v)


def test_reconstruction_rows_equal_numpy_over_every_held_out_token(report, trained, bert_pair, corpus):
    from safetensors.numpy import load_file
    backend, ref = bert_pair
    sae, meta = load_sae(trained[0])
    w = load_file(str(trained[0] / WEIGHTS_FILE))
    held = [corpus[i] for i in np.flatnonzero(held_out_mask(len(corpus), meta.held_out_fraction, meta.seed))]
    assert report.split == "held-out" and report.n_sentences == len(held)
    xs = []
    for text in held:
        ids = backend.encode_ids([text])[0][0]
        t = torch.tensor([ids])
        with torch.no_grad():
            out = ref(input_ids=t, attention_mask=torch.ones_like(t), output_hidden_states=True)
            h = out.hidden_states[meta.layer + 1]
        xs.append(h[0, 1:-1].double().numpy())
    x = np.concatenate(xs)
    codes = numpy_codes(w, x, meta.k)
    x_hat = codes @ w["W_dec"].astype(np.float64) + w["b_dec"]
    var = ((x - x.mean(0)) ** 2).sum()
    assert report.n_tokens == len(x)
    assert report.row("normalised MSE").value == pytest.approx(((x - x_hat) ** 2).sum() / var, rel=1e-5)
    assert report.row("normalised MSE").floors == pytest.approx({"mean": 1.0, "zero": (x ** 2).sum() / var}, rel=1e-5)
    assert report.row("L0").value == pytest.approx((codes > 0).sum(1).mean())
    assert report.row("dead fraction").value == pytest.approx(((codes > 0).sum(0) == 0).mean())
    assert report.row("dense fraction").value == pytest.approx(((codes > 0).mean(0) > 0.1).mean())
    for row in report.rows:
        lo, hi = row.interval
        assert lo <= hi and lo - 1e-9 <= row.value <= hi + 1e-9 or row.name in ("dead fraction", "dense fraction")


def test_spliced_cosine_and_recall_equal_transformers_with_the_reconstruction_put_in(report, trained, bert_pair,
                                                                                       corpus):
    from safetensors.numpy import load_file
    backend, ref = bert_pair
    sae, meta = load_sae(trained[0])
    w = load_file(str(trained[0] / WEIGHTS_FILE))

    def reconstruct(h):
        out = h.copy()
        out[1:-1] = numpy_codes(w, h[1:-1], meta.k) @ w["W_dec"].astype(np.float64) + w["b_dec"]
        return out
    all_ids = backend.encode_ids(corpus)[0]
    store = np.stack([transformers_vector(ref, ids) for ids in all_ids])
    held = np.flatnonzero(held_out_mask(len(corpus), meta.held_out_fraction, meta.seed))
    spliced = np.stack([transformers_vector(ref, all_ids[i], meta.layer, reconstruct) for i in held])
    cos = (spliced * store[held]).sum(1)
    assert report.row("spliced cosine").value == pytest.approx(cos.mean(), abs=1e-5)

    def top(q):
        return set(np.argsort(-(store @ q), kind="stable")[:10].tolist())
    recall = np.mean([len(top(s) & top(store[i])) / 10 for s, i in zip(spliced, held)])
    assert report.row("spliced recall@10").value == pytest.approx(recall, abs=0.02)
    zero = np.stack([transformers_vector(ref, all_ids[i], meta.layer,
                                         lambda h: np.concatenate([h[:1], 0 * h[1:-1], h[-1:]])) for i in held])
    assert report.row("spliced cosine").floors["zero"] == pytest.approx((zero * store[held]).sum(1).mean(), abs=1e-5)
    assert report.row("spliced cosine").value > report.row("spliced cosine").floors["zero"]


def test_another_corpus_is_measured_whole_and_said_so(trained, bert_pair, corpus):
    sae, meta = load_sae(trained[0])
    other = evaluate_sae(bert_pair[0], sae, meta, corpus[:40][::-1])
    assert other.split.startswith("another corpus") and other.n_sentences == 40
