"""`encoderscope ingest --whiten` and a whitened store on the command line: the stored vectors
are the whitening (fitted here by an eigen-decomposition) of the model's vectors, later texts
and queries go through it, `info` shows it, and every misuse is one `error:` line whose way
out works."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core import assets
from tests.support.tiny_models import one_error, run_cli

N = 60


@pytest.fixture(scope="module")
def lines():
    return assets.sample_corpus().read_text(encoding="utf-8").splitlines()[:N]


@pytest.fixture
def whitened(tmp_path, capsys, lines):
    (tmp_path / "c.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rc, out, err = run_cli(["ingest", tmp_path / "c.txt", "--whiten", "--whiten-dims", "16",
                            "--store", tmp_path / "w", "--quiet"], capsys)
    assert rc == 0, err
    assert "whitened to 16 of 384 dimensions" in out
    return tmp_path / "w"


def test_stored_vectors_are_the_whitened_model_vectors_and_queries_are_whitened(whitened, capsys, minilm, lines):
    from index.opening import open_store
    x = np.asarray(minilm.embed(lines), np.float64)
    mu = x.mean(0)
    vals, vecs = np.linalg.eigh(np.cov(x, rowvar=False, bias=True))
    top = np.argsort(vals)[::-1][:16]
    w = vecs[:, top] / np.sqrt(vals[top])
    ref = (x - mu) @ w
    assert np.abs(np.cov(ref, rowvar=False, bias=True) - np.eye(16)).max() <= 1e-3
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    with open_store(whitened, writable=False) as store:
        ids, stored = store.vectors()
        texts = [store.get([int(i)])[int(i)]["text"] for i in ids]
    order = [lines.index(t) for t in texts]
    # eigenvectors are defined up to sign: compare each column up to its sign
    signs = np.sign(np.sum(stored * ref[order], axis=0))
    np.testing.assert_allclose(stored * signs, ref[order], atol=2e-3)
    query = "the largest planet"
    q = (np.asarray(minilm.embed([query]), np.float64) - mu) @ w
    q /= np.linalg.norm(q)
    best = np.argsort(-(ref @ q[0]))[:3]
    rc, out, err = run_cli(["search", query, "--store", whitened, "-k", "3", "--json"], capsys)
    assert rc == 0, err
    assert [h["text"] for h in json.loads(out)["results"]] == [lines[i] for i in best]
    rc, out, _ = run_cli(["info", "--store", whitened, "--json"], capsys)
    info = json.loads(out)
    assert info["dim"] == 16 and info["whitening"]["dims"] == 16 and info["whitening"]["input_dim"] == 384
    rc, out, err = run_cli(["info", "--check", "--store", whitened], capsys)
    assert rc == 0 and "whitening 16 of 384 dimensions" in out and "give their stored vectors" in err


def test_a_later_ingest_is_whitened_with_the_stores_transform(whitened, capsys, tmp_path):
    (tmp_path / "more.txt").write_text("A comet crossed the night sky.\n", encoding="utf-8")
    assert run_cli(["ingest", tmp_path / "more.txt", "--store", whitened, "--quiet"], capsys)[0] == 0
    rc, out, _ = run_cli(["search", "A comet crossed the night sky.", "--store", whitened, "-k", "1", "--json"], capsys)
    hit = json.loads(out)["results"][0]
    assert hit["text"] == "A comet crossed the night sky." and hit["score"] == pytest.approx(1.0, abs=1e-4)


def test_misuses_are_one_error_line(whitened, capsys, tmp_path):
    (tmp_path / "more.txt").write_text("One more sentence.\n", encoding="utf-8")
    code, _, err = run_cli(["ingest", tmp_path / "more.txt", "--whiten", "--store", whitened], capsys)
    assert "already exists" in one_error(code, err)
    code, _, err = run_cli(["ingest", tmp_path / "more.txt", "--whiten-dims", "8", "--store", tmp_path / "n"], capsys)
    assert "--whiten-dims goes with --whiten" in one_error(code, err)
    code, _, err = run_cli(["ingest", tmp_path / "more.txt", "--whiten", "--store", f"milvus-lite:{tmp_path / 'm'}"],
                           capsys)
    assert "cannot be whitened" in one_error(code, err) and not (tmp_path / "m").exists()
    # another pooling: the hint names what works (no re-embedding of a whitened store)
    code, _, err = run_cli(["ingest", tmp_path / "more.txt", "--pooling", "cls", "--store", whitened], capsys)
    line = one_error(code, err)
    assert "ingest the texts into a new store" in line and "--rebuild" not in line
    code, _, err = run_cli(["ingest", "--rebuild", "--pooling", "cls", "--store", whitened, "--quiet"], capsys)
    assert "whitened with a transform fitted on its model's vectors" in one_error(code, err)


def test_a_swapped_whitening_file_is_one_error_and_putting_it_back_works(whitened, capsys, tmp_path, lines):
    from core.evaluate.whitening import fit_whitening, save_whitening
    path = whitened / "whitening.safetensors"
    good = path.read_bytes()
    save_whitening(path, fit_whitening(np.random.default_rng(0).normal(size=(100, 384)), 16))
    for argv in (["search", "planet"], ["info"], ["eval", "--queries"]):
        code, _, err = run_cli([*argv, "--store", whitened], capsys)
        assert "is not the transform the vectors were made with" in one_error(code, err)
    path.write_bytes(good)
    assert run_cli(["search", "planet", "--store", whitened], capsys)[0] == 0


def test_migrate_verify_copies_the_transform_and_reembeds_through_it(whitened, capsys, tmp_path):
    rc, out, err = run_cli(["migrate", "--from", whitened, "--to", tmp_path / "copy", "--verify", "--quiet"], capsys)
    assert rc == 0, err
    from core.evaluate.whitening import load_whitening
    assert load_whitening(tmp_path / "copy" / "whitening.safetensors").digest() == \
        load_whitening(whitened / "whitening.safetensors").digest()
    rc, a, _ = run_cli(["search", "planet", "--store", whitened, "--json"], capsys)
    rc, b, _ = run_cli(["search", "planet", "--store", tmp_path / "copy", "--json"], capsys)
    assert json.loads(a) == json.loads(b)


def test_why_on_a_whitened_store_says_its_score_is_not_the_cosine_it_splits(whitened, capsys, lines, minilm):
    """The search score of a whitened store compares whitened vectors: `why --store` says so and
    does not claim (or deny) that the model's cosine it splits equals it."""
    rc, out, err = run_cli(["search", "the biggest planet", "--store", whitened, "-k", "1", "--json"], capsys)
    assert rc == 0, err
    hit = json.loads(out)["results"][0]
    rc, out, err = run_cli(["why", "the biggest planet", hit["text"], "--store", whitened, "--json"], capsys)
    assert rc == 0, err
    assert f"the store is whitened: its search score {hit['score']:.4f} compares whitened vectors" in err
    result = json.loads(out)
    assert result["search_score"] is None
    plain = float(minilm.embed(["the biggest planet"])[0] @ minilm.embed([hit["text"]])[0])
    assert abs(result["score"] - plain) < 1e-5 and abs(result["score"] - hit["score"]) > 1e-3
