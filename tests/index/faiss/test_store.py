"""The vector store: exact = brute force, HNSW/SQ8 recall, changes, model checks, corruption,
round trips, locking. Fake embedder + synthetic vectors (fast); real models in test_store_cli."""
from __future__ import annotations

import json
import os
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from index.corpus import door
from index.faiss.manifest import read_manifest
from index.faiss.store import VectorStore
from index.store.errors import DuplicateText, ModelMismatch, StoreCorrupted, StoreLocked, StoreNotFound, UnknownId
from index.store.location import default_store_dir
from tests.support.paths import ROOT
from tests.support.store_backends import FakeBackend, Fingerprint, clustered

D = 32
FP = Fingerprint("fake", "f" * 64, "mean", D, True)
OTHER = Fingerprint("other-model", "0" * 64, "mean", D, True)


def brute_force(x, q, k):
    xs = x / np.linalg.norm(x, axis=1, keepdims=True)
    qs = q / np.linalg.norm(q, axis=1, keepdims=True)
    s = qs @ xs.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(s, order, axis=1)


def make(tmp_path, n=0, d=D, fp=FP, name="s", seed=0, **kw):
    store = VectorStore.open(tmp_path / name, writable=True, create=True, fingerprint=fp, **kw)
    x = clustered(n, d, seed=seed) if n else np.zeros((0, d), np.float32)
    if n:
        store.add([f"sentence {i}" for i in range(n)], x)
    return store, x


def snapshot_files(folder):
    return {p.name: p.read_bytes() for p in Path(folder).iterdir()
            if p.is_file() and p.name not in ("lock",) and not p.name.startswith("store.db-")}


# ---------------------------------------------------------------- exact search = brute force
def test_exact_search_equals_numpy_cosine_ranking(tmp_path):
    rng = np.random.default_rng(1)
    store, x = make(tmp_path, 3000)
    # Unnormalised inputs: the store normalises, cosine is what counts.
    q = clustered(3100, D)[3000:] * rng.uniform(0.5, 3.0, size=(100, 1)).astype(np.float32)
    order, scores = brute_force(x, q, 10)
    hits = store.search(q, k=10)
    assert len(hits) == 100
    for row, (o, s) in zip(hits, zip(order, scores)):
        assert [h.id - 1 for h in row] == list(o)     # ids are 1-based insertion order here
        np.testing.assert_allclose([h.score for h in row], s, atol=1e-5)
        assert [h.text for h in row] == [f"sentence {i}" for i in o]
    single = store.search(q[0], k=10)[0]
    assert [h.id for h in single] == [h.id for h in hits[0]]
    store.close()


def test_k_larger_than_corpus_and_empty_store(tmp_path):
    store, x = make(tmp_path, 0)
    assert store.search(np.ones(D), k=5)[0] == []
    store.add(["a", "b", "c"], clustered(3, D))
    hits = store.search(np.ones(D), k=50)[0]
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    store.close()


def test_results_sorted_and_metadata(tmp_path):
    store, _ = make(tmp_path, 0)
    x = clustered(4, D)
    store.add(["one", "two", "three", "four"], x,
              metadata=[{"source": "a.txt", "row": 3, "lang": "en"}, None, None, {"row": 9}])
    hits = store.search(x[0], k=4)[0]
    assert hits[0].text == "one" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[0].metadata["source"] == "a.txt" and hits[0].metadata["row"] == 3
    assert hits[0].metadata["lang"] == "en" and hits[0].metadata["added"] > 1e9
    assert all(a.score >= b.score for a, b in zip(hits, hits[1:]))
    assert hits[0].to_dict() == {"score": hits[0].score, "id": hits[0].id, "text": "one"}
    store.close()


# ---------------------------------------------------------------- approximate kinds
def test_hnsw_recall_at_10_on_clustered_vectors(tmp_path):
    n, d = 20_000, 64
    allx = clustered(n + 200, d, seed=3)
    x, q = allx[:n], allx[n:]
    fp = Fingerprint("fake", "f" * 64, "mean", d, True)
    store = VectorStore.open(tmp_path / "h", writable=True, create=True, fingerprint=fp, index="hnsw")
    store.add([f"s{i}" for i in range(n)], x)
    assert store.index_kind == "hnsw"
    order, _ = brute_force(x, q, 10)
    hits = store.search(q, k=10)
    recall = np.mean([len({h.id - 1 for h in row} & set(o)) / 10 for row, o in zip(hits, order)])
    assert recall >= 0.95, recall
    store.close()
    man = read_manifest(tmp_path / "h")
    assert man.index_kind == "hnsw" and man.index_params["M"] == 32 and "ef_search" in man.index_params


