"""Why similar (core/evaluate/why.py, `encoderscope why`): the token-pair contributions add up to the
score search shows, for every pooling and both backends, checked against brute-force numpy."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.evaluate import why as W

QUERY = "the biggest planet has dozens of moons"
HIT = "Jupiter has more than ninety known moons."
TINY_QUERY, TINY_HIT = "the small cat sat on the mat.", "a big dog ran in the park."


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory):
    from tests.support.tiny_models import make_tiny_bert
    return make_tiny_bert(tmp_path_factory.mktemp("why_tiny_bert") / "bert", mlm=False)


def backend_for(name, kind, request):
    from core.encoder.backends import get_backend
    folder = {"minilm": "minilm", "tiny-distilbert": request.getfixturevalue("tiny_distilbert"),
              "tiny-bert": request.getfixturevalue("tiny_bert")}[name]
    return get_backend(str(folder), kind, device="cpu")


def cosine_of_embed(backend, a, b, pooling):
    """The score as `embed` vectors give it, each text embedded on its own."""
    va = backend.embed([a], pooling=pooling)[0].astype(np.float64)
    vb = backend.embed([b], pooling=pooling)[0].astype(np.float64)
    return float(va @ vb)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
@pytest.mark.parametrize("kind", ["scratch", "hf"])
@pytest.mark.parametrize("model", ["minilm", "tiny-distilbert", "tiny-bert"])
def test_contributions_sum_to_the_embed_score(model, kind, pooling, request):
    b = backend_for(model, kind, request)
    q, t = (QUERY, HIT) if model == "minilm" else (TINY_QUERY, TINY_HIT)
    why = W.explain(b, q, t, pooling)
    assert why.contributions.shape == (len(why.tokens_a), len(why.tokens_b))
    assert why.contributions.sum() == pytest.approx(why.score, abs=1e-5)
    assert why.score == pytest.approx(cosine_of_embed(b, q, t, pooling), abs=1e-5)
    # embedding both in one padded batch (as a store does) gives the same number
    both = b.embed([q, t], pooling=pooling)
    assert why.score == pytest.approx(float(both[0] @ both[1]), abs=1e-5)


def test_the_backends_agree_on_the_matrix(request):
    scratch = W.explain(backend_for("minilm", "scratch", request), QUERY, HIT)
    hf = W.explain(backend_for("minilm", "hf", request), QUERY, HIT)
    assert scratch.tokens_a == hf.tokens_a and scratch.tokens_b == hf.tokens_b
    np.testing.assert_allclose(scratch.contributions, hf.contributions, atol=1e-5)


def brute_force_mean(h, g):
    """Straight from the definition, one pair at a time."""
    n, m = len(h), len(g)
    u, v = sum(h) / n, sum(g) / m
    norm = np.sqrt(sum(x * x for x in u)) * np.sqrt(sum(x * x for x in v))
    return np.array([[sum(a * b for a, b in zip(h[i], g[j])) / (n * m * norm) for j in range(m)]
                     for i in range(n)])


def brute_force_max(h, g):
    """Each dimension's product credited to the tokens that won its max, found by a loop."""
    n, m, d = len(h), len(g), len(h[0])
    out = np.zeros((n, m))
    u = [max(h[i][k] for i in range(n)) for k in range(d)]
    v = [max(g[j][k] for j in range(m)) for k in range(d)]
    norm = np.sqrt(sum(x * x for x in u)) * np.sqrt(sum(x * x for x in v))
    for k in range(d):
        i = next(i for i in range(n) if h[i][k] == u[k])
        j = next(j for j in range(m) if g[j][k] == v[k])
        out[i, j] += u[k] * v[k] / norm
    return out


def test_mean_and_max_match_brute_force_on_random_vectors():
    rng = np.random.default_rng(0)
    for n, m, d in ((1, 1, 3), (3, 5, 8), (7, 4, 16)):
        h, g = rng.normal(size=(n, d)), rng.normal(size=(m, d))
        np.testing.assert_allclose(W.mean_pair_contributions(h, g), brute_force_mean(h, g), atol=1e-12)
        np.testing.assert_allclose(W.max_pair_contributions(h, g), brute_force_max(h, g), atol=1e-12)
        def cos(a, b):
            return a @ b / np.linalg.norm(a) / np.linalg.norm(b)
        assert W.mean_pair_contributions(h, g).sum() == pytest.approx(cos(h.mean(0), g.mean(0)), abs=1e-12)
        assert W.max_pair_contributions(h, g).sum() == pytest.approx(cos(h.max(0), g.max(0)), abs=1e-12)
        cls = W.cls_pair_contributions(h, g)
        assert cls[0, 0] == pytest.approx(cos(h[0], g[0])) and np.count_nonzero(cls) <= 1


