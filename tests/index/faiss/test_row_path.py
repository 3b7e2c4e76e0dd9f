"""The window-at-a-time row path (index/faiss/new_rows.py, SentenceDB.insert): the rows on disk are
byte for byte what the per-row path wrote (checksums as JSON defined them, so stores written
before and after read the same), each text is hashed once, and a window is one commit."""
from __future__ import annotations

import hashlib
import json
import sqlite3

import numpy as np
import pytest

import index.faiss.store as store_mod
from index.faiss.row_checks import checksum_head, row_checksum, row_checksums
from index.faiss.store import VectorStore
from tests.support.store_backends import FakeBackend

ODD = ["plain", "quote \" and back\\slash", "tab\tnew\nline\r", "café naïve", "東京 🙂👍🏽",
       "lone \ud800 surrogate", "\x00nul\x07bell\x1f", "\u2028\u2029 separators", "{\"json\": [1]}", "e\u0301"]


def reference_checksum(id_, text, source, line, meta_json, blob) -> bytes:
    """The checksum as stores have always defined it: blake2b-128 of the JSON head, NUL, vector."""
    head = json.dumps([int(id_), text, source, line, meta_json]).encode("utf-8")
    return hashlib.blake2b(head + b"\0" + bytes(blob), digest_size=16).digest()


def reference_digest(blob: bytes) -> bytes:
    """The vector log's digest in plain integers: two sums of the 32-bit little-endian words
    times odd 64-bit weights (SHAKE-128 of a fixed string, little-endian), modulo 2**64."""
    words = [int.from_bytes(blob[i:i + 4], "little") for i in range(0, len(blob), 4)]
    raw = hashlib.shake_128(b"encoderscope vector digest 1").digest(len(words) * 16)
    out = b""
    for lane in range(2):
        weights = [int.from_bytes(raw[16 * i + 8 * lane:16 * i + 8 * lane + 8], "little") | 1
                   for i in range(len(words))]
        out += (sum(w * a for w, a in zip(words, weights)) % 2 ** 64).to_bytes(8, "little")
    return out


def reference_log_row_checksum(id_, text_hash, source, line, meta_json, slot, blob) -> bytes:
    """A row whose vector is in the log: the digest of a 64-byte record of its id, text hash,
    slot (8 bytes each little-endian for the numbers), its vector's digest, and blake2b-128 of
    the JSON of [source, row, metadata] (16 zero bytes when all three are null)."""
    extra = bytes(16) if source is None and line is None and meta_json is None else \
        hashlib.blake2b(json.dumps([source, line, meta_json]).encode(), digest_size=16).digest()
    record = (int(id_).to_bytes(8, "little") + text_hash + int(slot).to_bytes(8, "little")
              + reference_digest(blob) + extra)
    return reference_digest(record)


@pytest.mark.parametrize("text", ODD)
@pytest.mark.parametrize("source,line,meta", [(None, None, None), ("a \"b\".txt", 7, '{"lang": "fr"}'),
                                              ("日本.txt", 0, None), (None, 123456789012, "{}")])
def test_the_checksum_is_the_json_one_for_odd_texts_and_metadata(text, source, line, meta):
    blob = np.arange(4, dtype=np.float32).tobytes()
    want = reference_checksum(42, text, source, line, meta, blob)
    assert checksum_head(42, text, source, line, meta) == json.dumps([42, text, source, line, meta]).encode()
    assert row_checksum(42, text, source, line, meta, blob) == want
    assert row_checksums([42], [text], [source], [line], [meta], [memoryview(blob)]) == [want]


