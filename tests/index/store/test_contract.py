"""The store contract, run against every implementation: the FAISS store (a folder), Milvus
Lite (milvus-lite:FOLDER) and a real Milvus server (the session's `milvus_server`, one
collection per test), all opened through index.opening.open_store.

Here: exact search = numpy brute force, identical top-k on both engines (ties aside),
duplicates, remove/count/iterate/get, update, clear, streaming adds, rebuild. The model check,
reopen, read-only, migrate and whitening: test_store_contract_model.py.
Fake embedder + synthetic vectors (fast); Milvus-only behaviour is in test_store_milvus.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from index.corpus import door
from index.store.errors import DuplicateText, ModelMismatch, UnknownId
from tests.support.store_backends import FakeBackend, clustered, text_vector
from tests.support.store_contract import (
    D,
    brute_force,
    loc,
    make,
    milvus_available,
    open_,
    untied,
)


# ---------------------------------------------------------------- exact search
def test_exact_search_equals_numpy_cosine_ranking(tmp_path, store_kind, opened):
    store, x = make(opened, tmp_path, store_kind, 1500)
    rng = np.random.default_rng(1)
    q = clustered(1530, D)[1500:] * rng.uniform(0.5, 3.0, size=(30, 1)).astype(np.float32)
    order, scores = brute_force(x, q, 10)
    hits = store.search(q, k=10)
    assert len(hits) == 30
    for row, o, s in zip(hits, order, scores):
        assert len(row) == 10
        np.testing.assert_allclose([h.score for h in row], s, atol=1e-5)
        ok = untied(s)
        assert [h.id - 1 for h, k in zip(row, ok) if k] == [i for i, k in zip(o, ok) if k]
        assert [h.text for h in row] == [f"sentence {h.id - 1}" for h in row]
        assert all(a.score >= b.score for a, b in zip(row, row[1:]))
    # one shape for every caller: a list per query, also for one query given as a vector
    single = store.search(q[0], k=10)
    assert len(single) == 1 and [h.id for h in single[0]] == [h.id for h in hits[0]]
    assert [h.id for h in store.search(q[:1], k=10)[0]] == [h.id for h in hits[0]]


@pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra")
def test_faiss_and_milvus_give_identical_top_k(tmp_path, opened):
    a, x = make(opened, tmp_path, "faiss", 2000, name="f")
    b, _ = make(opened, tmp_path, "milvus", 2000, name="m")
    q = clustered(2040, D, seed=5)[2000:]
    for ra, rb in zip(a.search(q, k=20), b.search(q, k=20)):
        np.testing.assert_allclose([h.score for h in ra], [h.score for h in rb], atol=1e-5)
        ok = untied([h.score for h in ra])
        assert [h.id for h, k in zip(ra, ok) if k] == [h.id for h, k in zip(rb, ok) if k]
        assert {h.text for h in ra if h.score > ra[-1].score + 1e-5} == \
            {h.text for h in rb if h.score > rb[-1].score + 1e-5}


def test_empty_store_and_k_larger_than_corpus(tmp_path, store_kind, opened):
    store, _ = make(opened, tmp_path, store_kind)
    assert store.count() == 0 and list(store.iter()) == []
    assert store.search(np.ones(D), k=5)[0] == []
    store.add(["a", "b", "c"], clustered(3, D))
    hits = store.search(np.ones(D), k=50)[0]
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with pytest.raises(Exception, match="k must be at least 1"):
        store.search(np.ones(D), k=0)


def test_metadata_round_trip(tmp_path, store_kind, opened):
    store, _ = make(opened, tmp_path, store_kind)
    x = clustered(4, D)
    store.add(["one", "two", "three", "four"], x,
              metadata=[{"source": "a.txt", "row": 3, "lang": "en"}, None, None, {"row": 9}])
    hits = store.search(x[0], k=4)[0]
    assert hits[0].text == "one" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    md = hits[0].metadata
    assert md["source"] == "a.txt" and md["row"] == 3 and md["lang"] == "en" and md["added"] > 1e9
    two = next(h for h in hits if h.text == "two")
    assert two.metadata["source"] is None and two.metadata["row"] is None
    assert hits[0].to_dict() == {"score": hits[0].score, "id": hits[0].id, "text": "one"}
    assert store.get([hits[0].id])[hits[0].id]["metadata"]["lang"] == "en"


# ---------------------------------------------------------------- changes
def test_duplicates_stored_once(tmp_path, store_kind, opened):
    store, _ = make(opened, tmp_path, store_kind)
    x = clustered(5, D)
    r = store.add(["a", "b", "a", "c", "b"], x)
    assert r.added == 3 and r.duplicates == 2
    assert r.ids[0] == r.ids[2] and r.ids[1] == r.ids[4] and len(set(r.ids)) == 3
    assert r.ids == [1, 2, 1, 3, 2]           # ids 1, 2, 3 in insertion order on both
    r2 = store.add(["c", "d"], x[:2])
    assert r2.added == 1 and r2.duplicates == 1 and r2.ids == [3, 4]
    assert store.count() == 4


def test_remove_count_iterate_get(tmp_path, store_kind, opened):
    store, x = make(opened, tmp_path, store_kind, 300)
    assert store.count() == len(store) == 300
    gone = store.remove([5, 7, 7, 99999])
    assert gone == [5, 7]
    assert store.count() == 298
    rows = list(store.iter())
    assert [r["id"] for r in rows] == [i for i in range(1, 301) if i not in (5, 7)]
    assert rows[0] == {"id": 1, "text": "sentence 0", "metadata": rows[0]["metadata"]}
    hit = store.search(x[4], k=1)[0][0]
    assert hit.id != 5
    got = store.get([1, 5, 300])
    assert set(got) == {1, 300} and got[300]["text"] == "sentence 299"
    # ids are never reused, even after removing the newest
    store.remove([300])
    assert store.add(["brand new"], clustered(1, D, seed=9)).ids == [301]
    # the removed text can come back (as a new id)
    assert store.add(["sentence 4"], x[4:5]).ids == [302]


def test_update_text(tmp_path, store_kind, opened):
    store, x = make(opened, tmp_path, store_kind, 50)
    v = clustered(1, D, seed=42)[0]
    store.update_text(3, "a new third sentence", v)
    assert store.get([3])[3]["text"] == "a new third sentence"
    top = store.search(v, k=1)[0][0]
    assert (top.id, top.text) == (3, "a new third sentence")
    assert store.count() == 50
    with pytest.raises(DuplicateText, match="as id 4"):
        store.update_text(3, "sentence 3", v)
    with pytest.raises(UnknownId):
        store.update_text(9999, "nothing", v)
    # the old text is free again
    assert store.add(["sentence 2"], x[2:3]).added == 1


def test_clear(tmp_path, store_kind, opened):
    store, x = make(opened, tmp_path, store_kind, 40)
    store.clear()
    assert store.count() == 0 and store.search(x[0], k=3)[0] == []
    r = store.add(["sentence 0"], x[:1])
    assert r.added == 1 and r.ids[0] > 40


def test_add_texts_embeds_only_new_and_search_by_text(tmp_path, store_kind, opened):
    b = FakeBackend(dim=D)
    store, _ = make(opened, tmp_path, store_kind, fp=b.fingerprint())
    r = store.add_texts(["the cat sat", "a dog ran", "the cat sat"], b,
                        metadata=[{"source": "x.txt", "row": 1}, None, None])
    assert r.added == 2 and r.duplicates == 1 and b.embedded == 2
    r2 = store.add_texts(["a dog ran", "birds flew"], b)
    assert r2.added == 1 and b.embedded == 3
    hits = door.search(store, "the cat sat", 2, b)[0]
    assert hits[0].text == "the cat sat" and hits[0].metadata["source"] == "x.txt"
    many = door.search_many(store, ["a dog ran", "birds flew"], 1, b)
    assert [h[0].text for h in many] == ["a dog ran", "birds flew"]


def test_cancel_keeps_committed_batches(tmp_path, store_kind, opened):
    b = FakeBackend(dim=D)
    store, _ = make(opened, tmp_path, store_kind, fp=b.fingerprint())
    b.cancel_after = 25          # the second window of 20 is cancelled while it is embedded
    r = store.add_texts([f"t{i}" for i in range(50)], b, batch_size=10, window=20)
    assert r.cancelled and r.added == 20 and store.count() == 20


class WindowBackend(FakeBackend):
    """FakeBackend that records each embed call and runs a hook inside the first one."""

    def __init__(self, *a, during_first_embed=None, **kw):
        super().__init__(*a, **kw)
        self.calls, self.during_first_embed = [], during_first_embed

    def embed(self, texts, *a, **kw):
        texts = list(texts)
        self.calls.append(texts)
        if len(self.calls) == 1 and self.during_first_embed:
            self.during_first_embed()
        return super().embed(texts, *a, **kw)


def test_add_stream_embeds_a_window_at_once_and_commits_in_order(tmp_path, store_kind, opened):
    b = WindowBackend(dim=D)
    store, _ = make(opened, tmp_path, store_kind, fp=b.fingerprint())
    store.add_texts(["stored already"], b)
    b.calls.clear()
    texts = [f"t{i}" for i in range(45)] + ["stored already", "t3"]
    seen = []
    r = store.add_texts(texts, b, batch_size=10, window=25,
                        progress=lambda done, total: seen.append((done, total)))
    # the encoder sees a window's new texts in one call (so it can sort them by length)...
    assert [len(c) for c in b.calls] == [25, 20]
    assert b.calls[1] == [f"t{i}" for i in range(25, 45)]     # repeats are not embedded
    # ...and the store gets them in input order, with each text's own vector
    assert (r.added, r.duplicates) == (45, 2)
    rows = list(store.iter())
    assert [t["text"] for t in rows][1:] == [f"t{i}" for i in range(45)]
    assert r.ids[46] == r.ids[3] and r.ids[45] == rows[0]["id"]
    for _ids, vectors, records in store.iter_batches(16):
        for v, rec in zip(vectors, records):
            np.testing.assert_allclose(v, text_vector(rec["text"], D, b.weights + "mean"), atol=1e-6)
    assert seen[-1][0] == 47 and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_add_stream_does_not_hold_the_store_while_it_embeds(tmp_path, store_kind, opened):
    import threading
    got = []

    def another_thread_uses_the_store():
        t = threading.Thread(target=lambda: got.append(store._mutex.acquire(timeout=5)
                                                       and (store._mutex.release() or True)))
        t.start()
        t.join()
    b = WindowBackend(dim=D, during_first_embed=another_thread_uses_the_store)
    store, _ = make(opened, tmp_path, store_kind, fp=b.fingerprint())
    store.add_texts([f"t{i}" for i in range(30)], b, batch_size=10)
    assert got == [True] and store.count() == 30


def test_add_stream_embeds_a_text_removed_while_its_window_was_embedded(tmp_path, store_kind, opened):
    b = WindowBackend(dim=D, max_words=1)
    store, _ = make(opened, tmp_path, store_kind, fp=b.fingerprint())
    first = store.add_texts(["old text"], b).ids[0]
    b.calls.clear()
    b.during_first_embed = lambda: store.remove([first])
    r = store.add_texts(["old text", "new"], b)
    assert b.calls == [["new"], ["old text"]]             # planned as stored, then gone
    assert r.added == 2 and store.count() == 2
    assert r.truncated == 1                               # "old text" was cut, "new" was not
    hit = store.search(text_vector("old text", D, b.weights + "mean"), k=1)[0][0]
    assert hit.text == "old text" and hit.score == pytest.approx(1.0, abs=1e-5)


def test_rebuild_reembeds_with_another_model(tmp_path, store_kind, opened):
    b1 = FakeBackend(dim=D)
    b2 = FakeBackend(name="second", dim=16, weights="2" * 64)
    store, _ = make(opened, tmp_path, store_kind, fp=b1.fingerprint())
    store.add_texts([f"text {i}" for i in range(30)], b1)
    store.remove([4])
    seen = []
    store.rebuild(b2, batch_size=8, progress=lambda done, total: seen.append((done, total)))
    assert store.fingerprint_dict["model"] == "second" and store.count() == 29
    assert seen[-1] == (29, 29) and seen == sorted(seen) and len(seen) >= 4
    assert door.search(store, "text 7", 1, b2)[0][0].text == "text 7"
    with pytest.raises(ModelMismatch):
        door.search(store, "text 7", 1, b1)
    assert [r["id"] for r in store.iter()][:4] == [1, 2, 3, 5]
    store.close()
    again = open_(opened, loc(tmp_path, store_kind), writable=False)
    assert again.fingerprint_dict["model"] == "second" and again.count() == 29
