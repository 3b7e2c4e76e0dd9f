"""What one search costs beyond the index scan: the query's model is checked against the store's
once (the mismatch hint, which counts the store, only built when they differ), and no
`SELECT COUNT(*)` runs, through the door the CLI and the app use (index/corpus/door.py) and through
`encoderscope search` itself."""
from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from index.corpus import door
from index.faiss.store import VectorStore
from index.store import fingerprint as fpmod
from index.store.errors import ModelMismatch
from tests.support.store_backends import FakeBackend
from tests.support.tiny_models import run_cli

D = 32
TEXTS = [f"sentence number {i} about topic {i % 7}" for i in range(40)]


@pytest.fixture
def counted(monkeypatch):
    """{"checks": fingerprint comparisons, "counts": SQL statements with COUNT( } since reset."""
    seen = {"checks": 0, "counts": 0}
    compare = fpmod.compatible

    def compatible(a, b):
        seen["checks"] += 1
        return compare(a, b)
    monkeypatch.setattr(fpmod, "compatible", compatible)
    connect = sqlite3.connect

    def traced(*args, **kw):
        conn = connect(*args, **kw)
        conn.set_trace_callback(lambda sql: seen.__setitem__("counts", seen["counts"] + ("COUNT(" in sql.upper())))
        return conn
    monkeypatch.setattr(sqlite3, "connect", traced)
    return seen


@pytest.fixture
def store_dir(tmp_path):
    b = FakeBackend(dim=D)
    with VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(TEXTS, b)
    return tmp_path / "s"


def test_a_search_through_the_door_checks_the_model_once_and_counts_nothing(store_dir, counted):
    b = FakeBackend(dim=D)
    with VectorStore.open(store_dir) as store:
        counted.update(checks=0, counts=0)
        hits, _ = door.search(store, TEXTS[3], 5, b)
        assert hits[0].text == TEXTS[3]
        assert counted == {"checks": 1, "counts": 0}


def test_encoderscope_search_checks_the_model_once_and_counts_nothing(store_dir, counted, capsys, monkeypatch):
    import app.cli.store as cli_store
    monkeypatch.setattr(cli_store, "backend_for", lambda args, model: FakeBackend(model, D))
    counted.update(checks=0, counts=0)
    rc, out, err = run_cli(["search", TEXTS[5], "--store", store_dir, "--model", "fake", "-k", "3"], capsys)
    assert rc == 0, err
    assert out.splitlines()[0].endswith(TEXTS[5])
    assert counted == {"checks": 1, "counts": 0}


def test_a_mismatch_still_names_the_store_size_and_the_rebuild(store_dir, counted):
    other = FakeBackend("other-model", D, "0" * 64)
    with VectorStore.open(store_dir) as store:
        counted.update(checks=0, counts=0)
        with pytest.raises(ModelMismatch) as e:
            door.search(store, TEXTS[0], 5, other)
    assert f"re-embed all {len(TEXTS)} sentences" in str(e.value)
    assert e.value.rebuild["model"] == "other-model"
    assert counted["checks"] == 1 and counted["counts"] == 1     # the hint's count, on this path only


class _CountedVector(np.ndarray):
    """A stored vector that counts the dot products taken with it (a hit's cosine)."""
    products = 0

    def __matmul__(self, other):
        _CountedVector.products += 1
        return np.asarray(self) @ other


def test_a_query_is_normalised_once_and_each_hit_scored_once(store_dir, monkeypatch):
    from index.faiss.row_checks import RowChecker
    from index.store import adding
    b = FakeBackend(dim=D)
    unit = b.embed([TEXTS[2]])            # a backend's vector: unit length already
    assert adding.normalize(unit) is unit or np.shares_memory(adding.normalize(unit), unit)
    raw = unit * 3.0                       # anything else is scaled, once
    np.testing.assert_allclose(np.linalg.norm(adding.normalize(raw), axis=1), 1.0, atol=1e-6)
    read = RowChecker.with_vectors
    monkeypatch.setattr(RowChecker, "with_vectors", lambda self, ids, dim: {
        i: (rec, v.view(_CountedVector)) for i, (rec, v) in read(self, ids, dim).items()})
    with VectorStore.open(store_dir) as store:
        _CountedVector.products = 0
        hits, _ = door.search(store, TEXTS[2], 5, b)
        assert [h.text for h in hits][:1] == [TEXTS[2]] and len(hits) == 5
        assert _CountedVector.products == 5          # one cosine per hit, not one more
        two = store.search(b.embed(TEXTS[:2]), 4, fingerprint=b.fingerprint())
        assert [len(r) for r in two] == [4, 4] and _CountedVector.products == 5 + 8