def test_max_pooling_credit_on_a_real_model(request):
    b = backend_for("minilm", "scratch", request)
    _, h, _ = b.token_vectors(QUERY)
    _, g, _ = b.token_vectors(HIT)
    np.testing.assert_allclose(W.max_pair_contributions(h, g),
                               brute_force_max(h.astype(np.float64).tolist(), g.astype(np.float64).tolist()),
                               atol=1e-9)


def test_negative_contributions_exist_and_are_kept():
    h = np.array([[1.0, 0.0], [0.0, 1.0]])
    g = np.array([[1.0, 0.2], [-0.5, 1.0]])
    c = W.mean_pair_contributions(h, g)
    assert c[0, 1] < 0 and c.sum() == pytest.approx(W.embed_score(h, g, "mean"), abs=1e-6)


@pytest.mark.parametrize("kind", ["scratch", "hf"])
def test_a_sentence_against_itself_the_diagonal_dominates(kind, request):
    b = backend_for("minilm", kind, request)
    for text in (HIT, "The quick brown fox jumps over the lazy dog."):
        mean = W.explain(b, text, text, "mean")
        c = mean.contributions
        assert mean.score == pytest.approx(1.0, abs=1e-5) and c.sum() == pytest.approx(1.0, abs=1e-5)
        n = len(c)
        off = (c.sum() - np.trace(c)) / (c.size - n)
        assert np.trace(c) / n > 2 * off                      # a diagonal cell is worth > 2 others
        real = np.flatnonzero(~mean.special_a)
        assert np.mean(c[real].argmax(axis=1) == real) >= 0.8   # each word matches itself best
        # max pooling: both maxima come from the same token, so everything is on the diagonal
        mx = W.explain(b, text, text, "max").contributions
        assert np.trace(mx) == pytest.approx(1.0, abs=1e-5) and np.allclose(mx - np.diag(np.diag(mx)), 0)
        cls = W.explain(b, text, text, "cls").contributions
        assert cls[0, 0] == pytest.approx(1.0, abs=1e-5)


def test_specials_are_flagged_and_hiding_states_their_share(request):
    b = backend_for("minilm", "scratch", request)
    why = W.explain(b, QUERY, HIT)
    assert why.tokens_a[0] == "[CLS]" and why.tokens_a[-1] == "[SEP]"
    assert list(np.flatnonzero(why.special_a)) == [0, len(why.tokens_a) - 1]
    assert list(np.flatnonzero(why.special_b)) == [0, len(why.tokens_b) - 1]
    full, shown = why.view(False), why.view(True)
    assert full.hidden_pairs == 0 and full.describe_hidden() == "" and full.hidden_sum == pytest.approx(0)
    assert "[CLS]" not in shown.tokens_a and "[SEP]" not in shown.tokens_b
    n, m = why.contributions.shape
    assert shown.matrix.shape == (n - 2, m - 2) and shown.hidden_pairs == n * m - (n - 2) * (m - 2)
    assert shown.matrix.sum() + shown.hidden_sum == pytest.approx(why.contributions.sum(), abs=1e-12)
    assert shown.matrix.sum() + shown.hidden_sum == pytest.approx(why.score, abs=1e-6)
    assert shown.hidden_share == pytest.approx(shown.hidden_sum / why.score)
    assert f"{shown.hidden_pairs} pairs" in shown.describe_hidden()
    np.testing.assert_allclose(shown.row_sums, why.contributions[1:-1, 1:-1].sum(axis=1))
    np.testing.assert_allclose(full.col_sums, why.contributions.sum(axis=0))


