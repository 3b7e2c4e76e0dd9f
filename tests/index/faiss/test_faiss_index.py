"""The ivf index kind (IVF + 8-bit or RaBitQ codes + fp16 re-rank) and chunked builds with
progress and cancel: recall against brute-force numpy, ids, removals, files (older ones too),
the auto rule."""
from __future__ import annotations

import threading

import faiss
import numpy as np
import pytest

from core.errors import Cancelled
from index.faiss.faiss_index import (
    IVF_FP16_SCORE_ERROR,
    IVF_K_FACTOR,
    IVF_SQ8_MAX_DIM,
    FaissIndex,
    nlist_for,
    resolve_kind,
)
from index.faiss.manifest import read_manifest
from index.faiss.snapshot import _same_vectors
from index.faiss.store import VectorStore
from tests.index.faiss.test_store import brute_force, make
from tests.support.store_backends import Fingerprint, clustered

N, DIM = 20_000, 64
WIDE_N, WIDE = 10_000, 768      # above IVF_SQ8_MAX_DIM: RaBitQ codes


@pytest.fixture(scope="module")
def data():
    allx = clustered(N + 200, DIM, seed=5)
    return allx[:N], allx[N:]


@pytest.fixture(scope="module")
def built(data):
    """One ivf index over the 20k vectors, ids not positions (id = 7 * row + 100)."""
    x, _ = data
    return FaissIndex.build("ivf", DIM, {}, np.arange(N, dtype=np.int64) * 7 + 100, x)


def recall(found_ids, order):
    return np.mean([len(set(f.tolist()) & set(o.tolist())) / 10 for f, o in zip(found_ids, order)])


