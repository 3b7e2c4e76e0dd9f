"""bench/store_rows.py: every layout it times writes the same rows, as the store would (the
store's schema, a checksum that verifies with the store's own function), and keeps every vector
where the layout says, in order: the comparison is between equal work."""
from __future__ import annotations

import hashlib
import sqlite3

import numpy as np
import pytest

from bench.store_rows import LAYOUTS, head_checksums, ingest
from index.faiss.row_checks import row_checksum
from index.store.text_hash import text_hash

N, DIM, WINDOW = 300, 8, 128


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    return [f"Sentence {i} of the bench's little corpus." for i in range(N)], vectors


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_layout_writes_every_row_and_vector(layout, data, tmp_path):
    texts, vectors = data
    ingest(layout, texts, vectors, WINDOW, folder=tmp_path)
    conn = sqlite3.connect(tmp_path / "store.db")
    rows = conn.execute("SELECT id, hash, text, vector, checksum FROM sentences ORDER BY id").fetchall()
    assert [r[0] for r in rows] == list(range(1, N + 1))
    assert [r[2] for r in rows] == texts
    assert all(r[1] == text_hash(r[2]) for r in rows)
    if layout.startswith("rows"):
        got = np.stack([np.frombuffer(r[3], np.float32) for r in rows])
        assert all(r[4] == row_checksum(r[0], r[2], None, None, None, r[3]) for r in rows)
    else:
        assert all(r[3] is None for r in rows)
        assert [r[4] for r in rows] == head_checksums(range(1, N + 1), texts)
        if layout.startswith("file"):
            got = np.fromfile(tmp_path / "vectors.f32", np.float32).reshape(-1, DIM)
            blocks = conn.execute("SELECT first, n, checksum FROM log_blocks ORDER BY first").fetchall()
            assert [(b[0], b[1]) for b in blocks] == [(s + 1, min(WINDOW, N - s)) for s in range(0, N, WINDOW)]
            assert [b[2] for b in blocks] == [hashlib.blake2b(got[s:s + WINDOW].tobytes(), digest_size=16).digest()
                                              for s in range(0, N, WINDOW)]
        else:
            blocks = conn.execute("SELECT first, n, data, checksum FROM blocks ORDER BY first").fetchall()
            assert [b[0] for b in blocks] == list(range(1, N + 1, WINDOW))
            assert all(hashlib.blake2b(b[2], digest_size=16).digest() == b[3] for b in blocks)
            got = np.concatenate([np.frombuffer(b[2], np.float32) for b in blocks]).reshape(-1, DIM)
    conn.close()
    np.testing.assert_array_equal(got, vectors)
