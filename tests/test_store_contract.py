"""The store contract, run against every implementation: the FAISS store (a folder), Milvus
Lite (milvus-lite:FOLDER) and a real Milvus server (the session's `milvus_server`, one
collection per test), all opened through index.locations.open_store.

Exact search = numpy brute force, identical top-k on both engines (ties aside), the model
fingerprint refused the same way, duplicates, remove/count/iterate/get, update, clear, reopen,
read-only, rebuild, and migrate FAISS -> Milvus -> FAISS without re-embedding.
Fake embedder + synthetic vectors (fast); Milvus-only behaviour is in test_store_milvus.py.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pytest

from core.errors import InputError
from index import corpus
from index.errors import DuplicateText, ModelMismatch, StoreError, StoreNotFound, UnknownId
from index.locations import open_store
from tests.test_store_support import FakeBackend, Fingerprint, clustered, text_vector

D = 32
FP = Fingerprint("fake", "f" * 64, "mean", D, True)
OTHER = Fingerprint("other-model", "0" * 64, "mean", D, True)


def _milvus_available():
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
        return True
    except ImportError:
        return False


KINDS = ["faiss", pytest.param("milvus", marks=pytest.mark.skipif(
    not _milvus_available(), reason="needs the [milvus] extra (pymilvus, milvus-lite)"))]
SERVER = {}     # "uri" of the session's Milvus server, once a "server" test asked for it


def loc(tmp_path, kind, name="s"):
    if kind == "server":     # a collection of this test's own on the shared server
        tag = hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
        return f"{SERVER['uri']}?collection=t{tag}_{name}"
    return str(tmp_path / name) if kind == "faiss" else f"milvus-lite:{tmp_path / name}"


@pytest.fixture
def opened():
    """Closes every store a test opened (Milvus Lite keeps a server per folder until then)."""
    stores = []
    yield stores
    for s in reversed(stores):
        try:
            s.close()
        except Exception:
            pass


@pytest.fixture(params=KINDS + [pytest.param("server", marks=pytest.mark.skipif(
    not _milvus_available(), reason="needs the [milvus] extra"))])
def kind(request):
    if request.param == "server":
        SERVER["uri"] = request.getfixturevalue("milvus_server").uri
    return request.param


def open_(opened, location, **kw):
    s = open_store(location, **kw)
    opened.append(s)
    return s


def make(opened, tmp_path, kind, n=0, fp=FP, name="s", seed=0, **kw):
    if kind == "server":
        kw.setdefault("index", "flat")     # the contract's search is exact
    s = open_(opened, loc(tmp_path, kind, name), create=True, fingerprint=fp, **kw)
    x = clustered(n, D, seed=seed) if n else np.zeros((0, D), np.float32)
    if n:
        s.add([f"sentence {i}" for i in range(n)], x)
    return s, x


def brute_force(x, q, k):
    xs = x / np.linalg.norm(x, axis=1, keepdims=True)
    qs = q / np.linalg.norm(q, axis=1, keepdims=True)
    s = qs @ xs.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(s, order, axis=1)


def untied(scores, atol=1e-5):
    """Ranks whose score is clearly apart from the neighbours' (their position is defined)."""
    s = np.asarray(scores)
    ok = np.ones(len(s), bool)
    gaps = np.abs(np.diff(s)) < atol
    ok[:-1] &= ~gaps
    ok[1:] &= ~gaps
    return ok


# ---------------------------------------------------------------- exact search
def test_exact_search_equals_numpy_cosine_ranking(tmp_path, kind, opened):
    store, x = make(opened, tmp_path, kind, 1500)
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
    single = store.search(q[0], k=10)
    assert [h.id for h in single] == [h.id for h in hits[0]]


@pytest.mark.skipif(not _milvus_available(), reason="needs the [milvus] extra")
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


def test_empty_store_and_k_larger_than_corpus(tmp_path, kind, opened):
    store, _ = make(opened, tmp_path, kind)
    assert store.count() == 0 and list(store.iter()) == []
    assert store.search(np.ones(D), k=5) == []
    store.add(["a", "b", "c"], clustered(3, D))
    hits = store.search(np.ones(D), k=50)
    assert len(hits) == 3
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    with pytest.raises(Exception, match="k must be at least 1"):
        store.search(np.ones(D), k=0)