def test_ivf_recall_and_ids_against_numpy(data, built):
    x, q = data
    fi = built
    assert fi.nlist() == nlist_for(N) == 512 and fi.ntotal == N
    # build() calibrated nprobe on stored vectors; held-out queries must do as well.
    assert fi.params["calibrated_recall"] >= 0.97 and fi.nprobe() == fi.params["nprobe_calibrated"]
    order, scores = brute_force(x, q, 10)
    found_scores, found = fi.search(q, 10)
    assert set(found.ravel().tolist()) <= set((np.arange(N) * 7 + 100).tolist())
    assert recall((found - 100) // 7, order) >= 0.95
    # The re-rank reads fp16 vectors: a hit's score is its cosine to within fp16's rounding.
    hit = found[0, 0]
    assert abs(found_scores[0, 0] - x[(hit - 100) // 7] @ q[0]) <= IVF_FP16_SCORE_ERROR
    # A single query (its lists split between the threads) answers like the batch.
    np.testing.assert_array_equal(fi.search(q[:1], 10)[1], found[:1])


def test_ivf_re_ranks_with_fp16_rows_that_the_snapshot_check_holds_to_one_fp16_step(data, built):
    x, _ = data
    assert built.held_as() == "fp16" and "re-ranked with fp16 vectors" in built.describe()
    rows = faiss.downcast_index(faiss.downcast_index(built.index.index).refine_index)
    assert rows.code_size == 2 * DIM                      # half the exact rows' bytes
    ids = np.arange(0, N, 97)
    held = built.reconstruct(ids * 7 + 100)
    mine = x[ids]
    assert _same_vectors(mine, held, "fp16").all()
    assert not _same_vectors(mine, held, "exact").all()   # they are not the exact vectors
    # One component off by a few fp16 steps (another state of that row) is caught.
    other = mine.copy()
    other[3, 5] *= 1 + 2.0 ** -8
    assert _same_vectors(other, held, "fp16").tolist() == [i != 3 for i in range(len(ids))]


@pytest.mark.parametrize("kind", ["ivf", "sq8", "flat"])
def test_the_store_reports_each_hits_exact_cosine_whatever_the_index_keeps(tmp_path, kind):
    store, x = make(tmp_path, 3000, d=DIM, fp=Fingerprint("fake", "f" * 64, "mean", DIM, True), index=kind)
    q = clustered(3040, DIM, seed=11)[3000:]
    for qv, row in zip(q, store.search(q, k=10)):
        got = np.array([h.score for h in row])
        np.testing.assert_allclose(got, x[[h.id - 1 for h in row]] @ qv, atol=1e-6)
        assert list(got) == sorted(got, reverse=True)
    store.close()


def test_a_single_query_scans_8bit_lists_on_all_threads_and_batches_split_queries(data, built, monkeypatch):
    x, q = data
    ivf = faiss.extract_index_ivf(built.index.index)
    seen = []
    real = faiss.IndexIDMap2.search
    monkeypatch.setattr(faiss.IndexIDMap2, "search", lambda self, *a, **k:
                        seen.append((ivf.parallel_mode, faiss.omp_get_max_threads())) or real(self, *a, **k))
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(2)
    try:
        single = [built.search(q[i:i + 1], 10)[1][0] for i in range(20)]
        batch = built.search(q[:20], 10)[1]
    finally:
        faiss.omp_set_num_threads(before)
    assert seen[0] == (1, 2) and seen[-1] == (0, 2)
    np.testing.assert_array_equal(np.array(single), batch)


def test_ivf_remove_add_and_file_round_trip(data, built, tmp_path):
    x, q = data
    built.write(tmp_path / "copy.faiss")             # a copy to change
    fi = FaissIndex.read(tmp_path / "copy.faiss", "ivf", DIM, built.params)
    _, before = fi.search(q[:20], 10)
    gone = np.unique(before[:, :3])
    assert fi.remove(gone) == len(gone) and fi.ntotal == N - len(gone)
    _, after = fi.search(q[:20], 10)
    assert not set(after.ravel().tolist()) & set(gone.tolist())
    fi.add(np.array([10**6]), q[:1])                      # a new vector is found at once
    assert fi.search(q[:1], 1)[1][0, 0] == 10**6
    path = tmp_path / "i.faiss"
    fi.write(path)
    back = FaissIndex.read(path, "ivf", DIM, fi.params)
    back.deleted = set(fi.deleted)
    np.testing.assert_array_equal(back.search(q[:20], 10)[1], fi.search(q[:20], 10)[1])
    assert back.nlist() == fi.nlist() and "IVF512,SQ8" in back.describe() and back.codes() == "sq8"


@pytest.fixture(scope="module")
def wide():
    allx = clustered(WIDE_N + 100, WIDE, seed=6)
    return allx[:WIDE_N], allx[WIDE_N:], np.arange(WIDE_N, dtype=np.int64) * 5 + 1


def test_wide_ivf_uses_rabitq_codes_with_recall_marks_and_files(wide, tmp_path):
    x, q, ids = wide
    assert WIDE > IVF_SQ8_MAX_DIM
    fi = FaissIndex.build("ivf", WIDE, {}, ids, x)
    assert fi.codes() == "rabitq" and fi.k_factor() == IVF_K_FACTOR["rabitq"]
    assert f"IVF{nlist_for(WIDE_N)},RaBitQfs" in fi.describe()
    assert fi.params["calibrated_recall"] >= 0.95
    order, _ = brute_force(x, q, 10)
    scores, found = fi.search(q, 10)
    assert recall((found - 1) // 5, order) >= 0.95
    # The 1-bit codes only pick candidates: the scores are the fp16 rows' cosines.
    top = x[(found[:, 0] - 1) // 5]
    np.testing.assert_allclose(scores[:, 0], np.einsum("ij,ij->i", top, q), atol=IVF_FP16_SCORE_ERROR)
    # Removed ids are skipped by the fast-scan lists, for a batch and for one query.
    gone = np.unique(found[:, :3])
    assert fi.remove(gone) == len(gone)
    _, after = fi.search(q, 10)
    assert not set(after.ravel().tolist()) & set(gone.tolist()) and (after >= 0).all()
    assert not set(fi.search(q[:1], 10)[1].ravel().tolist()) & set(gone.tolist())
    fi.write(tmp_path / "w.faiss")
    back = FaissIndex.read(tmp_path / "w.faiss", "ivf", WIDE, fi.params)
    back.deleted = set(fi.deleted)
    assert back.codes() == "rabitq"
    np.testing.assert_array_equal(back.search(q, 10)[1], after)


def test_calibration_stops_where_more_lists_stop_helping(wide):
    """With too few candidates for the re-rank the codes cap recall below the target: the
    calibration keeps the last nprobe that still gained, instead of probing every list."""
    x, q, ids = wide
    fi = FaissIndex.build("ivf", WIDE, {"k_factor": 1}, ids, x)
    assert fi.params["calibrated_recall"] < 0.97 and fi.nprobe() < fi.nlist() // 4
    # Twice the lists buy little: the recall had stopped rising.
    order, _ = brute_force(x, q, 10)
    at = recall((fi.search(q, 10)[1] - 1) // 5, order)
    fi.params["nprobe"] = 2 * fi.nprobe()
    assert recall((fi.search(q, 10)[1] - 1) // 5, order) < at + 0.05


def old_sq8_ivf_file(path, x, ids, nlist):
    """An ivf file as the store wrote it before RaBitQ, at every width: built with faiss
    directly, the way that code did."""
    base = faiss.index_factory(x.shape[1], f"IVF{nlist}_HNSW32,SQ8", faiss.METRIC_INNER_PRODUCT)
    index = faiss.IndexIDMap2(faiss.IndexRefineFlat(base))
    index.train(x)
    index.add_with_ids(x, ids)
    faiss.write_index(index, str(path))


def test_an_older_8bit_ivf_file_of_wide_vectors_still_opens_and_searches(wide, tmp_path):
    x, q, ids = wide
    old_sq8_ivf_file(tmp_path / "old.faiss", x, ids, nlist=64)
    # That store's manifest: k_factor 4 spelled out, no "codes".
    manifest = {"nlist": "auto", "nprobe": "auto", "k_factor": 4, "built_for": WIDE_N,
                "trained_on": WIDE_N, "nprobe_calibrated": 16, "calibrated_recall": 0.99}
    fi = FaissIndex.read(tmp_path / "old.faiss", "ivf", WIDE, manifest)
    assert fi.codes() == "sq8" and fi.k_factor() == 4 and "IVF64,SQ8, nprobe 16" in fi.describe()
    # It re-ranks with the exact vectors, and the snapshot check holds them to exactness.
    assert fi.held_as() == "exact" and "re-ranked with exact vectors" in fi.describe()
    np.testing.assert_array_equal(fi.reconstruct(ids[:50]), x[:50])
    order, _ = brute_force(x, q, 10)
    _, found = fi.search(q, 10)
    assert recall((found - 1) // 5, order) >= 0.95
    gone = np.unique(found[:, :2])
    fi.remove(gone)
    assert not set(fi.search(q, 10)[1].ravel().tolist()) & set(gone.tolist())
    # k_factor "auto" (a manifest written now) resolves by the codes the file holds.
    assert FaissIndex.read(tmp_path / "old.faiss", "ivf", WIDE, {}).k_factor() == IVF_K_FACTOR["sq8"]
    # An IVF over codes the kind never writes is refused (4-bit PQ: its training takes a moment).
    pq = faiss.IndexIDMap2(faiss.IndexRefineFlat(faiss.index_factory(WIDE, "IVF16,PQ8x4", faiss.METRIC_INNER_PRODUCT)))
    pq.train(x[:2000])
    faiss.write_index(pq, str(tmp_path / "pq.faiss"))
    with pytest.raises(ValueError, match="IndexIVFPQ"):
        FaissIndex.read(tmp_path / "pq.faiss", "ivf", WIDE, {})
    # So is a re-rank over rows that are neither exact nor fp16.
    sq8_rows = faiss.IndexScalarQuantizer(WIDE, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    ivf = faiss.index_factory(WIDE, "IVF16,SQ8", faiss.METRIC_INNER_PRODUCT)
    odd = faiss.IndexIDMap2(faiss.IndexRefine(ivf, sq8_rows))
    odd.train(x[:2000])
    faiss.write_index(odd, str(tmp_path / "odd.faiss"))
    with pytest.raises(ValueError, match="re-ranks with IndexScalarQuantizer"):
        FaissIndex.read(tmp_path / "odd.faiss", "ivf", WIDE, {})


def test_build_reports_progress_and_cancels_between_chunks(data, monkeypatch):
    import index.faiss.faiss_index as fx
    monkeypatch.setattr(fx, "BUILD_CHUNK", 1000)
    x = data[0][:2500]
    seen = []
    fi = FaissIndex.build("ivf", DIM, {}, np.arange(2500), x, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1000, 2500), (2000, 2500), (2500, 2500)] and fi.ntotal == 2500
    cancel = threading.Event()

    def stop_after_first(done, total):
        cancel.set()
    with pytest.raises(Cancelled, match="after 1,000 of 2,500"):
        FaissIndex.build("hnsw", DIM, {}, np.arange(2500), x, progress=stop_after_first, cancel=cancel)


def test_auto_rule_flat_then_ivf_and_store_keeps_ids(tmp_path):
    assert resolve_kind("auto", 10, threshold=100) == "flat"
    assert resolve_kind("auto", 100, threshold=100) == "ivf"
    store, x = make(tmp_path, 900, d=DIM, fp=Fingerprint("fake", "f" * 64, "mean", DIM, True),
                    ivf_threshold=1000)
    store.save()
    assert store.index_kind == "flat" and store.pending_reindex() is None
    more = clustered(600, DIM, seed=8)
    store.add([f"more {i}" for i in range(600)], more)
    assert "ivf" in store.pending_reindex()
    store.save()
    assert store.index_kind == "ivf" and read_manifest(tmp_path / "s").index_kind == "ivf"
    order, _ = brute_force(np.concatenate([x, more]), more[:50], 10)
    hits = store.search(more[:50], k=10)
    assert recall(np.array([[h.id - 1 for h in row] for row in hits]), order) >= 0.95
    store.remove([1, 2])
    store.close()
    again = VectorStore.open(tmp_path / "s")
    assert again.index_kind == "ivf" and again.count() == 1498
    assert again._index.deleted == {1, 2}
    np.testing.assert_array_equal(again.index_ids(), np.sort(again.vectors()[0]))
    again.close()


def test_cancelled_migration_keeps_the_previous_index(tmp_path):
    fp = Fingerprint("fake", "f" * 64, "mean", DIM, True)
    store, x = make(tmp_path, 1500, d=DIM, fp=fp, ivf_threshold=1000)
    assert store.index_kind == "flat" and store.pending_reindex()
    flat = store._index
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        store.prepare_index(cancel=cancel)
    assert store._index is flat
    store.save()                     # saves the exact index as it is, no rebuild
    assert read_manifest(tmp_path / "s").index_kind == "flat"
    assert [h.id for h in store.search(x[0], k=1)[0]] == [1]
    with pytest.raises(Cancelled):
        store.reindex("hnsw", cancel=cancel)
    assert store._index is flat and store._request == "auto"
    store.close()
    # Opened again for writing, the store does the pending rebuild.
    w = VectorStore.open(tmp_path / "s", writable=True)
    assert w.index_kind == "ivf"
    w.close()


def test_ingest_reports_the_index_build_and_a_cancel_keeps_the_exact_index(tmp_path):
    from index.corpus import door
    from tests.support.store_backends import FakeBackend
    b = FakeBackend(dim=DIM)
    store = VectorStore.open(tmp_path / "s", writable=True, create=True,
                             fingerprint=b.fingerprint(), ivf_threshold=300)
    cancel = threading.Event()
    notes = []

    def progress(done, total, note):
        notes.append((done, total, note))
        if note:
            cancel.set()          # cancel as the index build is announced
    texts = [f"sentence number {i}" for i in range(400)]
    result = door.ingest(store, texts, b, progress=progress, cancel=cancel)
    assert result.added == 400 and result.cancelled
    assert notes[-1] == (400, 400, store.pending_reindex()) and "ivf" in notes[-1][2]
    assert store.index_kind == "flat" and read_manifest(tmp_path / "s").count == 400
    # Without a cancel the build runs, reporting progress in vectors.
    notes.clear()
    door.ingest(store, ["one more sentence"], b, progress=progress)
    assert store.index_kind == "ivf" and notes[-1][:2] == (401, 401)
    store.close()
