"""Why's Σ equals the score search showed, at fp32 and bf16, on both backends: the hit's token
vectors are computed as its stored vector was made (precision, alone or in a padded ingest batch),
and which is said. Where the CPU has no native bf16 it is emulated (slower, same kernels' maths):
the test still runs. The Why dialog on such a store: tests/gui/panels/why/test_precision.py."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.evaluate import why as W
from tests.support.tiny_models import WORDS

QUERY = "the small cat sat on the mat."


def corpus(n=16) -> list[str]:
    """Sentences of different lengths from the tiny vocabulary: ingest batches need padding."""
    rng = np.random.default_rng(0)
    words = [w for w in WORDS if w.isalpha()]
    return [" ".join(rng.choice(words, size=3 + (i * 5) % 17)) + "." for i in range(n)]


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    """A random DistilBERT wide and deep enough for bf16's rounding to show (the tiny one of
    the other tests is too small for it), still quick on two cores."""
    from tests.support.tiny_models import make_tiny_distilbert
    return make_tiny_distilbert(tmp_path_factory.mktemp("why_precision") / "model", dim=128, n_layers=4,
                                n_heads=4, hidden_dim=512)


@pytest.fixture
def emulated_bf16(monkeypatch):
    """bf16 autocast allowed on any CPU (emulated where not native)."""
    monkeypatch.setattr("core.device.bf16_supported", lambda device: True)


def fresh_backend(kind, folder, precision):
    """A backend of its own (not get_backend's cache: the precision is changed here). Built in
    fp32 and switched, as check_bf16 does: bf16 weight packing needs native bf16."""
    from core.encoder.backends.hf import HFBackend
    from core.encoder.backends.scratch import ScratchBackend
    from core.encoder.sources import resolve
    backend = {"scratch": ScratchBackend, "hf": HFBackend}[kind](resolve(str(folder)), torch.device("cpu"), "fp32")
    backend.precision = precision
    return backend


def build_store(folder, backend, texts):
    """A FAISS store of ``texts``, embedded in ingest batches as `encoderscope ingest` does."""
    from index.faiss.store import VectorStore
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=backend.fingerprint("mean"))
    store.add_texts(texts, backend)
    return store


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("kind", ["scratch", "hf"])
def test_sum_equals_the_search_score(kind, precision, small_model, tmp_path, emulated_bf16):
    from index.corpus.door import search
    backend = fresh_backend(kind, small_model, precision)
    store = build_store(tmp_path / "store", backend, corpus())
    try:
        hits, _ = search(store, QUERY, 6, backend)
    finally:
        store.close()
    alone = []
    for hit in hits:
        why = W.explain(backend, QUERY, hit.text, "mean", hit.score)
        assert why.total == pytest.approx(hit.score, abs=W.SAME_SCORE), why.describe_precision()
        assert why.hit_run.precision == precision and why.query_precision == precision
        assert precision in why.describe_precision()
        if kind == "scratch":
            # ours gives a row the same numbers at any padding: the first guess is already right
            assert W.explain(backend, QUERY, hit.text, "mean").hit_run == why.hit_run
        _, g, _ = backend.token_vectors(hit.text)        # the hit run alone, not as it was stored
        _, h, _ = backend.token_vectors(QUERY)
        alone.append(abs(W.pair_contributions(h, g).sum() - hit.score))
    if precision == "bf16":
        # the check can fail: the hit run on its own takes other kernels and misses the score
        assert max(alone) > W.SAME_SCORE
    else:
        assert max(alone) < W.SAME_SCORE


def test_a_store_of_fp32_vectors_queried_in_bf16(small_model, tmp_path, emulated_bf16):
    """A store may mix precisions (PRECISION_POLICY): the hit runs in the one its vector was made in."""
    from index.corpus.door import search
    fp32 = fresh_backend("scratch", small_model, "fp32")
    store = build_store(tmp_path / "store", fp32, corpus(12))
    bf16 = fresh_backend("scratch", small_model, "bf16")
    try:
        hits, _ = search(store, QUERY, 4, bf16)
    finally:
        store.close()
    for hit in hits:
        why = W.explain(bf16, QUERY, hit.text, "mean", hit.score)
        assert (why.query_precision, why.hit_run.precision) == ("bf16", "fp32")
        assert why.total == pytest.approx(hit.score, abs=W.SAME_SCORE)


def test_cli_why_with_a_store_states_the_precision_and_the_search_score(small_model, tmp_path, capsys):
    from tests.support.tiny_models import run_cli
    src = tmp_path / "corpus.txt"
    src.write_text("\n".join(corpus(12)) + "\n", encoding="utf-8")
    folder = tmp_path / "store"
    rc, _out, err = run_cli(["ingest", str(src), "--store", str(folder), "--model", str(small_model),
                             "--quiet"], capsys)
    assert rc == 0, err
    rc, out, err = run_cli(["search", QUERY, "--store", str(folder), "-k", "2", "--json"], capsys)
    hit = json.loads(out)["results"][1]
    rc, out, err = run_cli(["why", QUERY, hit["text"], "--store", str(folder)], capsys)
    assert rc == 0, err
    assert "query fp32, hit fp32" in out
    assert f"= the search score {hit['score']:.6f}" in out
    rc, out, err = run_cli(["why", QUERY, hit["text"], "--store", str(folder), "--json"], capsys)
    res = json.loads(out)
    assert res["search_score"] == pytest.approx(hit["score"], abs=1e-7)
    assert np.sum(res["contributions"]) == pytest.approx(hit["score"], abs=W.SAME_SCORE)
    assert res["hit_run"]["precision"] == "fp32"
