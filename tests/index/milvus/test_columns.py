"""New Milvus rows written as columns (index/milvus/columns.py): the request carries what the row
insert would, the store's adds go through it in few requests, and a pymilvus without the pieces
still stores every row (through MilvusClient.insert)."""
from __future__ import annotations

import numpy as np
import pytest

from index.milvus.columns import Columns, chunk_bounds, packed_float_array
from index.opening import open_store
from tests.support.store_backends import Fingerprint

D = 24
FP = Fingerprint("fake", "c" * 64, "mean", D, True)

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
    HAVE_MILVUS = True
except ImportError:
    HAVE_MILVUS = False
needs_milvus = pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra")


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal((n, D)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def columns(n: int, texts=None) -> Columns:
    texts = texts or [f"text {i}" for i in range(n)]
    return Columns(list(range(1, n + 1)), unit_rows(n), texts, [f"{i:032x}" for i in range(n)],
                   [None] * n, [None] * n, [0.0] * n, [None] * n)


@needs_milvus
def test_packed_vectors_are_the_float_array_protobuf_builds():
    from pymilvus.grpc_gen import schema_pb2
    for n in (1, 3, 700):           # 700 x 24 floats: a length of two varint bytes
        x = unit_rows(n)
        ours = schema_pb2.FloatArray.FromString(packed_float_array(x))
        theirs = schema_pb2.FloatArray()
        theirs.data.extend(x.ravel().tolist())
        assert ours == theirs
        assert np.array_equal(np.array(ours.data, dtype=np.float32).reshape(n, D), x)


def test_chunks_cover_every_row_once_within_both_caps():
    texts = ["a" * (1000 if i % 7 else 50_000) for i in range(300)]
    cols = columns(300, texts)
    cap = 400_000
    bounds = chunk_bounds(cols, max_bytes=cap, max_rows=64)
    assert [b for a, b in bounds][:-1] == [a for a, b in bounds][1:]
    assert bounds[0][0] == 0 and bounds[-1][1] == 300
    for a, b in bounds:
        assert b - a <= 64
        size = sum(D * 4 + 64 + 4 * len(t) for t in texts[a:b])
        assert size <= cap or b - a == 1           # one row larger than the cap goes alone
    # a row larger than the whole cap is a chunk of its own, never dropped
    assert chunk_bounds(columns(3, ["x" * 10, "y" * 500_000, "z"]), max_bytes=1000) == [(0, 1), (1, 2), (2, 3)]


def lite(tmp_path, name="store"):
    return open_store(f"milvus-lite:{tmp_path / name}", writable=True, create=True, fingerprint=FP)


def records(store) -> dict:
    """id -> (text, metadata, vector) of every stored row."""
    out = {}
    for ids, vecs, recs in store.iter_batches(1000, vectors=True):
        for i, v, r in zip(ids, vecs, recs):
            out[int(i)] = (r["text"], r["metadata"], np.asarray(v, dtype=np.float32))
    return out


def sample(n: int):
    texts = [f"sentence {i}, with words é{i}" for i in range(n)]
    metas = [None if i % 3 == 0 else
             {"source": f"file{i % 2}.txt", "row": i, "added": 1000.0 + i} if i % 3 == 1 else
             {"source": "notes.txt", "tag": f"t{i}", "score": i / 2} for i in range(n)]
    return texts, metas, unit_rows(n, seed=1)


@needs_milvus
def test_adds_go_as_column_requests_and_read_back_as_the_row_path_stores_them(tmp_path, monkeypatch):
    """The same texts, metadata and vectors through the column writer and through
    MilvusClient.insert (as a pymilvus without the pieces would): identical records and
    vectors, bit for bit; the column store made one request for its 50 rows."""
    from index.milvus import columns as columns_mod
    texts, metas, vecs = sample(50)
    sent = []
    real_insert = columns_mod.ColumnWriter.insert

    def counting_insert(self, cols, timeout=None):
        sent.append(len(cols))
        return real_insert(self, cols, timeout=timeout)
    counting_insert.__name__ = "insert"        # what the store's Caller fences as a write
    monkeypatch.setattr(columns_mod.ColumnWriter, "insert", counting_insert)
    a = lite(tmp_path, "columns")
    try:
        a.add(texts, vecs, metas)
        a.save()
        got_a = records(a)
    finally:
        a.close()
    assert sent == [50]

    from index.milvus import store as store_mod
    monkeypatch.setattr(store_mod, "column_writer", lambda *_a, **_k: None)
    b = lite(tmp_path, "rows")
    try:
        b.add(texts, vecs, metas)
        b.save()
        got_b = records(b)
    finally:
        b.close()
    assert sent == [50]                      # the row path did not use the column writer
    assert got_a.keys() == got_b.keys() == set(range(1, 51))
    for i in got_a:
        (ta, ma, va), (tb, mb, vb) = got_a[i], got_b[i]
        assert ta == tb == texts[i - 1]
        if metas[i - 1] and "added" in metas[i - 1]:
            assert ma == mb
        else:                                # stamped with the time of the add: the rest agrees
            assert {k: v for k, v in ma.items() if k != "added"} == {k: v for k, v in mb.items() if k != "added"}
        assert np.array_equal(va, vb) and np.array_equal(va, vecs[i - 1])
    assert got_a[2][1] == {"source": "file1.txt", "row": 1, "added": 1001.0}
    assert got_a[3][1]["tag"] == "t2" and got_a[3][1]["score"] == 1.0 and got_a[3][1]["row"] is None


@needs_milvus
def test_a_stream_in_column_requests_keeps_duplicates_out_and_ids_in_order(tmp_path):
    """add_stream through the column writer: every text once (repeats within and across
    windows, and of rows already stored), ids in input order, search finds a row's own text."""
    from tests.support.store_backends import FakeBackend
    backend = FakeBackend(dim=D, weights="c" * 64)
    texts = [f"line {i % 700}" for i in range(1500)]           # 800 repeats
    s = lite(tmp_path)
    try:
        first = s.add_stream(texts[:300], backend)
        rest = s.add_stream(texts, backend, window=256)
        assert first.added == 300 and rest.added == 400 and rest.duplicates == 1100
        assert s.count() == 700
        stored = records(s)
        assert sorted(t for t, _, _ in stored.values()) == sorted(set(texts))
        assert [stored[i][0] for i in range(1, 701)] == [f"line {i}" for i in range(700)]
        hit = s.search(backend.embed(["line 123"]), k=1)[0][0]
        assert hit.text == "line 123"
    finally:
        s.close()