def test_sq8_recall_and_size(tmp_path):
    n, d = 5000, 64
    allx = clustered(n + 100, d, seed=4)
    x, q = allx[:n], allx[n:]
    fp = Fingerprint("fake", "f" * 64, "mean", d, True)
    sq = VectorStore.open(tmp_path / "q", writable=True, create=True, fingerprint=fp, index="sq8")
    sq.add([f"s{i}" for i in range(n)], x)
    sq.close()
    sq = VectorStore.open(tmp_path / "q")
    order, _ = brute_force(x, q, 10)
    hits = sq.search(q, k=10)
    recall = np.mean([len({h.id - 1 for h in row} & set(o)) / 10 for row, o in zip(hits, order)])
    assert recall >= 0.9, recall
    man = read_manifest(tmp_path / "q")
    assert man.index_kind == "sq8" and man.index_bytes < n * d * 4 / 2


def test_auto_switches_to_ivf_above_threshold(tmp_path):
    store, x = make(tmp_path, 300, ivf_threshold=500)
    store.save()
    assert read_manifest(tmp_path / "s").index_kind == "flat"
    assert store.pending_reindex() is None
    store.add([f"more {i}" for i in range(300)], clustered(300, D, seed=9))
    assert "ivf" in store.pending_reindex() and "600" in store.pending_reindex()
    store.save()
    assert store.pending_reindex() is None
    man = read_manifest(tmp_path / "s")
    assert man.index_kind == "ivf" and man.count == 600
    assert store.info()["index"] == "ivf"
    store.close()


@pytest.mark.parametrize("kind", ["flat", "hnsw", "sq8", "ivf"])
def test_remove_and_update_every_kind(tmp_path, kind):
    store, x = make(tmp_path, 400, index=kind)
    assert store.remove([1, 2, 99999]) == [1, 2]
    assert store.count() == 398
    assert all(h.id not in (1, 2) for h in store.search(x[0], k=20)[0])
    b = FakeBackend(dim=D)
    store.update_text(3, "a brand new text", backend=b)
    hit = store.search(b.embed(["a brand new text"])[0], k=1)[0][0]
    # The score is the exact cosine with the database's vector, whatever the index keeps.
    assert (hit.id, hit.text) == (3, "a brand new text") and hit.score == pytest.approx(1, abs=1e-5)
    store.close()
    store = VectorStore.open(tmp_path / "s")
    assert store.count() == 398 and store.get([3])[3]["text"] == "a brand new text"
    np.testing.assert_array_equal(store.index_ids(), np.sort(store.vectors()[0]))


def test_hnsw_removal_marks_deleted_without_rebuilding(tmp_path):
    store, x = make(tmp_path, 500, index="hnsw")
    graph = store._index
    store.remove([10, 11, 12])
    assert store._index is graph and graph.deleted == {10, 11, 12} and graph.stored == 500
    assert all(h.id not in (10, 11, 12) for h in store.search(x[9:12], k=10)[1])
    store.close()
    again = VectorStore.open(tmp_path / "s")
    assert again._index.deleted == {10, 11, 12} and again.count() == 497
    assert all(h.id not in (10, 11, 12) for row in again.search(x[9:12], k=10) for h in row)
    again.close()
    # Many removals compact the graph on save.
    w = VectorStore.open(tmp_path / "s", writable=True)
    w.remove(list(range(100, 300)))
    w.save()
    assert w._index.deleted == set() and w._index.stored == 297
    w.close()


