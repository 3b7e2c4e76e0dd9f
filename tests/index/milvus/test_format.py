"""Milvus stores written by earlier versions keep opening (issue 15): tests/fixtures/milvus_lite_v1
is a Milvus Lite store written by the code before the package split and the shared text hash
(collection format 1, SHA-256 text hashes). It opens, reads the same rows, still finds its texts
as duplicates, takes new rows under the hash it stores, and a rebuild upgrades it to format 2."""
from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from index.corpus import door
from index.store.text_hash import hash_for_format, legacy_sha256_hex, text_hash, text_hash_hex
from tests.support.paths import FIXTURES
from tests.support.store_backends import FakeBackend

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
    HAVE_MILVUS = True
except ImportError:
    HAVE_MILVUS = False
needs_milvus = pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra")

FIXTURE = FIXTURES / "milvus_lite_v1"
# What tests/fixtures/make_milvus_lite_v1.py wrote: 14 texts, the 4th removed, the 6th edited.
TEXTS = [f"fixture sentence number {i}" for i in range(12)] + ["café ünïcode ✓", "a repeated line"]
EXPECTED = {i + 1: t for i, t in enumerate(TEXTS) if i != 3}
EXPECTED[6] = "fixture sentence five, edited"


def test_one_text_hash_for_both_stores():
    from index.faiss import sentences

    assert sentences.text_hash is text_hash           # the FAISS store uses the shared one
    t = "naïve \ud800 text"                             # a lone surrogate has a hash too
    assert text_hash(t) == hashlib.blake2b(t.encode("utf-8", "surrogatepass"),
                                           digest_size=16).digest()
    assert text_hash_hex(t) == text_hash(t).hex() and len(text_hash_hex(t)) == 32
    assert legacy_sha256_hex(t) == hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()
    assert hash_for_format(1) is legacy_sha256_hex and hash_for_format(2) is text_hash_hex


@pytest.fixture
def old_store(tmp_path):
    dst = tmp_path / "old"
    shutil.copytree(FIXTURE, dst)
    return f"milvus-lite:{dst}"


@needs_milvus
def test_format1_store_opens_and_reads_the_same_rows(old_store):
    from index.opening import open_store
    b = FakeBackend(dim=8)
    with open_store(old_store, writable=False) as s:
        assert s.info()["count"] == len(EXPECTED)
        rows = {r["id"]: r for r in s.iter()}
        assert {i: r["text"] for i, r in rows.items()} == EXPECTED
        assert rows[1]["metadata"]["source"] == "fixture.txt" and rows[1]["metadata"]["lang"] == "en"
        ids, vecs = s.vectors()
        ref = b.embed([EXPECTED[int(i)] for i in ids])
        assert np.allclose(np.einsum("ij,ij->i", ref, vecs), 1, atol=1e-5)
        assert door.search(s, "fixture sentence number 7", 1, b)[0][0].id == 8


@needs_milvus
def test_format1_store_keeps_its_hash_and_finds_old_duplicates(old_store):
    from index.opening import open_store
    b = FakeBackend(dim=8)
    with open_store(old_store) as s:
        assert s._format == 1
        res = s.add_texts(["fixture sentence number 7", "café ünïcode ✓", "a brand new line"], b)
        assert (res.added, res.duplicates) == (1, 2)
        assert res.ids[:2] == [8, 13] and res.ids[2] == 15
        stored = {int(r["id"]): r["hash"] for r in s._scan(["hash"])}
        assert stored[15] == legacy_sha256_hex("a brand new line")   # the store's own scheme
        assert s.id_of("fixture sentence five, edited") == 6
    with open_store(old_store) as s:                   # and after reopening
        assert s.add_texts(["a brand new line"], b).duplicates == 1


@needs_milvus
def test_rebuild_upgrades_a_format1_store(old_store):
    from index.opening import open_store
    b = FakeBackend(dim=8)
    other = FakeBackend(name="fake2", dim=8, weights="e" * 64)
    with open_store(old_store) as s:
        s.rebuild(other)
        assert s._format == 2
        stored = {int(r["id"]): r["hash"] for r in s._scan(["hash"])}
        assert stored[8] == text_hash_hex("fixture sentence number 7")
        assert s.add_texts(["fixture sentence number 7"], other).duplicates == 1
    with open_store(old_store) as s:
        assert s._format == 2 and s.count() == len(EXPECTED)
        assert s.add_texts(["café ünïcode ✓", "one more"], other).duplicates == 1
        assert door.search(s, "fixture sentence number 7", 1, other)[0][0].id == 8
    del b


@needs_milvus
def test_new_stores_are_format2(tmp_path):
    from index.opening import open_store
    b = FakeBackend(dim=8)
    with open_store(f"milvus-lite:{tmp_path / 'new'}", create=True,
                    fingerprint=b.fingerprint()) as s:
        s.add_texts(["hello there"], b)
        assert s._format == 2
        assert [r["hash"] for r in s._scan(["hash"])] == [text_hash_hex("hello there")]


def test_one_metadata_split_for_both_stores():
    import numpy as np

    from index.faiss.new_rows import planned_rows
    from index.store.records import make_record, split_meta
    meta = {"source": "a.csv", "row": "7", "added": "not a time", "lang": "de"}
    assert split_meta(meta) == ("a.csv", 7, None, {"lang": "de"})
    assert split_meta({"added": 12}) == (None, None, 12.0, None) and split_meta(None).extra is None
    rows = planned_rows([0], ["t"], [b"h" * 16], [meta], np.zeros((1, 4), np.float32))   # FAISS's rows
    assert (rows.sources, rows.lines, rows.metas_json) == (["a.csv"], [7], ['{"lang": "de"}'])
    rec = make_record(5, "t", "a.csv", 7, 1.5, {"lang": "de"})
    assert rec == {"id": 5, "text": "t",
                   "metadata": {"source": "a.csv", "row": 7, "added": 1.5, "lang": "de"}}
    assert list(rec["metadata"]) == ["source", "row", "added", "lang"]