def test_top_pairs_in_words():
    why = W.Why(pooling="mean", score=0.3, tokens_a=["[CLS]", "moons", "planet", "moons", "[SEP]"],
                tokens_b=["[CLS]", "moons", "jupiter", "[SEP]"], special_a=np.array([1, 0, 0, 0, 1], bool),
                special_b=np.array([1, 0, 0, 1], bool), contributions=np.zeros((5, 4)))
    why.contributions[1, 1], why.contributions[2, 2], why.contributions[3, 2] = 0.21, 0.09, -0.05
    why.contributions[0, 0] = 0.05
    view = why.view(hide_special=True)
    assert view.top_pairs(2) == [("moons@1", "moons", 0.21), ("planet", "jupiter", 0.09)]
    assert W.format_pairs(view.top_pairs(2)) == "moons@1 ↔ moons 0.21, planet ↔ jupiter 0.09"
    assert view.top_pairs(5, negative=True) == [("moons@3", "jupiter", -0.05)]
    assert W.format_sums(view.tokens_b, view.col_sums, digits=2) == "moons 0.21, jupiter 0.04"


# ---------------------------------------------------------------------------- CLI

def cli(argv, capsys):
    from app.cli import main
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_cli_json(pooling, capsys, request):
    rc, out, err = cli(["why", QUERY, HIT, "--pooling", pooling, "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)
    assert {"score", "tokens_a", "tokens_b", "contributions", "special_tokens_a", "special_tokens_b",
            "top_pairs", "row_sums", "col_sums", "pooling", "model"} <= set(res)
    c = np.array(res["contributions"])
    assert c.shape == (len(res["tokens_a"]), len(res["tokens_b"]))
    b = backend_for("minilm", "scratch", request)
    assert res["score"] == pytest.approx(cosine_of_embed(b, QUERY, HIT, pooling), abs=1e-5)
    assert c.sum() == pytest.approx(res["score"], abs=1e-5)
    assert res["special_tokens_a"] == [0, len(res["tokens_a"]) - 1]
    assert [res["tokens_b"][i] for i in res["special_tokens_b"]] == ["[CLS]", "[SEP]"]

    rc, out, err = cli(["why", QUERY, HIT, "--pooling", pooling, "--json", "--hide-special"], capsys)
    hidden = json.loads(out)
    assert hidden["special_tokens_a"] == [] and "[CLS]" not in hidden["tokens_a"]
    assert np.sum(hidden["contributions"]) + hidden["hidden"]["sum"] == pytest.approx(res["score"], abs=1e-6)
    assert hidden["hidden"]["tokens_a"] == ["[CLS]", "[SEP]"]


def test_cli_text(capsys):
    rc, out, err = cli(["why", QUERY, HIT, "--top", "3"], capsys)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("score 0.") and "mean pooling" in lines[0]
    assert "--hide-special" in lines[1] and "% of the score" in lines[1]
    assert lines[2].startswith("top pairs: moons ↔ moons ") and lines[2].count("↔") == 3
    assert any(line.startswith("query tokens (row sums): [CLS] ") for line in lines)


def test_cli_errors(capsys):
    rc, _out, err = cli(["why", "  ", HIT], capsys)
    assert rc == 2 and err.startswith("error: ") and "empty" in err and "Traceback" not in err
    rc, _out, err = cli(["why", QUERY, HIT, "--top", "0"], capsys)
    assert rc == 2 and "--top" in err


def test_cli_score_equals_the_store_search_score(tmp_path, capsys):
    from tests.cli.test_store import corpus_lines
    lines = corpus_lines(40)
    src = tmp_path / "corpus.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    for pooling in ("mean", "max"):
        folder = store / pooling
        rc, out, err = cli(["ingest", src, "--store", folder, "--pooling", pooling, "--quiet"], capsys)
        assert rc == 0, err
        rc, out, err = cli(["search", QUERY, "--store", folder, "-k", "3", "--json"], capsys)
        hits = json.loads(out)["results"]
        for hit in hits:
            # the model and pooling come from the store, as they do for search
            rc, out, err = cli(["why", QUERY, hit["text"], "--store", folder, "--json"], capsys)
            assert rc == 0, err
            res = json.loads(out)
            assert res["pooling"] == pooling
            assert res["score"] == pytest.approx(hit["score"], abs=1e-5)
            assert np.sum(res["contributions"]) == pytest.approx(hit["score"], abs=1e-5)
