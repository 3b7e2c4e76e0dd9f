"""`encoderscope eval` (app/cli/eval.py) against independent computations: --pairs' Spearman
and Pearson equal scipy's on cosines of vectors the test embeds itself, its whitening equals an
eigen-decomposition written here; --queries' recall@k and MRR equal a brute-force cosine ranking,
on FAISS and Milvus Lite; bad input is one `error:` line, and the command it suggests works."""
from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest

from core import assets
from core.evaluate.pairs import read_queries, read_scored_pairs
from tests.support.store_contract import milvus_available
from tests.support.tiny_models import one_error, run_cli

scipy_stats = pytest.importorskip("scipy.stats")


def unit(x):
    x = np.asarray(x, np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def reference_whitening(corpus_vectors, k):
    """mu and W from the covariance's eigenvectors (not the SVD the code uses)."""
    mu = corpus_vectors.mean(0)
    vals, vecs = np.linalg.eigh(np.cov(corpus_vectors, rowvar=False, bias=True))
    order = np.argsort(vals)[::-1][:k]
    return mu, vecs[:, order] / np.sqrt(vals[order])


@pytest.fixture(scope="module")
def pairs():
    return read_scored_pairs(assets.eval_pairs())


def test_pairs_scores_equal_scipy_on_cosines_embedded_here(capsys, minilm, pairs):
    rc, out, err = run_cli(["eval", "--pairs", "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    texts = pairs.sentences()
    s = unit(minilm.embed(texts))
    a, b = s[[texts.index(t) for t in pairs.a]], s[[texts.index(t) for t in pairs.b]]
    cos = np.sum(a * b, axis=1)
    assert got["n"] == len(pairs) == 94
    assert got["spearman"] == pytest.approx(scipy_stats.spearmanr(cos, pairs.scores).statistic, abs=1e-5)
    assert got["pearson"] == pytest.approx(scipy_stats.pearsonr(cos, pairs.scores).statistic, abs=1e-5)
    # anisotropy: 2,000 of the 17,578 pairs of the 188 sentences estimate the mean of all of them
    every = (s @ s.T)[np.triu_indices(len(s), 1)].mean()
    assert got["anisotropy_pairs"] == 2000 and got["sentences"] == 188
    assert abs(got["anisotropy"] - every) < 0.01
    rc, human, _ = run_cli(["eval", "--pairs"], capsys)
    assert f"spearman    {got['spearman']:.4f}" in human and "2000 random pairs" in human


def test_pairs_whitened_equal_an_eigen_decomposition_and_lower_anisotropy(capsys, minilm, tmp_path):
    corpus = assets.sample_corpus().read_text(encoding="utf-8").splitlines()[:100]
    (tmp_path / "c.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    pairs = read_scored_pairs(assets.eval_pairs())          # the first 40 of the shipped pairs
    pairs.a, pairs.b, pairs.scores = pairs.a[:40], pairs.b[:40], pairs.scores[:40]
    (tmp_path / "p.tsv").write_text("a\tb\tscore\n" + "".join(
        f"{x}\t{y}\t{z:g}\n" for x, y, z in zip(pairs.a, pairs.b, pairs.scores)), encoding="utf-8")
    rc, out, err = run_cli(["eval", "--pairs", tmp_path / "p.tsv", "--whiten", "--whiten-dims", "64",
                            "--whiten-corpus", tmp_path / "c.txt", "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    mu, w = reference_whitening(np.asarray(minilm.embed(corpus), np.float64), 64)
    a = unit((np.asarray(minilm.embed(pairs.a), np.float64) - mu) @ w)
    b = unit((np.asarray(minilm.embed(pairs.b), np.float64) - mu) @ w)
    cos = np.sum(a * b, axis=1)
    assert got["whitening"] == {"dims": 64, "input_dim": 384, "fitted_on": 100}
    assert got["spearman"] == pytest.approx(scipy_stats.spearmanr(cos, pairs.scores).statistic, abs=1e-4)
    assert got["anisotropy"] < got["unwhitened"]["anisotropy"]


@pytest.mark.parametrize("kind", ["faiss", pytest.param("milvus", marks=pytest.mark.skipif(
    not milvus_available(), reason="needs the [milvus] extra"))])
def test_queries_recall_and_mrr_equal_a_brute_force_ranking(capsys, minilm, tmp_path, kind):
    queries = read_queries(assets.eval_queries())
    others = [t for t in assets.sample_corpus().read_text(encoding="utf-8").splitlines()
              if t not in {r for _, r in queries}][:80]
    corpus = [r for _, r in queries] + others
    (tmp_path / "c.txt").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    store = str(tmp_path / "s") if kind == "faiss" else f"milvus-lite:{tmp_path / 's'}"
    rc, _, err = run_cli(["ingest", tmp_path / "c.txt", "--store", store, "--quiet",
                          *(["--index", "flat"] if kind == "milvus" else [])], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["eval", "--queries", "--store", store, "-k", "3", "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    c = unit(minilm.embed(corpus))
    q = unit(minilm.embed([x for x, _ in queries]))
    scores = q @ c.T
    ranks = [1 + int(np.sum(scores[i] > scores[i, corpus.index(rel)])) for i, (_, rel) in enumerate(queries)]
    hit = [r for r in ranks if r <= 3]
    assert got["n"] == 40 and got["not_in_store"] == 0
    assert got["recall_at_k"] == pytest.approx(len(hit) / 40)
    assert got["mrr"] == pytest.approx(sum(1 / r for r in hit) / 40)
    assert 0 < got["recall_at_k"] < 1 or got["recall_at_k"] == 1.0


def test_queries_whose_relevant_text_is_not_stored_count_as_misses(capsys, tmp_path):
    (tmp_path / "c.txt").write_text("The cat sleeps on the sofa.\nStocks fell on Monday.\n", encoding="utf-8")
    (tmp_path / "q.csv").write_text("question,answer\nwhere is the cat,The cat sleeps on the sofa.\n"
                                    "markets,The market crashed.\n", encoding="utf-8")
    assert run_cli(["ingest", tmp_path / "c.txt", "--store", tmp_path / "s", "--quiet"], capsys)[0] == 0
    rc, out, err = run_cli(["eval", "--queries", tmp_path / "q.csv", "--store", tmp_path / "s"], capsys)
    assert rc == 0, err
    assert "recall@10   0.5000" in out and "1 relevant text(s) are not in the store" in out


@pytest.mark.parametrize("argv, message", [
    (["eval", "--pairs", "{dir}/bad.tsv"], "line 3: the score 'x' is not a number"),
    (["eval", "--pairs", "{dir}/missing.tsv"], "no such file"),
    (["eval", "--pairs", "{dir}/bad.tsv", "--columns", "a,b"], "the columns are 3 names separated by commas, e.g. "
                                                              "a,b,score (--columns)"),
    (["eval", "--pairs", "--store", "{dir}/s"], "--store goes with --queries"),
    (["eval", "--pairs", "--whiten-dims", "8"], "go with --whiten"),
    (["eval", "--pairs", "--whiten", "--whiten-dims", "999"], "between 1 and 384"),
    (["eval", "--queries", "--store", "{dir}/nowhere"], "no store at"),
])
def test_bad_input_is_one_error_line(capsys, tmp_path, argv, message):
    (tmp_path / "bad.tsv").write_text("a\tb\tscore\nx y\tz w\t1\nu v\tq r\tx\n", encoding="utf-8")
    code, _, err = run_cli([a.format(dir=tmp_path) for a in argv], capsys)
    assert message in one_error(code, err)


def test_an_empty_store_suggests_an_ingest_that_works(capsys, tmp_path):
    from core.encoder.backends import get_backend
    from index.corpus.door import create_corpus
    create_corpus(str(tmp_path / "s"), get_backend("minilm", "scratch", device="cpu"), "mean").close()
    code, _, err = run_cli(["eval", "--queries", "--store", tmp_path / "s"], capsys)
    command = re.search(r"`encoderscope ([^`]+)`", one_error(code, err)).group(1)
    assert run_cli([*shlex.split(command), "--quiet"], capsys)[0] == 0
    rc, out, err = run_cli(["eval", "--queries", "--store", tmp_path / "s", "--json"], capsys)
    assert rc == 0 and json.loads(out)["recall_at_k"] > 0.8


@pytest.mark.parametrize("which", ["hf", "run"])
def test_anisotropy_of_any_model_equals_every_pairs_mean_cosine(capsys, tmp_path, which):
    """minilm under transformers, and a trained-run folder (our checkpoint layout): a small file
    has fewer pairs than the sample size, so every pair is averaged and the number is exact."""
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_checkpoint
    pairs = [("A cat sleeps.", "A cat naps.", 5), ("Rain is coming.", "Stocks fell.", 0),
             ("He baked bread.", "He baked a cake.", 3), ("The bus is late.", "The bus is delayed.", 4)]
    f = tmp_path / "p.tsv"
    f.write_text("a\tb\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in pairs), encoding="utf-8")
    model, backend = ("minilm", "hf") if which == "hf" else (str(make_tiny_checkpoint(tmp_path / "run")), "scratch")
    rc, out, err = run_cli(["eval", "--pairs", f, "--model", model, "--backend", backend, "--json"], capsys)
    assert rc == 0, err
    got = json.loads(out)
    texts = list(dict.fromkeys([p[0] for p in pairs] + [p[1] for p in pairs]))
    v = unit(get_backend(model, backend, device="cpu").embed(texts))
    assert got["anisotropy_pairs"] == 28
    assert got["anisotropy"] == pytest.approx((v @ v.T)[np.triu_indices(8, 1)].mean(), abs=1e-6)
