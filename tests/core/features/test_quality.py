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


@pytest.fixture(scope="module")
def held_site(trained, bert_pair, corpus):
    """The site's activations of each held-out sentence (its tokens but [CLS]/[SEP]), from transformers."""
    backend, ref = bert_pair
    _, meta = load_sae(trained[0])
    xs = []
    for i in np.flatnonzero(held_out_mask(len(corpus), meta.held_out_fraction, meta.seed)):
        t = torch.tensor([backend.encode_ids([corpus[i]])[0][0]])
        with torch.no_grad():
            out = ref(input_ids=t, attention_mask=torch.ones_like(t), output_hidden_states=True)
        xs.append(out.hidden_states[meta.layer + 1][0, 1:-1].double().numpy())
    return xs


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


def test_reconstruction_rows_equal_numpy_over_every_held_out_token(report, trained, held_site):
    from safetensors.numpy import load_file
    sae, meta = load_sae(trained[0])
    w = load_file(str(trained[0] / WEIGHTS_FILE))
    xs = held_site
    assert report.split == "held-out" and report.n_sentences == len(xs)
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
        if row.name == "dead fraction":
            assert row.interval is None
            assert row.bound == pytest.approx(-np.log(0.05) / len(x))       # the rule of three
            continue
        if row.name == "dead at n/2 tokens":
            continue                                  # its own test: an interval of another quantity
        lo, hi = row.interval
        assert lo <= hi and (lo - 1e-9 <= row.value <= hi + 1e-9 or row.name == "dense fraction")


def test_dead_at_half_equals_numpy_halves_of_every_held_out_token(report, trained, held_site):
    """The halves redone in NumPy from the saved weights: each order of the held-out sentences (the
    same seeded draw), its first and next n // 2 tokens, the features none of them fires."""
    from safetensors.numpy import load_file

    from core.features.quality import HALF_ROUNDS
    sae, meta = load_sae(trained[0])
    w = load_file(str(trained[0] / WEIGHTS_FILE))
    per_sentence = [numpy_codes(w, x, meta.k) > 0 for x in held_site]
    held = held_site
    n = sum(len(c) for c in per_sentence)
    m = n // 2
    halves = []
    for r in range(HALF_ROUNDS):
        order = np.random.default_rng([0, 11, r]).permutation(len(held))
        sentence_at = np.empty(len(held), int)
        sentence_at[order] = np.arange(len(held))           # the sentence at each place of the order
        stream = np.concatenate([per_sentence[s] for s in sentence_at])
        halves.append([1 - stream[:m].any(0).mean(), 1 - stream[m:2 * m].any(0).mean()])
    halves = np.array(halves)
    row = report.row("dead at n/2 tokens")
    assert row.value == pytest.approx(halves.mean(), abs=1e-12)
    sd = np.sqrt(np.mean((halves[:, 0] - halves[:, 1]) ** 2) / 2)
    assert row.interval == pytest.approx((max(0, halves.mean() - 1.96 * sd), min(1, halves.mean() + 1.96 * sd)))
    assert f"{m:,} tokens" in row.meaning
    # a half is a subset of the tokens: never fewer dead features than all of them
    assert halves.min() >= report.row("dead fraction").value - 1e-12


def test_the_half_spread_matches_fresh_samples_of_known_firing_rates():
    """Features with known firing rates, tokens drawn independently: the sd the halves estimate from
    one data set is the sd of the dead fraction over fresh samples of n/2 tokens (within 35 %), and the
    mean is its expectation mean((1 - p)^(n/2))."""
    from core.features.quality import dead_at_half
    rng = np.random.default_rng(5)
    width, n = 400, 3000
    p = np.exp(rng.uniform(np.log(2e-4), np.log(2e-2), width))
    fires = rng.random((n, width)) < p
    k = int(fires.sum(1).max())
    active = np.full((n, max(k, 1)), -1, np.int32)
    for t in range(n):
        on = np.flatnonzero(fires[t])
        active[t, :len(on)] = on
    half = dead_at_half(active, np.arange(n) // 10, width, seed=3)
    m = n // 2
    fresh = (rng.binomial(m, p, size=(4000, width)) == 0).mean(1)
    sd = (half.interval[1] - half.value) / 1.96
    assert 0.65 * fresh.std() < sd < 1.35 * fresh.std()
    assert half.value == pytest.approx(((1 - p) ** m).mean(), abs=1.5 * fresh.std())
    assert half.tokens == m and half.halves.shape == (50, 2)
    inside = np.mean((fresh >= half.interval[0]) & (fresh <= half.interval[1]))
    assert 0.85 < inside < 0.995


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