def test_metadata_round_trip(tmp_path, kind, opened):
    store, _ = make(opened, tmp_path, kind)
    x = clustered(4, D)
    store.add(["one", "two", "three", "four"], x,
              metadata=[{"source": "a.txt", "row": 3, "lang": "en"}, None, None, {"row": 9}])
    hits = store.search(x[0], k=4)
    assert hits[0].text == "one" and hits[0].score == pytest.approx(1.0, abs=1e-5)
    md = hits[0].metadata
    assert md["source"] == "a.txt" and md["row"] == 3 and md["lang"] == "en" and md["added"] > 1e9
    two = next(h for h in hits if h.text == "two")
    assert two.metadata["source"] is None and two.metadata["row"] is None
    assert hits[0].to_dict() == {"score": hits[0].score, "id": hits[0].id, "text": "one"}
    assert store.get([hits[0].id])[hits[0].id]["metadata"]["lang"] == "en"


# ---------------------------------------------------------------- changes
def test_duplicates_stored_once(tmp_path, kind, opened):
    store, _ = make(opened, tmp_path, kind)
    x = clustered(5, D)
    r = store.add(["a", "b", "a", "c", "b"], x)
    assert r.added == 3 and r.duplicates == 2
    assert r.ids[0] == r.ids[2] and r.ids[1] == r.ids[4] and len(set(r.ids)) == 3
    assert r.ids == [1, 2, 1, 3, 2]           # ids 1, 2, 3 in insertion order on both
    r2 = store.add(["c", "d"], x[:2])
    assert r2.added == 1 and r2.duplicates == 1 and r2.ids == [3, 4]
    assert store.count() == 4


def test_remove_count_iterate_get(tmp_path, kind, opened):
    store, x = make(opened, tmp_path, kind, 300)
    assert store.count() == len(store) == 300
    gone = store.remove([5, 7, 7, 99999])
    assert gone == [5, 7]
    assert store.count() == 298
    rows = list(store.iter())
    assert [r["id"] for r in rows] == [i for i in range(1, 301) if i not in (5, 7)]
    assert rows[0] == {"id": 1, "text": "sentence 0", "metadata": rows[0]["metadata"]}
    hit = store.search(x[4], k=1)[0]
    assert hit.id != 5
    got = store.get([1, 5, 300])
    assert set(got) == {1, 300} and got[300]["text"] == "sentence 299"
    # ids are never reused, even after removing the newest
    store.remove([300])
    assert store.add(["brand new"], clustered(1, D, seed=9)).ids == [301]
    # the removed text can come back (as a new id)
    assert store.add(["sentence 4"], x[4:5]).ids == [302]


def test_update_text(tmp_path, kind, opened):
    store, x = make(opened, tmp_path, kind, 50)
    v = clustered(1, D, seed=42)[0]
    store.update_text(3, "a new third sentence", v)
    assert store.get([3])[3]["text"] == "a new third sentence"
    top = store.search(v, k=1)[0]
    assert (top.id, top.text) == (3, "a new third sentence")
    assert store.count() == 50
    with pytest.raises(DuplicateText, match="as id 4"):
        store.update_text(3, "sentence 3", v)
    with pytest.raises(UnknownId):
        store.update_text(9999, "nothing", v)
    # the old text is free again
    assert store.add(["sentence 2"], x[2:3]).added == 1


def test_clear(tmp_path, kind, opened):
    store, x = make(opened, tmp_path, kind, 40)
    store.clear()
    assert store.count() == 0 and store.search(x[0], k=3) == []
    r = store.add(["sentence 0"], x[:1])
    assert r.added == 1 and r.ids[0] > 40


def test_add_texts_embeds_only_new_and_search_by_text(tmp_path, kind, opened):
    b = FakeBackend(dim=D)
    store, _ = make(opened, tmp_path, kind, fp=b.fingerprint())
    r = store.add_texts(["the cat sat", "a dog ran", "the cat sat"], b,
                        metadata=[{"source": "x.txt", "row": 1}, None, None])
    assert r.added == 2 and r.duplicates == 1 and b.embedded == 2
    r2 = store.add_texts(["a dog ran", "birds flew"], b)
    assert r2.added == 1 and b.embedded == 3
    hits = corpus.search(store, "the cat sat", 2, b)[0]
    assert hits[0].text == "the cat sat" and hits[0].metadata["source"] == "x.txt"
    many = corpus.search_many(store, ["a dog ran", "birds flew"], 1, b)
    assert [h[0].text for h in many] == ["a dog ran", "birds flew"]


