"""The vector log (index/faiss/vector_log.py, format 3): each row's float32 vector in a file
beside store.db, one slot each.

Checked against independent references: the digest against plain Python integers; the file
byte for byte; crash safety with a real SIGKILL of a child between the log's fsync and the
COMMIT; damage (a torn append, a cut, a missing, foreign or damaged log, a folder or FIFO in its
place) through the store API and the CLI, and the files on disk before and after. Fake vectors
(tests/support/fake_vectors.py): fast.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from core.errors import Cancelled
from index.faiss.store import VectorStore
from index.faiss.vector_log import HEADER_BYTES, VectorLog, log_file_name, vector_digests
from index.store.errors import StoreCorrupted
from tests.index.faiss.test_row_path import reference_digest
from tests.support.fake_vectors import text_vector
from tests.support.paths import ROOT, child_env
from tests.support.store_backends import FakeBackend
from tests.support.tiny_models import run_cli

D = 16
WIDTH = 4 * D
FP = {"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D, "normalized": True}
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32",
                                reason="SIGKILL and FIFOs are POSIX: Windows has neither")


def vec(text, dim=D):
    return text_vector(text, dim)


def texts_of(prefix, n=40):
    return [f"{prefix} text number {i:03d}" for i in range(n)]


def make(folder, texts):
    with VectorStore.open(folder, writable=True, create=True, fingerprint=FP) as s:
        s.add(texts, np.stack([vec(t) for t in texts]))
    return folder


def log_path(folder) -> Path:
    (path,) = Path(folder).glob("vectors-*.f32")
    return path


def db_meta(folder, key):
    with VectorStore.open(folder) as s:      # the store's own reading of its database
        return s._db.get_meta(key)


def slots_of(folder) -> dict[int, int]:
    c = sqlite3.connect(Path(folder) / "store.db")
    try:
        return dict(c.execute("SELECT id, slot FROM sentences"))
    finally:
        c.close()


def assert_verified(folder, dim=D, embed=vec):
    """Every row verifies (checksum, slot, unit vector: verify=True), its vector is its text's,
    and searching it finds that row at 1.0: a vector paired with another sentence fails."""
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        recs = {r["id"]: r["text"] for r in s.iter()}
        ids, vecs = s.vectors()
        assert sorted(ids.tolist()) == sorted(recs)
        if len(ids):
            want = np.stack([embed(recs[int(i)]) for i in ids])
            np.testing.assert_array_equal(vecs, want)
            hits = s.search(vecs, k=1)
            assert [h[0].id for h in hits] == ids.tolist()
            assert min(h[0].score for h in hits) > 0.9999
    return recs


def cli(capsys, *argv):
    rc, out, err = run_cli([str(a) for a in argv], capsys)
    assert "Traceback" not in err, err
    return rc, out, err


def error_lines(err) -> list[str]:
    return [x for x in err.splitlines() if x.startswith("error:")]


def files_state(folder) -> dict:
    """name -> sha256 of every regular file but SQLite's side files and the lock (which readers
    may create and remove), or a marker for what is not a regular file."""
    out = {}
    for p in sorted(Path(folder).iterdir()):
        if p.name == "lock" or p.name.endswith(("-wal", "-shm", "-journal")):
            continue
        if p.is_symlink() or not p.is_file():
            out[p.name] = "dir" if p.is_dir() else "special"
        else:
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------- 1. the digest
def test_vector_digests_equal_a_plain_integer_reference():
    rng = np.random.default_rng(7)
    for dim in (1, 3, 16, 384):
        v = rng.normal(size=(6, dim)).astype(np.float32)
        # words with every high bit set (NaN payloads, -0, infinities, denormals): the products
        # overflow 64 bits, so a sum that does not wrap modulo 2**64 shows
        v.view(np.uint32)[0, :] = 0xFFFFFFFF
        v[1, 0] = -0.0
        v[2, 0] = np.inf
        v.view(np.uint32)[3, 0] = 1
        got = vector_digests(v)
        assert got.shape == (6, 16) and got.dtype == np.uint8
        for row, digest in zip(v, got):
            assert digest.tobytes() == reference_digest(row.tobytes())
    assert vector_digests(np.zeros((0, 8), np.float32)).shape == (0, 16)


def test_every_single_bit_flip_changes_the_digest():
    rng = np.random.default_rng(3)
    base = rng.normal(size=8).astype(np.float32)
    flips = np.repeat(base[None], 8 * 32, axis=0)
    words = flips.view(np.uint32)
    for i in range(8):
        for b in range(32):
            words[32 * i + b, i] ^= np.uint32(1 << b)
    assert len({r.tobytes() for r in flips}) == 256          # 256 distinct vectors
    want = vector_digests(base[None])[0].tobytes()
    got = vector_digests(flips)
    changed = [g.tobytes() != want for g in got]
    assert all(changed), [k for k, c in enumerate(changed) if not c]
    for k in (0, 31, 100, 255):                              # and each is the reference's
        assert got[k].tobytes() == reference_digest(flips[k].tobytes())


# ---------------------------------------------------------------- 2. VectorLog itself
SID = "ab" * 16


def test_log_round_trip_byte_for_byte(tmp_path):
    path = tmp_path / log_file_name(1)
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(2, 4)).astype(np.float32)
    log = VectorLog.create(path, SID, 4)
    assert path.stat().st_size == HEADER_BYTES
    assert log.append(a) == 0 and log.pending == 3 and log.committed == 0
    vecs, missing = log.read([0, 1, 2])
    assert missing.all() and not vecs.any()                  # written, not committed: not read
    log.commit()
    assert log.append(b) == 3
    log.commit()
    raw = path.read_bytes()
    assert len(raw) == HEADER_BYTES + 5 * 16
    assert raw[:8] == b"ESVECLOG" and raw[HEADER_BYTES:] == a.tobytes() + b.tobytes()
    vecs, missing = log.read(range(5))
    assert not missing.any() and vecs.tobytes() == a.tobytes() + b.tobytes()
    log.close()
    again = VectorLog.open(path, SID, 4, committed=5, writable=False)
    all_rows = np.concatenate([a, b])
    order = [4, 0, 0, 2, 4, 1, 3, 3, 2]                       # any order, repeats
    vecs, missing = again.read(order)
    assert not missing.any() and vecs.tobytes() == all_rows[order].tobytes()
    vecs, missing = again.read([-1, 5, 99, 2, -7])            # before the start, past the end
    assert missing.tolist() == [True, True, True, False, True]
    assert vecs[3].tobytes() == all_rows[2].tobytes() and not np.delete(vecs, 3, 0).any()
    vecs, missing = again.read([])
    assert vecs.shape == (0, 4) and len(missing) == 0
    again.close()


def test_a_rolled_back_window_leaves_dead_slots_never_written_over(tmp_path):
    path = tmp_path / log_file_name(1)
    log = VectorLog.create(path, SID, 2)
    x, y = np.ones((2, 2), np.float32), np.full((1, 2), 2, np.float32)
    log.append(x)
    log.rollback()                   # a COMMIT that failed: its slots stay dead
    assert log.append(y) == 2
    log.commit()
    assert path.read_bytes()[HEADER_BYTES:] == x.tobytes() + y.tobytes()
    vecs, missing = log.read([2])
    assert not missing[0] and vecs.tobytes() == y.tobytes()
    log.close()


def test_a_file_cut_mid_slot_reads_the_slots_before_the_cut(tmp_path):
    path = tmp_path / log_file_name(1)
    rows = np.arange(20, dtype=np.float32).reshape(5, 4)
    log = VectorLog.create(path, SID, 4)
    log.append(rows)
    log.commit()
    log.close()
    with open(path, "r+b") as f:
        f.truncate(HEADER_BYTES + 2 * 16 + 7)                # slot 2 cut in its middle
    cut = VectorLog.open(path, SID, 4, committed=5, writable=False)
    assert cut.slots_on_disk() == 2 and cut.short_by() == 3
    for order in ([0, 1, 2, 3, 4], [3, 1, 4, 0, 2], [2, 0, 2, 1]):
        vecs, missing = cut.read(order)
        assert missing.tolist() == [s >= 2 for s in order]
        for k, s in enumerate(order):
            want = rows[s] if s < 2 else np.zeros(4, np.float32)
            assert vecs[k].tobytes() == want.tobytes()
    cut.close()


def test_a_log_of_another_store_or_dimension_is_refused(tmp_path):
    path = tmp_path / log_file_name(1)
    VectorLog.create(path, SID, 4).close()
    with pytest.raises(StoreCorrupted, match="another store") as e:
        VectorLog.open(path, "cd" * 16, 4, committed=0, writable=False)
    assert e.value.remedy == "restore"
    with pytest.raises(StoreCorrupted, match="4-d vectors, the database 8-d"):
        VectorLog.open(path, SID, 8, committed=0, writable=False)
    VectorLog.open(path, SID, 4, committed=0, writable=True).close()
