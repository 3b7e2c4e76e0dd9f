"""Patching sweeps and causal tracing (core/intervene/patch_sweep.py, trace.py) against independent
computations: each cell of a sweep is the single `patch --site` run for that site, and one cell per
kind is transformers' BertForMaskedLM with forward hooks; a traced cell is transformers' run with the
same noise added to the word embeddings and one clean layer output put back by a hook."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.errors import InputError
from core.intervene.patch_sweep import patch_sweep
from core.intervene.trace import causal_trace, embedding_std, trace_noise
from tests.support.causal_models import capture, hooked, tiny_pair, unit_mean

A, B = "the cat sat on the [MASK] today", "the dog ran on the [MASK] today"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("tiny_causal_sweep"))


@pytest.fixture(scope="module")
def sweeps(tiny):
    backend, _ = tiny
    return {k: patch_sweep(backend, A, B, k, pooling="mean", target="mat") for k in ("resid", "heads", "ffn")}


def _fraction(v, va, vb) -> float:
    return (v @ vb - va @ vb) / (1 - va @ vb)


@pytest.mark.parametrize("kind, cell", [("resid", (1, 3)), ("heads", (2, 1)), ("ffn", (0, 0))])
def test_one_cell_per_kind_equals_transformers_with_hooks(tiny, sweeps, kind, cell):
    backend, ref = tiny
    ids_a, ids_b = (backend.encode_ids([t])[0][0] for t in (A, B))
    src = capture(ref, ids_b)
    layer, col = cell
    dh = ref.config.hidden_size // ref.config.num_attention_heads
    mod = ref.bert.encoder.layer[layer]
    if kind == "resid":
        def fn(m, a, o):
            o = o.clone()
            o[0, col] = src["layer"][layer][0, col]
            return o
        hooks = [(mod, "post", fn)]
    elif kind == "heads":
        def fn(m, a):
            x = a[0].clone()
            x[..., col * dh:(col + 1) * dh] = src["context"][layer][..., col * dh:(col + 1) * dh]
            return (x,)
        hooks = [(mod.attention.output.dense, "pre", fn)]
    else:
        hooks = [(mod.output.dense, "post", lambda m, a, o: src["ffn"][layer].clone())]
    h, logits = hooked(ref, hooks, ids_a)
    ha, la = hooked(ref, [], ids_a)
    hb, _ = hooked(ref, [], ids_b)
    want = _fraction(unit_mean(h), unit_mean(ha), unit_mean(hb))
    r = sweeps[kind]
    # cosines to float32 rounding; the fraction divides by 1 - cos(A, B), which magnifies it
    np.testing.assert_allclose(r.cosine_b[layer, col], unit_mean(h) @ unit_mean(hb), atol=1e-6)
    np.testing.assert_allclose(r.values[layer, col], want, atol=2e-6 / (1 - r.cosine_a_b))
    pos, tid = ids_a.index(backend.tokenizer.mask_token_id), backend.tokenizer.convert_tokens_to_ids("mat")
    p = lambda lg: float(lg[pos].double().softmax(-1)[tid])  # noqa: E731
    np.testing.assert_allclose(r.delta_p[layer, col], p(logits) - p(la), atol=2e-6)
    assert r.target == "mat" and abs(r.p_a - p(la)) < 2e-6


def test_a_sweep_cell_equals_the_single_patch_run(tiny, sweeps, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    cells = {"resid": ((2, 2), "L3.resid@2"), "heads": ((1, 3), "L2.H4"), "ffn": ((2, 0), "L3.ffn")}
    for kind, ((row, col), site) in cells.items():
        out = json.loads(run("patch", A, B, "--site", site, "--model", folder, "--pooling", "mean", "--json").stdout)
        r = sweeps[kind]
        np.testing.assert_allclose(r.cosine_b[row, col], out["cosine_patched_b"], atol=1e-6)
        np.testing.assert_allclose(r.values[row, col], out["moved_toward_b"], atol=2e-6 / (1 - r.cosine_a_b))
    # the sweep moves something: not every cell is zero
    assert np.abs(sweeps["resid"].values).max() > 0.05 and np.abs(sweeps["heads"].values).max() > 0.01


def test_the_shapes_and_labels_of_each_kind(sweeps):
    r = sweeps["resid"]
    assert r.values.shape == (3, len(r.tokens_a)) and r.rows == ["L1", "L2", "L3"] and r.cols == r.tokens_a
    assert sweeps["heads"].cols == ["H1", "H2", "H3", "H4"] and sweeps["ffn"].values.shape == (3, 1)


def test_sweep_cli_json_and_refusals(tiny, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    out = json.loads(run("patch", A, B, "--sweep", "heads", "--model", folder, "--mask-token", "mat", "--json").stdout)
    sweep = out["sweep"]
    assert sweep["site"] == "heads" and len(sweep["rows"]) == 3 and len(sweep["cols"]) == 4
    assert np.array(sweep["values"]).shape == (3, 4) and np.array(sweep["delta_p"]).shape == (3, 4)
    bad = run("patch", "the cat sat", B, "--sweep", "resid", "--model", folder, check=False)
    assert bad.returncode == 2 and "same length" in bad.stderr
    with pytest.raises(InputError, match="a sweep is over"):
        patch_sweep(backend, A, B, "edges")


def test_trace_cell_equals_transformers_with_the_same_noise(tiny):
    backend, ref = tiny
    text = "the cat sat on the [MASK] today"
    r = causal_trace(backend, text, ["cat"], noise=3.0, samples=3, seed=5, pooling="mean")
    ids = backend.encode_ids([text])[0][0]
    assert r.corrupted == [2] and r.rows[0] == "emb" and len(r.rows) == 4
    std = 3.0 * float(ref.bert.embeddings.word_embeddings.weight.detach().std())
    np.testing.assert_allclose(r.noise_std, std, rtol=1e-5)
    assert embedding_std(backend.encoder) == pytest.approx(std / 3, rel=1e-5)
    eps = trace_noise((3, len(ids), ref.config.hidden_size), [2], std, 5)
    assert torch.count_nonzero(eps[:, [0, 1, 3]]) == 0 and torch.count_nonzero(eps[:, 2]) > 0
    clean = capture(ref, ids)["layer"]
    h_clean, l_clean = hooked(ref, [], ids)
    v_clean = unit_mean(h_clean)
    pos = ids.index(backend.tokenizer.mask_token_id)
    top = int(l_clean[pos].argmax())
    for layer, tok in ((0, 2), (1, 3), (2, 2)):
        cos, cos_corr, p_rest, p_corr = [], [], [], []
        for s in range(3):
            noise = [(ref.bert.embeddings.word_embeddings, "post", lambda m, a, o, s=s: o + eps[s:s + 1])]
            def restore(m, a, o, layer=layer, tok=tok):
                o = o.clone()
                o[0, tok] = clean[layer][0, tok]
                return o
            h, lg = hooked(ref, noise + [(ref.bert.encoder.layer[layer], "post", restore)], ids)
            hc, lc = hooked(ref, noise, ids)
            cos.append(unit_mean(h) @ v_clean)
            cos_corr.append(unit_mean(hc) @ v_clean)
            p_rest.append(float(lg[pos].double().softmax(-1)[top]))
            p_corr.append(float(lc[pos].double().softmax(-1)[top]))
        np.testing.assert_allclose(r.cosine_corrupted, np.mean(cos_corr), atol=2e-6)
        np.testing.assert_allclose(r.cosine_restored[layer + 1, tok], np.mean(cos), atol=2e-6)
        want = (np.mean(cos) - np.mean(cos_corr)) / (1 - np.mean(cos_corr))
        np.testing.assert_allclose(r.recovered[layer + 1, tok], want, atol=4e-6 / (1 - r.cosine_corrupted))
        np.testing.assert_allclose(r.p_restored[layer + 1, tok], np.mean(p_rest), atol=2e-6)
        np.testing.assert_allclose(r.p_corrupted, np.mean(p_corr), atol=2e-6)
        # the error bar: the ratio estimator's standard error over the 3 samples, from transformers' runs
        for got, rest, corr, goal in ((r.recovered_se, cos, cos_corr, 1.0),
                                      (r.p_recovered_se, p_rest, p_corr, r.p_clean)):
            d, g = np.array(rest) - np.array(corr), goal - np.array(corr)
            se = (d - d.mean() / g.mean() * g).std(ddof=1) / np.sqrt(3) / abs(g.mean())
            np.testing.assert_allclose(got[layer + 1, tok], se, atol=2e-5 / abs(g.mean()))
    assert 1 - r.cosine_corrupted > 1e-4 and abs(r.p_clean - r.p_corrupted) > 1e-3, "the noise must show"
    # restoring the corrupted token's embedding output undoes the corruption entirely
    tol = 4e-6 / (1 - r.cosine_corrupted)
    np.testing.assert_allclose(r.recovered[0, 2], 1.0, atol=tol)
    np.testing.assert_allclose(r.p_recovered[0, 2], 1.0, atol=1e-4)
    np.testing.assert_allclose(r.recovered[0, [0, 1, 3]], 0.0, atol=tol)
    np.testing.assert_allclose(r.recovered_se[0, 2], 0.0, atol=tol)       # every sample recovers it all


def test_trace_cli(tiny, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    out = json.loads(run("patch", "the cat sat on the mat", "--trace", "cat,sat", "--samples", "2",
                         "--model", folder, "--json").stdout)["trace"]
    assert out["corrupted"] == [2, 3] and out["samples"] == 2 and out["noise_multiple"] == 3.0
    assert np.array(out["recovered"]).shape == (4, 8)
    text = run("patch", "the cat sat on the mat", "--trace", "cat", "--samples", "2", "--model", folder).stdout
    assert "noise std" in text and "emb" in text
    bad = run("patch", "the cat sat on the mat", "--trace", "zebra", "--model", folder, check=False)
    assert bad.returncode == 2 and "occurs 0 times" in bad.stderr


def test_resampling_from_b_equals_running_b_where_every_token_is_taken(tiny, run):
    """Corrupting by resampling gives the chosen tokens B's word embeddings: with every word
    resampled the corrupted run is B's own run, and restoring a token's embeddings recovers it."""
    backend, ref = tiny
    a, b = "the cat sat on the mat", "the dog ran in the park"
    ids_a, ids_b = (backend.encode_ids([t])[0][0] for t in (a, b))
    words = [str(p) for p in range(1, len(ids_a) - 1)]          # every word, positions 1..T-2
    r = causal_trace(backend, a, words, resample=b, pooling="mean")
    assert r.samples == 1 and r.resampled_from == b and r.noise_std == 0.0
    v_a, v_b = (unit_mean(hooked(ref, [], ids)[0]) for ids in (ids_a, ids_b))
    assert r.cosine_corrupted == pytest.approx(float(v_a @ v_b), abs=2e-6)
    out = json.loads(run("patch", a, b, "--trace", "cat", "--model", str(backend.source.folder), "--json").stdout)
    assert out["trace"]["resampled_from"] == b and out["trace"]["samples"] == 1
    np.testing.assert_allclose(out["trace"]["recovered"][0][2], 1.0, atol=1e-3)


@pytest.mark.parametrize("budget", [1, 40, 100])
def test_a_trace_in_memory_sized_batches_gives_the_one_batch_numbers(tiny, monkeypatch, budget):
    """Batches of at most rows_per_batch restored runs (a tiny budget: one token of one sample at a
    time, or a few samples), corrupted runs a chunk of samples at a time: the cells of one batch."""
    from core.intervene import trace as tr
    backend, _ = tiny
    text = "the cat sat on the [MASK] today"
    whole = causal_trace(backend, text, ["cat"], noise=3.0, samples=5, seed=5, pooling="mean")
    T, cfg = len(whole.tokens), backend.encoder.config
    monkeypatch.setattr(tr.restore, "BATCH_ELEMENTS", budget * T * max(cfg.hidden_dim, cfg.n_heads * T))
    rows, calls, real = tr.rows_per_batch(cfg, T), [], tr.run_from
    assert rows == budget
    monkeypatch.setattr(tr, "run_from", lambda enc, i, x: calls.append(x.shape[0]) or real(enc, i, x))
    done = []
    cut = causal_trace(backend, text, ["cat"], noise=3.0, samples=5, seed=5, pooling="mean",
                       progress=lambda d, t: done.append((d, t)))
    assert max(calls) <= max(rows, 1) and done[-1][0] == done[-1][1] == len(done)
    np.testing.assert_allclose(cut.recovered, whole.recovered, atol=2e-6)
    np.testing.assert_allclose(cut.p_restored, whole.p_restored, atol=2e-6)
    assert cut.cosine_corrupted == pytest.approx(whole.cosine_corrupted, abs=1e-6)
    assert cut.p_corrupted == pytest.approx(whole.p_corrupted, abs=1e-6)


def test_a_trace_cancelled_between_batches_stops_there(tiny, monkeypatch):
    from core.errors import Cancelled
    from core.intervene import trace as tr
    backend, _ = tiny
    monkeypatch.setattr(tr.restore, "BATCH_ELEMENTS", 1)    # one run per batch
    asked = []
    with pytest.raises(Cancelled):
        causal_trace(backend, "the cat sat on the mat today", ["cat"], samples=4, pooling="mean",
                     cancel=lambda: asked.append(1) or len(asked) > 5)
    assert len(asked) == 6


def test_a_resid_sweep_in_memory_sized_batches_gives_the_one_batch_numbers(tiny, sweeps, monkeypatch):
    from core.errors import Cancelled
    from core.intervene import patch_sweep as ps
    from core.intervene import restore
    backend, _ = tiny
    whole = sweeps["resid"]
    monkeypatch.setattr(restore, "BATCH_ELEMENTS", 1)            # one patched copy per forward
    calls, real = [], ps.run_from
    monkeypatch.setattr(ps, "run_from", lambda enc, i, x: calls.append(x.shape[0]) or real(enc, i, x))
    cut = patch_sweep(backend, A, B, "resid", pooling="mean", target="mat")
    assert set(calls[-len(whole.cols):]) == {1}
    np.testing.assert_allclose(cut.values, whole.values, atol=2e-6)
    if whole.delta_p is not None:
        np.testing.assert_allclose(cut.delta_p, whole.delta_p, atol=2e-6)
    asked = []
    with pytest.raises(Cancelled):               # asked between the batches of one layer too
        patch_sweep(backend, A, B, "resid", pooling="mean", target="mat",
                    cancel=lambda: asked.append(1) or len(asked) > 3)
    assert len(asked) == 4


def test_a_trace_refuses_noise_too_small_to_measure(minilm):
    # 1e-9 x the embeddings' std moves minilm's vector less than fp32 rounding does: the grid was
    # rounding over rounding (-0.20 where restoring the whole corruption gives exactly the clean run)
    for text, word in (("search engines rank documents by relevance to a query", "engines"),
                       ("the cat sat on the mat", "mat")):
        with pytest.raises(InputError, match="no further than rounding .* raise the noise level"):
            causal_trace(minilm, text, [word], noise=1e-9)


def test_a_trace_resampled_from_the_same_words_says_so(tiny, run):
    backend, _ = tiny
    with pytest.raises(InputError, match="same tokens at the corrupted positions .* resampling changes nothing"):
        causal_trace(backend, "the cat sat on the mat", ["cat"], resample="the cat sat on the mat")
    bad = run("patch", "the cat sat", "the cat sat", "--trace", "cat", "--model", str(backend.source.folder),
              check=False)
    assert bad.returncode == 2 and "resampling changes nothing" in bad.stderr


def test_trace_cli_shows_the_spread_over_samples(tiny, run):
    backend, _ = tiny
    folder = str(backend.source.folder)
    text = run("patch", "the cat sat on the mat", "--trace", "cat", "--samples", "4", "--model", folder).stdout
    assert "+/- standard error over the 4 noise samples" in text
    out = json.loads(run("patch", "the cat sat on the mat", "--trace", "cat", "--samples", "4", "--model", folder,
                         "--json").stdout)["trace"]
    assert np.array(out["recovered_se"]).shape == np.array(out["recovered"]).shape and "se_is" in out
    one = json.loads(run("patch", "the cat sat on the mat", "--trace", "cat", "--samples", "1", "--model", folder,
                         "--json").stdout)["trace"]
    assert one["recovered_se"] is None
