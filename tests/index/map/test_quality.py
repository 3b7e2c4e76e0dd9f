"""How well a map keeps neighbours (index/map/quality.py) against brute force, and the map's
default method: UMAP where umap-learn is installed, PCA with a note where it is not."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from index.map.corpus_map import map_vectors
from index.map.projection import METHOD_ENV, default_method
from index.map.quality import neighbour_recall
from tests.support.paths import ROOT


def brute_recall(x, xy, k):
    """Full sorts of every distance, row by row: the definition, slowly."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    hits = []
    for i in range(len(x)):
        cos = x @ x[i]
        cos[i] = -np.inf
        d2 = ((xy - xy[i]) ** 2).sum(axis=1)
        d2[i] = np.inf
        high = set(np.argsort(-cos, kind="stable")[:k])
        low = set(np.argsort(d2, kind="stable")[:k])
        hits.append(len(high & low) / k)
    return float(np.mean(hits))


def test_recall_equals_brute_force_and_spans_chance_to_one():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 16)).astype(np.float32)
    xy = rng.normal(size=(300, 2))
    got = neighbour_recall(x, xy, k=10, sample=1000)
    assert got.sample == 300 and got.k == 10
    assert got.recall == pytest.approx(brute_recall(x, xy, 10), abs=1e-12)
    assert got.recall < 5 * got.chance                     # a random picture keeps ~chance
    flat = np.zeros((300, 16), np.float32)
    flat[:, :2] = rng.normal(size=(300, 2))
    flat[:, 2] = 50.0                                      # all on one far plane: cosine ~ 2-D distance
    assert neighbour_recall(flat, flat[:, :2], k=5).recall > 0.9
    sampled = neighbour_recall(x, xy, k=10, sample=100, seed=3)
    assert sampled.sample == 100 and abs(sampled.recall - got.recall) < 0.1


def test_default_is_umap_where_installed_else_pca_with_the_reason(monkeypatch):
    monkeypatch.delenv(METHOD_ENV, raising=False)
    pytest.importorskip("umap")
    assert default_method() == ("umap", "")
    monkeypatch.setitem(sys.modules, "umap", None)         # as if umap-learn were not installed
    method, note = default_method()
    assert method == "pca" and "umap-learn is not installed" in note and "pip install" in note
    x = np.random.default_rng(1).normal(size=(40, 8)).astype(np.float32)
    m = map_vectors(np.arange(40), x, [f"t{i}" for i in range(40)], clusters=2)
    assert m.method == "pca" and any("umap-learn is not installed" in n for n in m.notes)
    assert m.quality.recall == pytest.approx(brute_recall(x, m.xy.astype(np.float64), 10), abs=1e-12)
    monkeypatch.setenv(METHOD_ENV, "tsne")
    with pytest.raises(Exception, match="ENCODERSCOPE_MAP_METHOD='tsne'"):
        default_method()


def test_the_default_dependency_is_declared_for_make_run():

    import tomllib
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert any(dep.startswith("umap-learn") for dep in meta["project"]["dependencies"])


@pytest.mark.slow
def test_umap_keeps_neighbours_far_better_than_pca(monkeypatch):
    """The reason it is the default, on clustered vectors shaped like sentence embeddings."""
    pytest.importorskip("umap")
    from tests.support.store_backends import clustered
    monkeypatch.delenv(METHOD_ENV, raising=False)
    x = clustered(1500, 64, n_clusters=30, seed=0, noise=0.6)
    texts = [f"t{i}" for i in range(len(x))]
    umap_map = map_vectors(np.arange(len(x)), x, texts, clusters=4)
    pca_map = map_vectors(np.arange(len(x)), x, texts, method="pca", clusters=4)
    assert umap_map.method == "umap"
    assert umap_map.quality.recall > 2 * pca_map.quality.recall
