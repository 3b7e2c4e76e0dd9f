"""Evaluation maths (core/evaluate/metrics.py, core/evaluate/whitening.py) and the evaluation files
(core/evaluate/pairs.py, the shipped assets/eval_*.tsv) against independent references: scipy's
rank correlation and a brute-force rank computation, numpy's corrcoef, every pair's cosine,
the covariance of whitened vectors, the shipped corpus on disk."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from core import assets
from core.errors import InputError
from core.evaluate.metrics import anisotropy, pearson, ranks, retrieval_scores, spearman
from core.evaluate.pairs import read_queries, read_scored_pairs
from core.evaluate.whitening import WhiteningFileError, fit_whitening, load_whitening, save_whitening


def brute_force_ranks(x):
    """Rank of each value: 1 + how many are smaller + half of the other equal ones."""
    x = list(x)
    return np.array([1 + sum(v < a for v in x) + (sum(v == a for v in x) - 1) / 2 for a in x])


def test_ranks_average_ties_like_a_brute_force_count():
    x = np.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0, 5.0])
    np.testing.assert_array_equal(ranks(x), brute_force_ranks(x))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spearman_and_pearson_equal_independent_references(seed):
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 6, 80).astype(float)            # graded scores: many ties
    cos = 0.1 * gold + rng.normal(0, 0.3, 80)
    scipy_stats = pytest.importorskip("scipy.stats")
    assert spearman(cos, gold) == pytest.approx(scipy_stats.spearmanr(cos, gold).statistic, abs=1e-12)
    assert spearman(cos, gold) == pytest.approx(np.corrcoef(brute_force_ranks(cos), brute_force_ranks(gold))[0, 1],
                                                abs=1e-12)
    assert pearson(cos, gold) == pytest.approx(np.corrcoef(cos, gold)[0, 1], abs=1e-12)


def test_a_constant_series_has_no_correlation():
    with pytest.raises(InputError, match="constant"):
        spearman([1, 2, 3], [2, 2, 2])


def test_anisotropy_is_the_mean_cosine_of_every_pair_when_few_and_of_a_fixed_sample_when_many():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 8)) + 2.0                   # a cone: high mean cosine
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    every = np.mean([u[i] @ u[j] for i, j in itertools.combinations(range(30), 2)])
    a = anisotropy(x)
    assert a.pairs == 435 and a.value == pytest.approx(every, abs=1e-12)
    many = rng.normal(size=(500, 8)) + 2.0
    b, c = anisotropy(many), anisotropy(many)
    assert b.pairs == 2000 and b == c                      # fixed seed: the same number twice
    m = many / np.linalg.norm(many, axis=1, keepdims=True)
    full = (m @ m.T)[np.triu_indices(500, 1)].mean()
    assert abs(b.value - full) < 0.02                      # the sample estimates the full mean


def test_retrieval_scores_are_recall_and_reciprocal_rank():
    got = retrieval_scores([1, 3, None, 12, 2], k=10)
    assert got["n"] == 5 and got["recall_at_k"] == pytest.approx(3 / 5)
    assert got["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 5)


def test_whitened_vectors_have_identity_covariance_and_lower_anisotropy(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(600, 16)) @ rng.normal(size=(16, 16)) + 3.0   # correlated, off-centre
    w = fit_whitening(x)
    white = w.whiten(x)
    np.testing.assert_allclose(white.mean(axis=0), 0, atol=1e-9)
    assert np.abs(np.cov(white, rowvar=False, bias=True) - np.eye(16)).max() <= 1e-3
    assert anisotropy(w.apply(x)).value < anisotropy(x).value - 0.3
    k = fit_whitening(x, dims=4).whiten(x)
    assert k.shape == (600, 4) and np.abs(np.cov(k, rowvar=False, bias=True) - np.eye(4)).max() <= 1e-3
    # the file round-trips, and names its numbers
    path = tmp_path / "whitening.safetensors"
    save_whitening(path, w)
    back = load_whitening(path, expected_sha256=w.digest())
    np.testing.assert_array_equal(back.matrix, w.matrix)
    with pytest.raises(WhiteningFileError, match="not the transform"):
        load_whitening(path, expected_sha256=fit_whitening(x[:300]).digest())
    path.write_bytes(path.read_bytes()[:-9])
    with pytest.raises(WhiteningFileError, match="damaged"):
        load_whitening(path)


def test_whitening_keeps_the_directions_the_corpus_spans_and_refuses_more():
    x = np.random.default_rng(0).normal(size=(10, 32))
    with pytest.raises(InputError, match="span only 9"):
        fit_whitening(x, dims=10)
    assert fit_whitening(x, dims=9).dims == 9
    assert fit_whitening(x).dims == 9          # by default: every direction there is


# ---- the files ----------------------------------------------------------------------------------
def test_the_shipped_evaluation_set_reads_and_its_queries_answer_from_the_sample_corpus():
    pairs = read_scored_pairs(assets.eval_pairs())
    assert len(pairs) >= 60 and set(pairs.scores) == {0, 1, 2, 3, 4, 5}
    queries = read_queries(assets.eval_queries())
    corpus = set(assets.sample_corpus().read_text(encoding="utf-8").splitlines())
    assert len(queries) >= 30 and all(rel in corpus for _, rel in queries)


def test_pairs_columns_by_header_name_or_named(tmp_path):
    f = tmp_path / "p.csv"
    f.write_text("sentence1,sentence2,similarity\nA cat sleeps.,A cat naps.,4.5\nA dog runs.,Rain falls.,0\n")
    p = read_scored_pairs(f)
    assert p.a == ["A cat sleeps.", "A dog runs."] and list(p.scores) == [4.5, 0.0]
    g = tmp_path / "q.tsv"
    g.write_text("x\ty\tz\nA cat sleeps.\tA cat naps.\t4.5\nA dog runs.\tRain falls.\t0\n")
    with pytest.raises(InputError, match="no sentence columns .* name them") as e:
        read_scored_pairs(g)
    assert e.value.fix == {"kind": "settings", "settings": {"columns": "A,B,SCORE"}}    # worded by the CLI
    assert read_scored_pairs(g, columns="x,y,z").b == ["A cat naps.", "Rain falls."]


@pytest.mark.parametrize("body, message", [
    ("a\tb\tscore\nx one\ty one\thigh\nx\ty\t1\n", "line 2: the score 'high' is not a number"),
    ("a\tb\tscore\nx one\t\t3\nx\ty\t1\n", "line 2: no 'b' value"),
    ("a\tb\tscore\nx\ty\t3\n", "at least two"),
    ("a\tb\tscore\nx\ty\t3\nu\tv\t3\n", "scores that differ"),
    ("a\tb\tscore\n", "at least two"),
])
def test_a_bad_pairs_file_is_one_clear_error(tmp_path, body, message):
    f = tmp_path / "bad.tsv"
    f.write_text(body)
    with pytest.raises(InputError, match=message):
        read_scored_pairs(f)


def test_an_evaluation_file_must_be_a_table(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("hello\n")
    with pytest.raises(InputError, match=".tsv or .csv"):
        read_scored_pairs(f)
    with pytest.raises(InputError, match="no such file"):
        read_scored_pairs(tmp_path / "missing.tsv")