# ---------------------------------------------------------------- add / dedupe / iterate / clear
def test_duplicates_stored_once(tmp_path):
    store, _ = make(tmp_path)
    x = clustered(5, D)
    r = store.add(["a", "b", "a", "c", "b"], x)
    assert (r.added, r.duplicates) == (3, 2)
    assert r.ids[0] == r.ids[2] and r.ids[1] == r.ids[4]
    r2 = store.add(["c", "d"], x[:2])
    assert (r2.added, r2.duplicates) == (1, 1) and r2.ids[0] == r.ids[3]
    assert store.count() == 4
    with pytest.raises(DuplicateText):
        store.update_text(r.ids[0], "b", x[0])
    with pytest.raises(UnknownId):
        store.update_text(12345, "zzz", x[0])
    store.close()


def test_add_texts_embeds_only_new_texts_and_counts_truncation(tmp_path):
    b = FakeBackend(dim=D, max_words=3)
    store, _ = make(tmp_path)
    r = store.add_texts(["one", "two", "one", "a much longer sentence here"], b, batch_size=2)
    assert (r.added, r.duplicates, r.truncated) == (3, 1, 1)
    assert b.embedded == 3
    r = store.add_texts(["two", "three"], b)
    assert (r.added, r.duplicates) == (1, 1) and b.embedded == 4
    assert r.ids[0] == door.search(store, "two", 1, b)[0][0].id
    store.close()


def test_cancel_keeps_committed_batches(tmp_path):
    b = FakeBackend(dim=D)
    b.cancel_after = 50          # the third window of 20 is cancelled while it is embedded
    store, _ = make(tmp_path)
    r = store.add_texts([f"t{i}" for i in range(100)], b, batch_size=10, window=20)
    assert r.cancelled and r.added == 40 and b.embedded == 40
    assert [t["text"] for t in store.iter()] == [f"t{i}" for i in range(40)]   # a prefix
    store.close()
    assert VectorStore.open(tmp_path / "s").count() == 40


def test_iterate_count_clear(tmp_path):
    store, x = make(tmp_path, 50)
    recs = list(store.iter())
    assert [r["id"] for r in recs] == list(range(1, 51)) and len(store) == 50
    assert recs[0]["text"] == "sentence 0"
    store.clear()
    assert store.count() == 0 and store.search(x[0], k=3)[0] == []
    r = store.add(["after clear"], x[:1])
    assert r.ids == [51]           # ids are never reused
    store.close()
    assert VectorStore.open(tmp_path / "s").count() == 1


# ---------------------------------------------------------------- model identity
def test_foreign_model_is_refused_naming_both_models(tmp_path):
    store, x = make(tmp_path, 20)
    with pytest.raises(ModelMismatch, match=r"(?s)other-model.*fake"):
        store.add(["x"], x[:1], fingerprint=OTHER)
    with pytest.raises(ModelMismatch, match=r"(?s)other-model.*fake"):
        store.search(x[0], fingerprint=OTHER)
    with pytest.raises(ModelMismatch, match="other-model"):
        door.search(store, "a query", 10, FakeBackend("other-model", D, "0" * 64))
    with pytest.raises(ModelMismatch, match="dimensions"):
        store.search(np.ones(D + 1))
    with pytest.raises(ModelMismatch):   # same weights, other pooling: other vectors
        store.add_texts(["x"], FakeBackend(), pooling="cls")
    store.close()
    with pytest.raises(ModelMismatch) as e:
        VectorStore.open(tmp_path / "s", fingerprint=OTHER)
    assert "other-model" in str(e.value) and "fake" in str(e.value) and "re-embed" in str(e.value)
    assert e.value.rebuild == {"model": "other-model", "pooling": "mean", "location": str(tmp_path / "s")}
    # Same weights under another name are the same model.
    VectorStore.open(tmp_path / "s", fingerprint=Fingerprint("renamed", "f" * 64, "mean", D)).close()


def test_rebuild_reembeds_with_another_model(tmp_path):
    a = FakeBackend("model-a", D, "a" * 64)
    store = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=a.fingerprint())
    texts = [f"text number {i}" for i in range(300)]
    store.add_texts(texts, a, batch_size=64)
    b = FakeBackend("model-b", 48, "b" * 64)
    store.rebuild(b, batch_size=64)
    assert store.dim == 48 and store.model_name == "model-b" and store.count() == 300
    assert door.search(store, "text number 7", 1, b)[0][0].text == "text number 7"
    with pytest.raises(ModelMismatch):
        door.search(store, "text number 7", 10, a)
    store.close()
    s = VectorStore.open(tmp_path / "s", fingerprint=b.fingerprint())
    assert door.search(s, "text number 9", 1, b)[0][0].text == "text number 9"
    assert read_manifest(tmp_path / "s").fingerprint["model"] == "model-b"


