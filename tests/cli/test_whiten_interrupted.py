"""A whitened ingest cut off after its store (and transform) were written but before any sentence
was stored: its message says to run the same command again, and that command finishes the store
(fitted on the sentences it is given, as a store made in one go), where it used to refuse with
"already exists"."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest

from index.faiss.store import VectorStore
from index.opening import open_store
from tests.support.tiny_models import one_error, run_cli

MODEL = "random:dim=32,layers=1,heads=2,ffn=64,seed=2"
LINES = ["the cat sat on the mat", "the dog ran in the park", "a bird sang in the tree",
         "the fish swam in the sea", "a cow ate the green grass", "the horse ran in the field",
         "a frog sat on a stone", "the duck swam on the pond"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _ingest(capsys, corpus, store, *more):
    return run_cli(["ingest", corpus, "--store", store, "--model", MODEL, "--whiten", "--quiet", *more],
                   capsys)


def _interrupted(capsys, corpus, store, *more):
    with mock.patch.object(VectorStore, "add", side_effect=KeyboardInterrupt):
        code, out, err = _ingest(capsys, corpus, store, *more)
    assert code == 130, err
    assert "run the same command again" in err, err
    s = open_store(store, writable=False)
    try:
        assert s.count() == 0 and s.fingerprint_dict.get("whitening")
    finally:
        s.close()


def _vectors(store):
    s = open_store(store, writable=False)
    try:
        pairs = sorted((rec["text"], vec) for _, vecs, recs in s.iter_batches()
                       for vec, rec in zip(vecs, recs))
        return [t for t, _ in pairs], np.stack([v for _, v in pairs]), s.fingerprint_dict
    finally:
        s.close()


@pytest.mark.parametrize("dims_before, dims_now", [((), ()), (("--whiten-dims", "4"), ("--whiten-dims", "6"))],
                         ids=["same-command", "other-dims"])
def test_the_same_command_finishes_an_interrupted_whitened_store(capsys, corpus, tmp_path,
                                                                dims_before, dims_now):
    _interrupted(capsys, corpus, tmp_path / "w", *dims_before)
    code, out, err = _ingest(capsys, corpus, tmp_path / "w", *dims_now)
    assert code == 0, err
    assert f"added {len(LINES)}, duplicates 0" in out and f"holds {len(LINES)} sentences" in out, out
    code, _, err = _ingest(capsys, corpus, tmp_path / "ref", *dims_now)   # made in one go
    assert code == 0, err
    texts, got, fp = _vectors(tmp_path / "w")
    ref_texts, want, ref_fp = _vectors(tmp_path / "ref")
    assert texts == ref_texts == sorted(LINES)
    assert fp == ref_fp                       # the same transform (its sha256) and width
    np.testing.assert_allclose(got, want, atol=1e-6)
    code, out, err = run_cli(["search", "the cat sat on the mat", "--store", tmp_path / "w", "--model", MODEL,
                              "-k", "1"], capsys)
    assert code == 0 and "the cat sat on the mat" in out, (out, err)


def test_a_whitened_store_with_sentences_is_still_refused(capsys, corpus, tmp_path):
    code, _, err = _ingest(capsys, corpus, tmp_path / "w")
    assert code == 0, err
    line = one_error(*_ingest(capsys, corpus, tmp_path / "w")[::2])
    assert "already exists" in line and "choose a new --store" in line


def test_an_interrupted_whitened_store_keeps_its_model(capsys, corpus, tmp_path):
    _interrupted(capsys, corpus, tmp_path / "w")
    code, _, err = run_cli(["ingest", corpus, "--store", tmp_path / "w", "--whiten", "--quiet",
                            "--model", "random:dim=32,layers=1,heads=2,ffn=64,seed=9"], capsys)
    line = one_error(code, err)
    assert "Traceback" not in err and "random:dim=32,layers=1,heads=2,ffn=64,seed=2" in line, line
    s = open_store(tmp_path / "w", writable=False)
    try:
        assert s.fingerprint_dict["model"] == MODEL and s.count() == 0
    finally:
        s.close()
    assert "run the same ingest command without --model" in line      # and that works:
    code, out, err = run_cli(["ingest", corpus, "--store", tmp_path / "w", "--whiten", "--quiet"], capsys)
    assert code == 0 and f"holds {len(LINES)} sentences" in out, err
