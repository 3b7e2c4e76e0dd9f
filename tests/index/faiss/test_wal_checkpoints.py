"""The writer's WAL checkpoints on a helper thread (index/faiss/wal_checkpoints.py): its COMMITs
no longer copy the log into store.db, a helper connection does, between commits; a helper that
fails gives the job back to the writer's own COMMIT; every row stays readable throughout."""
from __future__ import annotations

import sqlite3

import pytest

import index.faiss.wal_checkpoints as wal_checkpoints
from index.faiss.store import VectorStore
from tests.support.store_backends import FakeBackend

D = 16


def autocheckpoint(conn) -> int:
    return conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]


def main_file_rows(folder) -> int:
    """Rows in store.db itself, the WAL set aside (a copy of the main file alone)."""
    copy = folder.parent / "main-only.db"
    copy.write_bytes((folder / "store.db").read_bytes())
    c = sqlite3.connect(copy)
    try:
        return c.execute("SELECT COUNT(*) FROM sentences").fetchone()[0]
    except sqlite3.DatabaseError:
        return 0                      # the tables themselves are still only in the WAL
    finally:
        c.close()
        copy.unlink()


def test_the_writer_leaves_checkpoints_to_a_helper_that_copies_the_rows_between_commits(tmp_path, monkeypatch):
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_ROWS", 50)
    b = FakeBackend(dim=D)
    folder = tmp_path / "s"
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=b.fingerprint())
    assert autocheckpoint(store._db.conn) == 0          # SQLite's own: 1000 (inside COMMIT)
    r = store.add_texts([f"t{i}" for i in range(400)], b, window=100)
    store._db.checkpoint()        # waits for the helper; the writer's own (TRUNCATE) comes after
    helper_done = store._db._checkpoints.done
    assert r.added == 400 and helper_done >= 2
    store.close()
    with VectorStore.open(folder, verify=True) as s:
        assert s.count() == 400


def test_rows_reach_the_database_file_before_close(tmp_path, monkeypatch):
    # 400 small rows are far below SQLite's 1,000-page autocheckpoint: only the helper's
    # row count starts a checkpoint, so store.db itself holds rows while the store is open.
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_ROWS", 50)
    b = FakeBackend(dim=D)
    folder = tmp_path / "s"
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=b.fingerprint())
    store.add_texts([f"t{i}" for i in range(400)], b, window=100)
    store._db._checkpoints.wait()
    assert main_file_rows(folder) >= 300
    store.close()


def test_a_failing_helper_gives_checkpoints_back_to_the_writer(tmp_path, monkeypatch):
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_ROWS", 50)

    def refuse(*a, **k):
        raise sqlite3.OperationalError("unable to open database file")
    b = FakeBackend(dim=D)
    folder = tmp_path / "s"
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=b.fingerprint())
    monkeypatch.setattr(wal_checkpoints, "helper_connection", refuse)
    r = store.add_texts([f"t{i}" for i in range(300)], b, window=100)
    assert r.added == 300
    store._db._checkpoints.wait()
    assert autocheckpoint(store._db.conn) == wal_checkpoints.SQLITE_AUTOCHECKPOINT
    assert not store._db._checkpoints.active
    store.close()
    with VectorStore.open(folder, verify=True) as s:
        assert s.count() == 300


def test_a_reader_has_no_helper(tmp_path):
    b = FakeBackend(dim=D)
    with VectorStore.open(tmp_path / "s", writable=True, create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(["a", "b"], b)
    with VectorStore.open(tmp_path / "s") as s:
        assert s._db._checkpoints is None


@pytest.mark.parametrize("rows", [1, 7])
def test_every_commit_size_keeps_every_row_once(tmp_path, monkeypatch, rows):
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_ROWS", rows)
    b = FakeBackend(dim=D)
    folder = tmp_path / "s"
    with VectorStore.open(folder, writable=True, create=True, fingerprint=b.fingerprint()) as s:
        for k in range(5):
            s.add_texts([f"t{k}-{i}" for i in range(k * 3 + 1)] + ["t0-0"], b)
        s.remove([2])
    with VectorStore.open(folder, verify=True) as s:
        assert s.count() == sum(k * 3 + 1 for k in range(5)) - 1


def test_the_log_restarts_after_each_checkpoint_so_it_stays_about_a_window_long(tmp_path, monkeypatch):
    """SQLite writes the log from its start again only when a write begins with every page of it
    copied into store.db: the writer waits for the checkpoint in flight first. Without it the
    log held every row of the ingest until close (365 MB for 300,000 rows of 384-d)."""
    monkeypatch.setattr(wal_checkpoints, "CHECKPOINT_ROWS", 64)
    b = FakeBackend(dim=384)
    folder = tmp_path / "s"
    wal = folder / "store.db-wal"
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=b.fingerprint())
    sizes = []
    commit = store._db.commit

    def commit_and_measure():
        commit()
        sizes.append(wal.stat().st_size)
    monkeypatch.setattr(store._db, "commit", commit_and_measure)
    r = store.add_texts([f"sentence {i}" for i in range(3000)], b, window=128)
    assert r.added == 3000 and len(sizes) >= 20
    row_bytes = 384 * 4
    # The log's high-water mark is a transaction or two (a window's rows, their index pages,
    # SQLite's page overhead: ~0.38 MB here), never the ingest (2.4 MB and more without the wait).
    assert max(sizes) < 5 * 128 * row_bytes, [round(s / 1e6, 2) for s in sizes]
    store.close()
    with VectorStore.open(folder, verify=True) as s:
        assert s.count() == 3000