# ---------------------------------------------------------------- persistence
@pytest.mark.parametrize("kind", ["flat", "hnsw", "sq8"])
def test_round_trip_identical_results(tmp_path, kind):
    store, x = make(tmp_path, 2000, index=kind)
    q = clustered(2050, D)[2000:]
    before = store.search(q, k=10)
    store.close()
    again = VectorStore.open(tmp_path / "s")
    assert again.index_kind == kind
    after = again.search(q, k=10)
    assert [[(h.id, h.text) for h in r] for r in after] == [[(h.id, h.text) for h in r] for r in before]
    np.testing.assert_allclose([[h.score for h in r] for r in after],
                               [[h.score for h in r] for r in before], atol=1e-6)
    man = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert {"format_version", "fingerprint", "dim", "metric", "index_kind", "index_params",
            "count", "index_sha256", "generation"} <= set(man)
    assert man["count"] == 2000 and man["metric"] == "cosine"


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_snapshot_behind_database_is_caught_up(tmp_path, kind):
    """A crash between an SQLite commit and the index snapshot: the next open catches up."""
    store, x = make(tmp_path, 100, index=kind)
    store.save()
    store.add([f"late {i}" for i in range(30)], clustered(30, D, seed=5))
    store.remove([5])
    # Simulated crash: no save, no close.
    store._db.close()
    store._lock.release()
    reader = VectorStore.open(tmp_path / "s")            # readers catch up in memory
    assert reader.count() == 129 and reader._index.ntotal == 129
    assert all(h.id != 5 for h in reader.search(x[4:5], k=5)[0])
    man_gen = read_manifest(tmp_path / "s").generation
    writer = VectorStore.open(tmp_path / "s", writable=True)   # writers also save it
    assert read_manifest(tmp_path / "s").generation > man_gen
    np.testing.assert_array_equal(writer.index_ids(), np.sort(writer.vectors()[0]))
    writer.close()


def test_opening_missing_store(tmp_path):
    with pytest.raises(StoreNotFound, match="no store") as e:
        VectorStore.open(tmp_path / "nothing")
    assert e.value.location == str(tmp_path / "nothing")
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(Exception, match="not empty"):
        VectorStore.open(tmp_path / "busy", writable=True, create=True, fingerprint=FP)


def test_default_store_dir_is_user_data(monkeypatch, tmp_path):
    import platformdirs
    monkeypatch.delenv("ENCODERSCOPE_DATA_DIR", raising=False)
    monkeypatch.setattr(platformdirs, "user_data_dir", lambda *a, **k: str(tmp_path / "ud"))
    assert default_store_dir() == tmp_path / "ud" / "stores" / "default"
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "elsewhere"))
    assert default_store_dir() == tmp_path / "elsewhere" / "stores" / "default"


# ---------------------------------------------------------------- corruption
def _corrupt_store(tmp_path):
    store, x = make(tmp_path, 200, index="hnsw")    # a kind with a snapshot file (flat has none)
    store.close()
    folder = tmp_path / "s"
    return folder, read_manifest(folder), x