def test_cancel_keeps_committed_batches(tmp_path, kind, opened):
    b = FakeBackend(dim=D)
    store, _ = make(opened, tmp_path, kind, fp=b.fingerprint())
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


def test_add_stream_embeds_a_window_at_once_and_commits_in_order(tmp_path, kind, opened):
    b = WindowBackend(dim=D)
    store, _ = make(opened, tmp_path, kind, fp=b.fingerprint())
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


def test_add_stream_does_not_hold_the_store_while_it_embeds(tmp_path, kind, opened):
    import threading
    got = []

    def another_thread_uses_the_store():
        t = threading.Thread(target=lambda: got.append(store._mutex.acquire(timeout=5)
                                                       and (store._mutex.release() or True)))
        t.start()
        t.join()
    b = WindowBackend(dim=D, during_first_embed=another_thread_uses_the_store)
    store, _ = make(opened, tmp_path, kind, fp=b.fingerprint())
    store.add_texts([f"t{i}" for i in range(30)], b, batch_size=10)
    assert got == [True] and store.count() == 30


def test_add_stream_embeds_a_text_removed_while_its_window_was_embedded(tmp_path, kind, opened):
    b = WindowBackend(dim=D, max_words=1)
    store, _ = make(opened, tmp_path, kind, fp=b.fingerprint())
    first = store.add_texts(["old text"], b).ids[0]
    b.calls.clear()
    b.during_first_embed = lambda: store.remove([first])
    r = store.add_texts(["old text", "new"], b)
    assert b.calls == [["new"], ["old text"]]             # planned as stored, then gone
    assert r.added == 2 and store.count() == 2
    assert r.truncated == 1                               # "old text" was cut, "new" was not
    hit = store.search(text_vector("old text", D, b.weights + "mean"), k=1)[0]
    assert hit.text == "old text" and hit.score == pytest.approx(1.0, abs=1e-5)


def test_rebuild_reembeds_with_another_model(tmp_path, kind, opened):
    b1 = FakeBackend(dim=D)
    b2 = FakeBackend(name="second", dim=16, weights="2" * 64)
    store, _ = make(opened, tmp_path, kind, fp=b1.fingerprint())
    store.add_texts([f"text {i}" for i in range(30)], b1)
    store.remove([4])
    seen = []
    store.rebuild(b2, batch_size=8, progress=lambda done, total: seen.append((done, total)))
    assert store.fingerprint_dict["model"] == "second" and store.count() == 29
    assert seen[-1] == (29, 29) and seen == sorted(seen) and len(seen) >= 4
    assert corpus.search(store, "text 7", 1, b2)[0][0].text == "text 7"
    with pytest.raises(ModelMismatch):
        corpus.search(store, "text 7", 1, b1)
    assert [r["id"] for r in store.iter()][:4] == [1, 2, 3, 5]
    store.close()
    again = open_(opened, loc(tmp_path, kind), writable=False)
    assert again.fingerprint_dict["model"] == "second" and again.count() == 29


# ---------------------------------------------------------------- the model check
def _without_location(msg, tmp_path):
    msg = msg.replace("milvus-lite:", "")
    return re.sub(r"\(\w+Store\.rebuild\)", "", msg.replace(str(tmp_path), "<dir>"))


