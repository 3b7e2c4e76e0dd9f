"""The corpus map (index/map/corpus_map.py + `encoderscope map`): PCA against NumPy's SVD, every
id once, k-means stable and right on planted clusters, labels, CSV round trip, CLI."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from index.faiss.store import VectorStore
from index.map.clusters import distinctive_words, kmeans, words_of
from index.map.corpus_map import build_map, map_vectors, read_map_csv, write_map_csv
from index.map.projection import fit_pca
from tests.support.paths import ROOT
from tests.support.store_backends import Fingerprint, clustered

D = 32
FP = Fingerprint("fake", "f" * 64, "mean", D, True)
TOPICS = ["the planet Jupiter has many moons", "a strong coffee in the morning",
          "the train to Paris was delayed", "she played a guitar song on stage"]


def planted(n_per=60, k=4, d=D, seed=0, spread=0.05):
    """k tight groups of unit vectors around random centres: (vectors, group of each row)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    group = np.repeat(np.arange(k), n_per)
    x = centres[group] + spread * rng.normal(size=(len(group), d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), group


def make_store(tmp_path, texts, vectors, name="s"):
    store = VectorStore.open(tmp_path / name, writable=True, create=True, fingerprint=FP)
    store.add(texts, vectors)
    store.save()
    return store


# ---- PCA -------------------------------------------------------------------------------------
def test_pca_equals_numpy_svd_up_to_sign():
    x = clustered(700, D, seed=3)
    m = map_vectors(np.arange(len(x)), x, [f"t{i}" for i in range(len(x))], clusters=3)
    xc = x.astype(np.float64) - x.astype(np.float64).mean(axis=0)
    _, s, vt = np.linalg.svd(xc, full_matrices=False)
    ref = xc @ vt[:2].T
    for axis in range(2):
        sign = np.sign(ref[:, axis] @ m.xy[:, axis])
        np.testing.assert_allclose(m.xy[:, axis], sign * ref[:, axis], atol=2e-5)
    np.testing.assert_allclose(m.explained_variance, (s[:2] ** 2) / (s ** 2).sum(), rtol=1e-6)


def test_pca_sign_rule_and_row_order_do_not_change_the_axes():
    x = clustered(400, D, seed=5)
    a = fit_pca(x)
    b = fit_pca(x[np.random.default_rng(0).permutation(len(x))])
    np.testing.assert_allclose(a.components, b.components, atol=1e-9)
    for row in a.components:                       # largest loading positive (documented rule)
        assert row[np.abs(row).argmax()] > 0
    flipped = fit_pca(-x)                          # mirrored data: same axes, mirrored points
    np.testing.assert_allclose(flipped.components, a.components, atol=1e-9)
    np.testing.assert_allclose(flipped.project(-x), -a.project(x), atol=1e-5)


def test_pca_of_one_and_two_points():
    one = fit_pca(clustered(1, D))
    assert np.all(one.project(clustered(1, D)) == 0) and list(one.explained_variance) == [0, 0]
    two = clustered(2, D, seed=1)
    xy = fit_pca(two).project(two)
    assert xy[0, 0] == pytest.approx(-xy[1, 0], abs=1e-6)
    assert np.linalg.norm(xy[0] - xy[1]) == pytest.approx(np.linalg.norm(two[0] - two[1]), rel=1e-5)


# ---- the store: every id once ------------------------------------------------------------
def test_every_id_in_the_store_appears_once(tmp_path):
    x = clustered(2500, D, seed=2)
    texts = [f"sentence {i}" for i in range(len(x))]
    store = make_store(tmp_path, texts, x)
    gone = store.remove(list(range(100, 400)) + [7])
    assert len(gone) == 301
    expected = {rec["id"]: rec["text"] for rec in store.iter()}
    m = build_map(store, clusters=5)
    assert len(m) == len(expected) == 2199
    assert len(set(m.ids.tolist())) == len(m)
    assert dict(zip(m.ids.tolist(), m.texts)) == expected
    # each row's coordinates are its own vector's projection
    ids, vecs = store.vectors()
    where = {i: k for k, i in enumerate(ids.tolist())}
    own = m.projection.project(vecs[[where[i] for i in m.ids.tolist()]])
    np.testing.assert_allclose(m.xy, own, atol=1e-6)
    store.close()


def test_empty_store_and_bad_cluster_counts(tmp_path):
    from core.errors import InputError
    from index.map.corpus_map import EmptyStore
    store = make_store(tmp_path, [], np.zeros((0, D), np.float32))
    with pytest.raises(EmptyStore, match="no sentences"):
        build_map(store)
    store.close()
    x, _ = planted(n_per=1, k=3)
    with pytest.raises(InputError, match="at least 1"):
        map_vectors([1, 2, 3], x, ["a", "b", "c"], clusters=0)
    m = map_vectors([1, 2, 3], x, ["alpha", "beta", "gamma"], clusters=8)
    assert len(m.clusters) == 3 and sorted(m.cluster.tolist()) == [0, 1, 2]
    assert "8 clusters asked for" in m.notes[0]


# ---- k-means and labels ----------------------------------------------------------------------
def test_kmeans_recovers_planted_groups_and_is_stable_for_a_seed():
    x, group = planted(n_per=80, k=5, seed=4)
    a = kmeans(x, 5, seed=0)
    for g in range(5):                               # each planted group is one cluster
        assert len(set(a[group == g].tolist())) == 1
    assert len(set(a.tolist())) == 5
    assert np.array_equal(a, kmeans(x, 5, seed=0))
    sizes = np.bincount(a)
    assert list(sizes) == sorted(sizes, reverse=True)   # numbered by size


def test_clusters_stable_for_a_fixed_seed_on_realistic_vectors():
    x = clustered(3000, D, seed=9)
    texts = [f"t{i}" for i in range(len(x))]
    a = map_vectors(np.arange(len(x)), x, texts, clusters=12, seed=7)
    b = map_vectors(np.arange(len(x)), x, texts, clusters=12, seed=7)
    assert np.array_equal(a.cluster, b.cluster)
    assert [c.to_dict() for c in a.clusters] == [c.to_dict() for c in b.clusters]


def test_labels_are_the_over_represented_words():
    x, group = planted(n_per=30, k=4, seed=1)
    rng = np.random.default_rng(0)
    common = ["people", "today", "really", "thing"]
    texts = [f"{TOPICS[g]} and some {common[rng.integers(4)]} number {i}"
             for i, g in enumerate(group)]
    m = map_vectors(np.arange(len(x)), x, texts, clusters=4)
    for c in m.clusters:
        topic = TOPICS[int(group[m.cluster == c.id][0])]
        assert c.size == 30
        assert set(c.words) <= words_of(topic), (c.words, topic)
        assert len(c.words) == 3
    assert words_of("The cat and I, it's a CAT's 42 x-ray") == {"cat", "cat's", "ray"}
    # one cluster: no contrast, the most frequent words
    assert distinctive_words(["red apple", "red car", "blue car red"], np.zeros(3, np.int64), 1) \
        == [["red", "car", "apple"]]


# ---- CSV -----------------------------------------------------------------------------------------
def test_csv_round_trip_of_awkward_texts(tmp_path):
    texts = ['commas, "quotes" and\nnew lines', "tabs\tand ünïcödé ✓", "  spaces  ", "=1+2",
             "a\r\nwindows line", "plain"]
    x, _ = planted(n_per=2, k=3)
    m = map_vectors([10, 11, 12, 20, 21, 30], x, texts, clusters=2)
    path = tmp_path / "map.csv"
    write_map_csv(path, m)
    rows = read_map_csv(path)
    assert [r["text"] for r in rows] == texts
    assert [r["id"] for r in rows] == [10, 11, 12, 20, 21, 30]
    assert [r["cluster"] for r in rows] == m.cluster.tolist()
    assert np.array_equal(np.array([[r["x"], r["y"]] for r in rows], np.float32), m.xy)
    assert path.read_text(encoding="utf-8").splitlines()[0] == "id,x,y,cluster,text"


# ---- CLI -------------------------------------------------------------------------------------------
def cli(argv, capsys):
    from app.cli import main
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_json_and_csv(tmp_path, capsys):
    x, group = planted(n_per=25, k=3, seed=2)
    texts = [f"{TOPICS[g]}, take {i}" for i, g in enumerate(group)]
    make_store(tmp_path, texts, x).close()
    out_csv = tmp_path / "m.csv"
    rc, out, err = cli(["map", "--store", tmp_path / "s", "--clusters", 3, "--out", out_csv,
                        "--json"], capsys)
    assert rc == 0, err
    summary = json.loads(out)
    assert set(summary) == {"count", "method", "explained_variance", "neighbours", "clusters"}
    assert set(summary["neighbours"]) == {"knn_recall", "k", "sample", "chance"}
    assert 0 <= summary["neighbours"]["knn_recall"] <= 1 and summary["neighbours"]["sample"] == 75
    assert summary["count"] == 75 and summary["method"] == "pca"
    assert len(summary["explained_variance"]) == 2 and 0 < sum(summary["explained_variance"]) <= 1
    assert [set(c) for c in summary["clusters"]] == [{"id", "size", "label"}] * 3
    assert sorted(c["size"] for c in summary["clusters"]) == [25, 25, 25]
    rows = read_map_csv(out_csv)
    assert sorted(r["text"] for r in rows) == sorted(texts)
    with VectorStore.open(tmp_path / "s") as store:
        m = build_map(store, clusters=3)
    assert [r["cluster"] for r in rows] == m.cluster.tolist()

    rc, out, _ = cli(["map", "--store", tmp_path / "s", "--clusters", 3], capsys)
    assert rc == 0 and "75 sentences mapped with PCA: the axes carry" in out and "cluster  0" in out
    assert "nearest neighbours (chance" in out


def test_cli_errors_are_one_line(tmp_path, capsys, monkeypatch):
    make_store(tmp_path, [], np.zeros((0, D), np.float32), name="empty").close()
    rc, _, err = cli(["map", "--store", tmp_path / "empty"], capsys)
    assert rc == 2 and err.startswith("error: the store holds no sentences") and "Traceback" not in err
    x, _ = planted(n_per=2, k=2)
    make_store(tmp_path, ["one", "two", "three", "four"], x).close()
    rc, _, err = cli(["map", "--store", tmp_path / "s", "--out", tmp_path / "no" / "m.csv"], capsys)
    assert rc == 2 and "\nerror: cannot write" in err and "Traceback" not in err
    rc, _, err = cli(["map", "--store", tmp_path / "s", "--clusters", 0], capsys)
    assert rc == 2 and "clusters must be at least 1 (--clusters)" in err
    rc, out, err = cli(["map", "--store", tmp_path / "s", "--clusters", 9, "--json"], capsys)
    assert rc == 0 and "note: 9 clusters asked for" in err and len(json.loads(out)["clusters"]) == 4
    monkeypatch.setitem(sys.modules, "umap", None)           # umap-learn not installed
    rc, _, err = cli(["map", "--store", tmp_path / "s", "--method", "umap"], capsys)
    assert rc == 2 and "pip install 'encoderscope[umap]'" in err and "umap-learn" in err


def test_the_umap_extra_is_declared_as_the_message_says():
    import tomllib

    from index.map.projection import UMAP_INSTALL
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extra = UMAP_INSTALL.split("[")[1].split("]")[0]
    assert any(dep.startswith("umap-learn") for dep in
               meta["project"]["optional-dependencies"][extra])
    assert meta["project"]["name"] == UMAP_INSTALL.split("'")[1].split("[")[0]


@pytest.mark.slow
def test_umap_map_when_installed(tmp_path):
    pytest.importorskip("umap")
    x, group = planted(n_per=40, k=3, seed=6)
    m = map_vectors(np.arange(len(x)), x, [f"t{i}" for i in range(len(x))], method="umap",
                    clusters=3)
    assert m.method == "umap" and m.explained_variance is None and m.xy.shape == (120, 2)
    centres = np.array([m.xy[group == g].mean(axis=0) for g in range(3)])
    spread = max(np.linalg.norm(m.xy[group == g] - centres[g], axis=1).max() for g in range(3))
    gaps = [np.linalg.norm(centres[a] - centres[b]) for a in range(3) for b in range(a + 1, 3)]
    assert min(gaps) > spread                        # planted groups stay apart on the map
    assert m.projection.project(x[:2]).shape == (2, 2)


def test_a_milvus_lite_store_maps_like_the_faiss_store(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    from index.opening import open_store
    x, group = planted(n_per=20, k=3, seed=8)
    texts = [f"{TOPICS[g]} ({i})" for i, g in enumerate(group)]
    faiss_store = make_store(tmp_path, texts, x)
    lite = open_store(f"milvus-lite:{tmp_path / 'lite'}", create=True, fingerprint=FP)
    try:
        lite.add(texts, x)
        lite.save()
        a, b = build_map(faiss_store, clusters=3), build_map(lite, clusters=3)
    finally:
        lite.close()
        faiss_store.close()
    ta, tb = dict(zip(a.texts, a.xy.tolist())), dict(zip(b.texts, b.xy.tolist()))
    assert sorted(ta) == sorted(tb) == sorted(texts)
    np.testing.assert_allclose([ta[t] for t in texts], [tb[t] for t in texts], atol=1e-5)
    assert [c.to_dict() for c in a.clusters] == [c.to_dict() for c in b.clusters]


def test_a_failed_csv_write_keeps_the_old_map_whole(tmp_path, monkeypatch):
    import errno

    from index.map import corpus_map
    x, _ = planted(n_per=2, k=3)
    m = map_vectors([1, 2, 3, 4, 5, 6], x, [f"s{i}" for i in range(6)], clusters=2)
    path = tmp_path / "map.csv"
    write_map_csv(path, m)
    before = path.read_bytes()

    def full(f, m):                    # the header, then the disk is full
        f.write(",".join(corpus_map.CSV_HEADER) + "\n")
        f.flush()
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(corpus_map, "_write_rows", full)
    with pytest.raises(OSError):
        write_map_csv(path, m)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["map.csv"]