@pytest.mark.parametrize("damage,match", [
    ("flip_index", "damaged: its checksum"),
    ("truncate_index", "truncated"),
    ("delete_index", "missing"),
    ("foreign_index", "truncated or overwritten"),
    ("garbage_manifest", "manifest .* damaged or truncated"),
    ("truncate_manifest", "manifest .* damaged or truncated"),
    ("foreign_manifest", "not an Encoderscope store manifest"),
    ("edited_manifest", "manifest .* damaged: its checksum does not match"),
    ("garbage_db", "store.db is damaged or not an SQLite database"),
    ("truncate_db", "store.db"),
    ("foreign_db", "not an Encoderscope store"),
])
def test_corruption_gives_specific_error_and_leaves_files(tmp_path, damage, match):
    folder, man, x = _corrupt_store(tmp_path)
    idx = folder / man.index_file
    db = folder / "store.db"
    mf = folder / "manifest.json"
    if damage == "flip_index":
        b = bytearray(idx.read_bytes())
        b[len(b) // 2] ^= 0xFF
        idx.write_bytes(bytes(b))
    elif damage == "truncate_index":
        idx.write_bytes(idx.read_bytes()[:-100])
    elif damage == "delete_index":
        idx.unlink()
    elif damage == "foreign_index":
        idx.write_bytes(b"PK\x03\x04 this is a zip file, not an index")
    elif damage == "garbage_manifest":
        mf.write_bytes(os.urandom(64))
    elif damage == "truncate_manifest":
        mf.write_bytes(mf.read_bytes()[:40])
    elif damage == "foreign_manifest":
        mf.write_text(json.dumps({"name": "some other tool", "version": 3}))
    elif damage == "edited_manifest":   # still valid JSON, one value changed
        mf.write_text(mf.read_text().replace('"generation": ', '"generation": 9'))
    elif damage == "garbage_db":
        b = bytearray(db.read_bytes())
        b[:100] = os.urandom(100)
        db.write_bytes(bytes(b))
    elif damage == "truncate_db":
        db.write_bytes(db.read_bytes()[: len(db.read_bytes()) // 3])
    elif damage == "foreign_db":
        db.unlink()
        c = sqlite3.connect(db)
        c.execute("CREATE TABLE songs(x)")
        c.commit()
        c.close()
    before = snapshot_files(folder)
    for writable in (False, True):
        with pytest.raises(StoreCorrupted, match=match) as e:
            VectorStore.open(folder, writable=writable)
        assert e.value.path is not None
    assert snapshot_files(folder) == before     # the last good snapshot is left untouched
    if damage.endswith(("_index", "_manifest")):
        assert e.value.remedy == "repair" and "encoderscope" not in str(e.value)
        # The sentences and vectors are intact: repair rebuilds the index (and manifest) from them.
        store = VectorStore.open(folder, writable=True, repair=True)
        assert store.count() == 200 and store.search(x[7], k=1)[0][0].text == "sentence 7"
        store.close()
        VectorStore.open(folder).close()


def test_repair_never_overwrites_another_format_version(tmp_path):
    folder, man, x = _corrupt_store(tmp_path)
    mf = folder / "manifest.json"
    d = json.loads(mf.read_text())
    d.update(format_version=4, manifest_sha256=None)
    mf.write_text(json.dumps(d))
    before = snapshot_files(folder)
    with pytest.raises(StoreCorrupted, match="format version 4") as e:
        VectorStore.open(folder, writable=True, repair=True)
    assert e.value.remedy is None
    assert snapshot_files(folder) == before


def test_store_files_follow_the_umask(tmp_path):
    """Index and manifest are as readable as store.db (temp files are not left 0600)."""
    old = os.umask(0o022)
    try:
        make(tmp_path, 300, index="hnsw")[0].close()     # hnsw: a snapshot file; 300 rows: a log
    finally:
        os.umask(old)
    folder = tmp_path / "s"
    modes = {p.name.split("-")[0]: p.stat().st_mode & 0o777 for p in folder.iterdir()
             if p.name != "lock"}
    assert modes == {"store.db": 0o644, "index": 0o644, "manifest.json": 0o644, "vectors": 0o644}, modes
    assert not list(folder.glob(".*.tmp"))


# ---------------------------------------------------------------- search settings
def test_blas_threshold_and_single_query_threads(tmp_path, monkeypatch):
    """faiss's BLAS threshold is set low for batches; a single query runs on one thread and
    the caller's thread count is restored (batches keep all threads)."""
    import faiss

    from index.faiss import faiss_index

    assert faiss.cvar.distance_compute_blas_threshold == faiss_index.BLAS_THRESHOLD <= 16
    store, x = make(tmp_path, 200)
    seen = []
    real_search = faiss.IndexIDMap2.search

    def spy(self, *a, **k):
        seen.append(faiss.omp_get_max_threads())
        return real_search(self, *a, **k)
    monkeypatch.setattr(faiss.IndexIDMap2, "search", spy)
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        store.search(x[0], k=3)
        store.search(x[:8], k=3)
        assert seen == [faiss_index.SINGLE_QUERY_THREADS, 2]
        assert faiss.omp_get_max_threads() == 2
    finally:
        faiss.omp_set_num_threads(before)
    store.close()


# ---------------------------------------------------------------- one writer at a time
def test_second_writer_is_refused_readers_are_not(tmp_path):
    store, x = make(tmp_path, 10)
    with pytest.raises(StoreLocked, match=rf"process {os.getpid()}.*one writer"):
        VectorStore.open(tmp_path / "s", writable=True)
    reader = VectorStore.open(tmp_path / "s")
    assert reader.count() == 10
    store.close()
    VectorStore.open(tmp_path / "s", writable=True).close()


def test_read_only_store_refuses_changes(tmp_path):
    make(tmp_path, 3)[0].close()
    reader = VectorStore.open(tmp_path / "s")
    with pytest.raises(Exception, match="read-only"):
        reader.add(["x"], np.ones((1, D)))


def test_no_pickle_no_qt_in_index():
    root = ROOT / "index"
    for p in root.glob("*.py"):
        src = p.read_text()
        assert not re.search(r"^\s*(import|from)\s+(pickle|cPickle|dill|joblib)", src, re.M), p
        assert not re.search(r"^\s*(import|from)\s+(PySide6|PyQt\d|pyqtgraph)", src, re.M), p


# ---------------------------------------------------------------- a flat index over the vector log
def test_a_flat_index_is_built_from_the_log_and_never_written_as_a_second_copy(tmp_path):
    store, x = make(tmp_path, 60)
    store.reindex("hnsw")                   # a kind with a snapshot file first...
    folder = tmp_path / "s"
    assert len(list(folder.glob("index-*.faiss"))) == 1
    store.reindex("flat")                   # ...then flat: the file goes, the manifest names none
    store.close()
    assert not list(folder.glob("index-*.faiss"))
    man = read_manifest(folder)
    assert (man.index_kind, man.index_file, man.index_sha256, man.index_bytes, man.count) == \
        ("flat", None, None, 0, 60)
    with VectorStore.open(folder, verify=True) as r:       # built from the database, checked whole
        assert r.index_kind == "flat" and r.check_report["damaged"] == []
        assert r.index_ids().tolist() == list(range(1, 61))
        hit = r.search(x[7], k=1)[0][0]
        assert (hit.text, round(hit.score, 5)) == ("sentence 7", 1.0)
    # Committed after the last save (a writer cut off before it): a reader is current at once.
    w = VectorStore.open(folder, writable=True)
    w.add(["one more sentence"], x[:1] * -1)
    with VectorStore.open(folder) as r:
        assert r.count() == 61 and r.search(-x[0], k=1)[0][0].text == "one more sentence"
    w.close()
    assert read_manifest(folder).count == 61 and not list(folder.glob("index-*.faiss"))


def test_small_windows_keep_their_vectors_in_their_rows_large_ones_go_to_the_log(tmp_path):
    """A transaction of fewer than LOG_MIN_ROWS vectors pays no fsync of a log (a small ingest
    costs what it did before the log); a large one appends to the log. Both kinds read back."""
    from index.faiss.sentences import LOG_MIN_ROWS
    store, x = make(tmp_path, 2)
    folder = tmp_path / "s"
    assert not list(folder.glob("vectors-*.f32"))
    big = clustered(LOG_MIN_ROWS, D, seed=3)
    store.add([f"large window {i}" for i in range(LOG_MIN_ROWS)], big)
    store.close()
    (log,) = folder.glob("vectors-*.f32")
    c = sqlite3.connect(folder / "store.db")
    kinds = c.execute("SELECT slot IS NULL, COUNT(*) FROM sentences GROUP BY 1 ORDER BY 1").fetchall()
    c.close()
    assert kinds == [(0, LOG_MIN_ROWS), (1, 2)] and log.stat().st_size == 64 + LOG_MIN_ROWS * D * 4
    with VectorStore.open(folder, verify=True) as r:
        ids, vecs = r.vectors()
        np.testing.assert_array_equal(vecs, np.concatenate([x, big]))