def test_foreign_model_is_refused_the_same_way(tmp_path, opened):
    messages = {}
    for k in (p if isinstance(p, str) else p.values[0] for p in KINDS):
        if k == "milvus" and not _milvus_available():
            continue
        store, x = make(opened, tmp_path, k, 10, name="s" + k)
        msgs, rebuilds = [], []
        with pytest.raises(ModelMismatch) as e:
            store.add(["x"], clustered(1, D), fingerprint=OTHER)
        msgs.append(str(e.value))
        rebuilds.append(e.value.rebuild)
        with pytest.raises(ModelMismatch) as e:
            store.search(x[0], k=1, fingerprint=OTHER)
        msgs.append(str(e.value))
        rebuilds.append(e.value.rebuild)
        with pytest.raises(ModelMismatch, match="16 dimensions"):
            store.search(np.ones(16), k=1)
        store.close()
        with pytest.raises(ModelMismatch) as e:
            open_(opened, loc(tmp_path, k, "s" + k), writable=False, fingerprint=OTHER)
        msgs.append(str(e.value))
        rebuilds.append(e.value.rebuild)
        for m in msgs:   # said in words; the command line words the rebuild as a command
            assert "other-model" in m and "fake" in m and "re-embed" in m and "encoderscope" not in m
        assert all(r["model"] == "other-model" and r["pooling"] == "mean" for r in rebuilds)
        messages[k] = [_without_location(m, tmp_path).replace("s" + k, "S") for m in msgs]
        again = open_(opened, loc(tmp_path, k, "s" + k), writable=False, fingerprint=FP)
        assert again.count() == 10
    if len(messages) == 2:
        assert messages["faiss"] == messages["milvus"]


def test_missing_store_is_not_found(tmp_path, kind, opened):
    with pytest.raises(StoreNotFound, match="no store") as e:
        open_store(loc(tmp_path, kind, "nothing"), writable=False)
    assert e.value.location.endswith("nothing") and "encoderscope" not in str(e.value)
    with pytest.raises(StoreNotFound):
        open_store(loc(tmp_path, kind, "nothing"))


# ---------------------------------------------------------------- reopen
def test_reopen_same_results_ids_continue(tmp_path, kind, opened):
    store, x = make(opened, tmp_path, kind, 400)
    store.remove([10])
    q = clustered(420, D)[400:]
    before = [[(h.id, h.text) for h in row] for row in store.search(q, k=5)]
    store.close()
    ro = open_(opened, loc(tmp_path, kind), writable=False)
    assert ro.count() == 399
    assert [[(h.id, h.text) for h in row] for row in ro.search(q, k=5)] == before
    with pytest.raises(StoreError, match="read-only"):
        ro.add(["x"], clustered(1, D))
    with pytest.raises(StoreError, match="read-only"):
        ro.remove([1])
    ro.close()
    rw = open_(opened, loc(tmp_path, kind))
    assert rw.add(["another"], clustered(1, D, seed=3)).ids == [401]
    assert rw.add(["sentence 0"], x[:1]).ids == [1]      # duplicates known after reopen
    info = rw.info()
    assert info["count"] == 400 and info["dim"] == D and info["model"] == "fake"
    assert info["index"] == "flat" and info["metric"] == "cosine"
    assert info["bytes"] > 0 or kind == "server"      # a server's disk is not ours to measure


# ---------------------------------------------------------------- migrate
@pytest.mark.skipif(not _milvus_available(), reason="needs the [milvus] extra")
def test_migrate_round_trip_faiss_milvus_faiss(tmp_path, opened):
    from index.migrate import migrate
    src, x = make(opened, tmp_path, "faiss", 1200, name="f")
    src.add(["with metadata"], clustered(1, D, seed=7), metadata=[{"source": "m.csv", "row": 2,
                                                                    "lang": "de"}])
    src.remove([3, 500])
    src.close()
    q = clustered(1230, D, seed=11)[1200:]
    r1 = migrate(tmp_path / "f", f"milvus-lite:{tmp_path / 'm'}", batch=300)
    assert r1.verified and r1.added == 1199 and r1.destination_count == 1199
    r2 = migrate(f"milvus-lite:{tmp_path / 'm'}", tmp_path / "f2", batch=500)
    assert r2.verified and r2.added == 1199
    stores = [open_(opened, p, writable=False) for p in
              (tmp_path / "f", f"milvus-lite:{tmp_path / 'm'}", tmp_path / "f2")]
    res = [s.search(q, k=10) for s in stores]
    for a, b, c in zip(*res):
        assert [h.text for h in a] == [h.text for h in b] == [h.text for h in c]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in c], atol=1e-5)
        assert [h.id for h in a] == [h.id for h in b]           # Milvus kept the ids
    md = stores[1].search(clustered(1, D, seed=7)[0], k=1)[0].metadata
    assert md["source"] == "m.csv" and md["row"] == 2 and md["lang"] == "de"
    assert [s.count() for s in stores] == [1199] * 3
    assert [r["text"] for r in stores[0].iter()] == [r["text"] for r in stores[2].iter()]
    for s in stores:
        s.close()
    # running it again copies nothing new (an interrupted migrate is resumed the same way)
    r3 = migrate(tmp_path / "f", f"milvus-lite:{tmp_path / 'm'}")
    assert r3.added == 0 and r3.duplicates == 1199 and r3.verified
    # a destination built with another model is refused, not mixed
    other, _ = make(opened, tmp_path, "faiss", 5, fp=OTHER, name="o")
    other.close()
    with pytest.raises(ModelMismatch, match="other-model"):
        migrate(f"milvus-lite:{tmp_path / 'm'}", tmp_path / "o")