@pytest.mark.parametrize("in_log", [True, False], ids=["log", "inline"])
def test_rows_written_a_window_at_a_time_verify_against_the_json_checksum_on_disk(tmp_path, monkeypatch, in_log):
    """Windows of 16 rows: with the log's threshold at 1 they go to the vector log (checksum of
    the record, vector at its slot); at the real threshold (256) they stay in their rows
    (the JSON checksum over the inline vector, as format 2 wrote it)."""
    import index.faiss.sentences as sentences_mod
    if in_log:
        monkeypatch.setattr(sentences_mod, "LOG_MIN_ROWS", 1)
    b = FakeBackend(dim=8)
    texts = [t for t in ODD if "\ud800" not in t] + [f"t{i}" for i in range(50)]   # SQLite takes UTF-8
    metas = [{"source": "f.txt", "row": i, "lang": "x" * (i % 3)} if i % 2 else None for i in range(len(texts))]
    with VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(texts, b, metadata=metas, window=16)
    c = sqlite3.connect(tmp_path / "s" / "store.db")
    rows = c.execute("SELECT id, text, source, row, meta, inline_vector, checksum, hash, slot "
                     "FROM sentences").fetchall()
    named = c.execute("SELECT value FROM meta WHERE key='vector_log'").fetchone()
    c.close()
    assert (named is not None) == in_log and len(list((tmp_path / "s").glob("vectors-*"))) == in_log
    log = (tmp_path / "s" / json.loads(named[0])["file"]).read_bytes() if in_log else None
    assert len(rows) == len(texts)
    for id_, text, source, line, meta, blob, checksum, h, slot in rows:
        if in_log:
            assert blob == b"" and slot == id_ - 1          # the vector is in the log, at its slot
            vector = log[64 + slot * 32:64 + (slot + 1) * 32]
            assert checksum == reference_log_row_checksum(id_, h, source, line, meta, slot, vector)
        else:
            assert slot is None
            vector = blob
            assert checksum == reference_checksum(id_, text, source, line, meta, blob)
        np.testing.assert_array_equal(np.frombuffer(vector, np.float32), b.embed([text])[0])
        assert h == hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
    with VectorStore.open(tmp_path / "s", verify=True) as s:      # every row checked on open
        assert [r["text"] for r in s.iter()] == texts
        assert s.get([2])[2]["metadata"] == {"source": "f.txt", "row": 1, "added": pytest.approx(
            s.get([2])[2]["metadata"]["added"]), "lang": "x"}


def test_each_text_is_hashed_once_and_a_window_is_one_commit(tmp_path, monkeypatch):
    b = FakeBackend(dim=8)
    s = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint())
    s.add_texts(["seed"], b)
    hashed = []
    real = store_mod.text_hashes
    monkeypatch.setattr(store_mod, "text_hashes", lambda ts: hashed.extend(ts) or real(ts))
    statements = []
    s._db.conn.set_trace_callback(statements.append)
    texts = [f"t{i}" for i in range(300)] + ["seed", "t5"]
    r = s.add_texts(texts, b, window=100)
    s._db.conn.set_trace_callback(None)
    assert (r.added, r.duplicates) == (300, 2)
    assert sorted(hashed) == sorted(texts)          # one hash per text, not one per look
    # three windows of new rows, one commit each; the fourth holds only repeats: none
    assert sum(q.strip().upper() == "COMMIT" for q in statements) == 3
    inserts = [q for q in statements if q.startswith("INSERT INTO sentences")]
    assert len(inserts) == 300       # windows under LOG_MIN_ROWS go by executemany: a traced statement a row
    s.close()


def test_a_failed_commit_leaves_no_row_in_the_index_its_add_ran_beside(tmp_path, monkeypatch):
    """The window's FAISS add runs beside SQLite's COMMIT: when the commit fails, the index is
    rebuilt from the database before it is used, so no uncommitted row is ever found."""
    from index.store.errors import StoreWriteFailed
    b = FakeBackend(dim=8)
    s = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint())
    s.add_texts([f"kept {i}" for i in range(20)], b)
    db = s._db
    real_commit = db.commit

    def failing_commit():
        db.rollback()
        raise StoreWriteFailed("could not write: the disk is full (ENOSPC)")
    monkeypatch.setattr(db, "commit", failing_commit)
    with pytest.raises(StoreWriteFailed):
        s.add_texts([f"lost {i}" for i in range(20)], b)
    monkeypatch.setattr(db, "commit", real_commit)
    hits = s.search(np.stack([b.embed([f"lost {i}"])[0] for i in range(20)]), k=1)
    assert all(h[0].text.startswith("kept") for h in hits)
    ids, _ = s.vectors()
    assert s.count() == 20 and s.index_ids().tolist() == sorted(ids.tolist())
    s.close()
    with VectorStore.open(tmp_path / "s", verify=True) as again:
        assert again.count() == 20 and again.index_ids().tolist() == sorted(again.vectors()[0].tolist())


def test_a_failed_index_add_after_the_commit_is_rebuilt_from_the_database(tmp_path, monkeypatch):
    from index.faiss.faiss_index import FaissIndex
    b = FakeBackend(dim=8)
    s = VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint())
    real_add = FaissIndex.add
    calls = []

    def failing_once(self, ids, vectors):
        calls.append(len(ids))
        if len(calls) == 1:
            raise MemoryError("no room for the window")
        return real_add(self, ids, vectors)
    monkeypatch.setattr(FaissIndex, "add", failing_once)
    r = s.add_texts([f"t{i}" for i in range(30)], b)
    assert r.added == 30 and s.count() == 30              # committed: the database is the truth
    hits = s.search(np.stack(b.embed(["t7"])), k=1)       # the index is rebuilt first
    assert hits[0][0].text == "t7" and hits[0][0].score > 0.9999
    assert s.index_ids().tolist() == list(range(1, 31))
    s.close()
