"""The store contract, second part (see test_store_contract.py): another model refused the same
way on every store, reopening (read-only, ids continue), migrate FAISS -> Milvus -> FAISS
without re-embedding, and whitened stores.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from core.errors import InputError
from index.corpus import door
from index.opening import open_store
from index.store.errors import ModelMismatch, StoreError, StoreNotFound
from tests.support.store_backends import FakeBackend, clustered
from tests.support.store_contract import (
    FP,
    KINDS,
    OTHER,
    D,
    brute_force,
    loc,
    make,
    milvus_available,
    open_,
    untied,
)


# ---------------------------------------------------------------- the model check
def _without_location(msg, tmp_path):
    msg = msg.replace("milvus-lite:", "")
    return re.sub(r"\(\w+Store\.rebuild\)", "", msg.replace(str(tmp_path), "<dir>"))


def test_foreign_model_is_refused_the_same_way(tmp_path, opened):
    messages = {}
    for k in (p if isinstance(p, str) else p.values[0] for p in KINDS):
        if k == "milvus" and not milvus_available():
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


def test_missing_store_is_not_found(tmp_path, store_kind, opened):
    with pytest.raises(StoreNotFound, match="no store") as e:
        open_store(loc(tmp_path, store_kind, "nothing"), writable=False)
    assert e.value.location.endswith("nothing") and "encoderscope" not in str(e.value)
    with pytest.raises(StoreNotFound):
        open_store(loc(tmp_path, store_kind, "nothing"))


# ---------------------------------------------------------------- reopen
def test_reopen_same_results_ids_continue(tmp_path, store_kind, opened):
    store, x = make(opened, tmp_path, store_kind, 400)
    store.remove([10])
    q = clustered(420, D)[400:]
    before = [[(h.id, h.text) for h in row] for row in store.search(q, k=5)]
    store.close()
    ro = open_(opened, loc(tmp_path, store_kind), writable=False)
    assert ro.count() == 399
    assert [[(h.id, h.text) for h in row] for row in ro.search(q, k=5)] == before
    with pytest.raises(StoreError, match="read-only"):
        ro.add(["x"], clustered(1, D))
    with pytest.raises(StoreError, match="read-only"):
        ro.remove([1])
    ro.close()
    rw = open_(opened, loc(tmp_path, store_kind))
    assert rw.add(["another"], clustered(1, D, seed=3)).ids == [401]
    assert rw.add(["sentence 0"], x[:1]).ids == [1]      # duplicates known after reopen
    info = rw.info()
    assert info["count"] == 400 and info["dim"] == D and info["model"] == "fake"
    assert info["index"] == "flat" and info["metric"] == "cosine"
    assert info["bytes"] > 0 or store_kind == "server"      # a server's disk is not ours to measure


# ---------------------------------------------------------------- migrate
@pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra")
def test_migrate_round_trip_faiss_milvus_faiss(tmp_path, opened):
    from index.corpus.migrate import migrate
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
    md = stores[1].search(clustered(1, D, seed=7), k=1)[0][0].metadata
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


@pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra")
def test_migrate_into_emptied_milvus_store_never_reuses_ids(tmp_path, opened):
    """An empty destination that once held rows keeps its id counter: the source's ids
    would reuse ids it already handed out."""
    from index.corpus.migrate import migrate
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


@pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra")
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


def test_a_whitened_store_searches_whitened_vectors_and_whitens_queries(tmp_path, store_kind, opened):
    if store_kind != "faiss":       # the transform is kept beside a FAISS index; Milvus says so
        with pytest.raises(InputError, match="cannot be whitened"):
            make_whitened(opened, tmp_path, store_kind)
        return
    from core.evaluate.metrics import anisotropy
    store, x, w = make_whitened(opened, tmp_path, store_kind)
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
    hit = door.search(store, "a text about whitening", 1, backend)[0][0]
    assert hit.id == added.ids[0] and hit.score == pytest.approx(1.0, abs=1e-5)
    # the model's vectors without its fingerprint are not the store's: refused, never stored raw
    with pytest.raises(ModelMismatch, match="32 dimensions"):
        store.add(["raw"], x[:1])
    with pytest.raises(ModelMismatch):
        store.search(q, k=3, fingerprint=OTHER)
    assert store.fingerprint_dict["whitening"] == w.digest() and store.info()["whitening"]["dims"] == 12
    first = [h.id for h in store.search(q[:1], k=5, fingerprint=FP)[0]]
    store.close()
    again = open_(opened, loc(tmp_path, store_kind, "w"), writable=False)     # verified on open
    assert [h.id for h in again.search(q[:1], k=5, fingerprint=FP)[0]] == first


@pytest.mark.parametrize("damage", ["flip a byte", "swap in another transform", "delete"])
def test_a_damaged_or_swapped_whitening_file_is_detected_on_open(tmp_path, opened, damage):
    from core.evaluate.whitening import fit_whitening, save_whitening
    from index.store.errors import StoreCorrupted
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
    from index.corpus.migrate import migrate
    store, x, w = make_whitened(opened, tmp_path, "faiss")
    q = cone(605)[600:]
    before = [[h.id for h in row] for row in store.search(q, k=5, fingerprint=FP)]
    store.close()
    migrate(tmp_path / "w", tmp_path / "w2")
    copy = open_(opened, str(tmp_path / "w2"), writable=False)
    assert copy.whitening.digest() == w.digest()
    assert [[h.id for h in row] for row in copy.search(q, k=5, fingerprint=FP)] == before
    if milvus_available():
        with pytest.raises(InputError, match="cannot be whitened"):
            migrate(tmp_path / "w", f"milvus-lite:{tmp_path / 'm'}")
    with pytest.raises(InputError, match="whitened with a transform fitted"):
        open_(opened, str(tmp_path / "w2"), writable=True).rebuild(FakeBackend("other-model", D, "0" * 64))
