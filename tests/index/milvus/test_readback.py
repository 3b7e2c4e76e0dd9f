"""Reading rows back from Milvus pairs every id with its own vector (issue 16, item 1).

pymilvus 3 fills a result row's vector lazily, from the row's position in the returned list;
the store used to sort that list in place before reading the vectors, so whenever Milvus
returned rows out of id order (after a crash recovery, or rows inserted out of id order and
flushed to several segments) `iter_batches` — what migrate copies — paired ids with other
rows' vectors while search stayed right. These tests make Milvus return rows out of id order
on purpose and check every row's vector against the vector its text was stored with.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests.support.store_backends import FakeBackend

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
    HAVE_MILVUS = True
except ImportError:
    HAVE_MILVUS = False
pytestmark = pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra")

D = 16


def _out_of_order_store(path):
    """A Lite store whose rows sit in two segments, the later ids in the first one."""
    from index.opening import open_store
    b = FakeBackend(dim=D)
    store = open_store(f"milvus-lite:{path}", create=True, fingerprint=b.fingerprint())
    late = [f"sentence {i} of the late block" for i in range(101, 301)]
    early = [f"sentence {i} of the early block" for i in range(1, 101)]
    store.add(late, b.embed(late), ids=list(range(101, 301)))
    store.save()                      # segment 1: ids 101..300
    store.add(early, b.embed(early), ids=list(range(1, 101)))
    store.save()                      # segment 2: ids 1..100
    return store, b


def _mismatches(ids, vecs, recs, b) -> list[int]:
    ref = b.embed([r["text"] for r in recs])
    cos = np.einsum("ij,ij->i", ref, vecs)
    return [int(i) for i, c in zip(ids, cos) if abs(c - 1.0) > 1e-4]


def test_milvus_returns_these_rows_out_of_id_order(tmp_path):
    """The premise of the next test: a plain query does not come back in id order."""
    store, _b = _out_of_order_store(tmp_path / "s")
    try:
        rows = store._client.query(store._name, filter="id >= 0 and id < 1000",
                                   output_fields=["id"], limit=1000)
        ids = [int(r["id"]) for r in rows]
        assert ids != sorted(ids)
    finally:
        store.close()


def test_iter_batches_pairs_every_id_with_its_own_vector(tmp_path):
    store, b = _out_of_order_store(tmp_path / "s")
    try:
        seen = []
        for batch in (7, 64, 2000):
            for ids, vecs, recs in store.iter_batches(batch):
                assert [r["id"] for r in recs] == ids.tolist()
                assert _mismatches(ids, vecs, recs, b) == []
                seen += ids.tolist()
        assert seen == list(range(1, 301)) * 3
        ids, vecs = store.vectors()
        texts = store.get(ids.tolist())
        assert _mismatches(ids, vecs, [texts[int(i)] for i in ids], b) == []
    finally:
        store.close()


def test_plain_rows_reads_each_row_at_its_own_position(tmp_path):
    """pymilvus's own trap, kept visible: sorting its result list before reading it
    mixes rows up; plain_rows copies each row first."""
    from index.milvus.calls import plain_rows
    store, b = _out_of_order_store(tmp_path / "s")
    try:
        def query():
            return store._client.query(store._name, filter="id >= 0 and id < 1000",
                                       output_fields=["id", "text", "vector"], limit=1000)

        def bad(rows):
            return _mismatches([r["id"] for r in rows],
                               np.asarray([r["vector"] for r in rows], np.float32), rows, b)

        rows = plain_rows(query())
        rows.sort(key=lambda r: r["id"])
        assert bad(rows) == []
        raw = query()
        raw.sort(key=lambda r: r["id"])      # what the store used to do
        if not bad(raw):
            pytest.skip("this pymilvus fills rows eagerly; the trap is gone")
    finally:
        store.close()