@pytest.mark.skipif(not _milvus_available(), reason="needs the [milvus] extra")
def test_migrate_into_emptied_milvus_store_never_reuses_ids(tmp_path, opened):
    """An empty destination that once held rows keeps its id counter: the source's ids
    would reuse ids it already handed out."""
    from index.migrate import migrate
    src, _ = make(opened, tmp_path, "faiss", 30, name="f")
    src.close()
    dst, _ = make(opened, tmp_path, "milvus", 50, name="m", seed=4)
    dst.clear()
    dst.close()
    r = migrate(tmp_path / "f", f"milvus-lite:{tmp_path / 'm'}")
    assert r.verified and r.added == 30
    again = open_(opened, f"milvus-lite:{tmp_path / 'm'}", writable=False)
    ids = [row["id"] for row in again.iter()]
    assert len(ids) == 30 and min(ids) > 50


@pytest.mark.skipif(not _milvus_available(), reason="needs the [milvus] extra")
def test_migrate_command_line(tmp_path, opened, capsys):
    from app.cli import main as encoderscope

    def main(argv):
        return encoderscope(["migrate", *argv])
    src, _ = make(opened, tmp_path, "faiss", 50, name="f")
    src.close()
    rc = main(["--from", str(tmp_path / "f"), "--to", f"milvus-lite:{tmp_path / 'm'}", "--quiet"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "copied 50 sentences" in out.out and "verified" in out.out
    rc = main(["--from", str(tmp_path / "f"), "--to", str(tmp_path / "f")])
    assert rc == 2 and "same store" in capsys.readouterr().err
    rc = main(["--from", str(tmp_path / "nope"), "--to", str(tmp_path / "x"), "--quiet"])
    assert rc == 2 and "no store at" in capsys.readouterr().err


# ---------------------------------------------------------------- whitening
def reference_whitening(x, k):
    """mu and W from an eigen-decomposition of the covariance (the store fits by SVD)."""
    mu = x.mean(0)
    vals, vecs = np.linalg.eigh(np.cov(np.asarray(x, np.float64), rowvar=False, bias=True))
    top = np.argsort(vals)[::-1][:k]
    return mu, vecs[:, top] / np.sqrt(vals[top])


def cone(n, seed=3):
    x = clustered(n, D, seed=seed) + 0.4
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def make_whitened(opened, tmp_path, kind, n=600, k=12, name="w"):
    """A store whitened to k dims, fitted on n clustered vectors in a narrow cone (anisotropic, as
    a model's often are) and holding them."""
    from core.evaluate.whitening import fit_whitening
    x = cone(n)
    w = fit_whitening(x, k)
    s = open_(opened, loc(tmp_path, kind, name), create=True, fingerprint=FP, whitening=w,
              **({"index": "flat"} if kind == "server" else {}))
    s.add([f"sentence {i}" for i in range(n)], x, fingerprint=FP)
    return s, x, w


def test_a_whitened_store_searches_whitened_vectors_and_whitens_queries(tmp_path, kind, opened):
    if kind != "faiss":       # the transform is kept beside a FAISS index; Milvus says so
        with pytest.raises(InputError, match="cannot be whitened"):
            make_whitened(opened, tmp_path, kind)
        return
    from core.evaluate.metrics import anisotropy
    store, x, w = make_whitened(opened, tmp_path, kind)
    mu, ref = reference_whitening(x, 12)
    white = (x - mu) @ ref
    # the corpus's whitened vectors have identity covariance, and lower anisotropy once stored
    assert np.abs(np.cov(w.whiten(x), rowvar=False, bias=True) - np.eye(12)).max() <= 1e-3
    _, stored = store.vectors()
    assert store.dim == 12 and stored.shape == (600, 12)
    assert anisotropy(x).value > 0.5 and abs(anisotropy(stored).value) < 0.05
    # queries: the model's own vectors (its fingerprint) and texts are whitened the same way
    q = cone(620)[600:]
    order, scores = brute_force(white, (q - mu) @ ref, 10)
    for hits, o, sc in zip(store.search(q, k=10, fingerprint=FP), order, scores):
        np.testing.assert_allclose([h.score for h in hits], sc, atol=1e-4)
        ok = untied(sc, 1e-4)
        assert [h.id - 1 for h, k in zip(hits, ok) if k] == [i for i, k in zip(o, ok) if k]
    backend = FakeBackend(dim=D)
    added = store.add_texts(["a text about whitening"], backend)
    hit = corpus.search(store, "a text about whitening", 1, backend)[0][0]
    assert hit.id == added.ids[0] and hit.score == pytest.approx(1.0, abs=1e-5)
    # the model's vectors without its fingerprint are not the store's: refused, never stored raw
    with pytest.raises(ModelMismatch, match="32 dimensions"):
        store.add(["raw"], x[:1])
    with pytest.raises(ModelMismatch):
        store.search(q, k=3, fingerprint=OTHER)
    assert store.fingerprint_dict["whitening"] == w.digest() and store.info()["whitening"]["dims"] == 12
    first = [h.id for h in store.search(q[0], k=5, fingerprint=FP)]
    store.close()
    again = open_(opened, loc(tmp_path, kind, "w"), writable=False)     # verified on open
    assert [h.id for h in again.search(q[0], k=5, fingerprint=FP)] == first


@pytest.mark.parametrize("damage", ["flip a byte", "swap in another transform", "delete"])
def test_a_damaged_or_swapped_whitening_file_is_detected_on_open(tmp_path, opened, damage):
    from core.evaluate.whitening import fit_whitening, save_whitening
    from index.errors import StoreCorrupted
    store, x, _ = make_whitened(opened, tmp_path, "faiss")
    store.close()
    path = tmp_path / "w" / "whitening.safetensors"
    good = path.read_bytes()
    if damage == "flip a byte":
        raw = bytearray(good)
        raw[-40] ^= 0x01
        path.write_bytes(bytes(raw))
    elif damage == "swap in another transform":
        save_whitening(path, fit_whitening(x[:300], 12))
    else:
        path.unlink()
    for writable in (False, True):
        with pytest.raises(StoreCorrupted, match="whitening file .* (is not the transform|is missing|damaged)") as e:
            open_(opened, str(tmp_path / "w"), writable=writable)
        assert e.value.remedy == "restore" and "put the store's own whitening.safetensors back" in str(e.value)
    path.write_bytes(good)             # the remedy: the store's own file back
    assert open_(opened, str(tmp_path / "w"), writable=False).count() == 600


def test_a_whitened_store_migrates_with_its_transform_to_faiss_only(tmp_path, opened):
    from index.migrate import migrate
    store, x, w = make_whitened(opened, tmp_path, "faiss")
    q = cone(605)[600:]
    before = [[h.id for h in row] for row in store.search(q, k=5, fingerprint=FP)]
    store.close()
    migrate(tmp_path / "w", tmp_path / "w2")
    copy = open_(opened, str(tmp_path / "w2"), writable=False)
    assert copy.whitening.digest() == w.digest()
    assert [[h.id for h in row] for row in copy.search(q, k=5, fingerprint=FP)] == before
    if _milvus_available():
        with pytest.raises(InputError, match="cannot be whitened"):
            migrate(tmp_path / "w", f"milvus-lite:{tmp_path / 'm'}")
    with pytest.raises(InputError, match="whitened with a transform fitted"):
        open_(opened, str(tmp_path / "w2"), writable=True).rebuild(FakeBackend("other-model", D, "0" * 64))
