"""A user who may read a FAISS store but not write it, reading while its owner ingests: the
commits still in the write-ahead log are read (SQLite reads them through the writer's
shared-memory file), never "read-only media... copy the store folder"; when SQLite cannot, the
message says it is a permission matter. Run as a real other user when the tests run as root
(a forked child drops to `nobody`), and with the permission check simulated everywhere."""
import os
import shutil
import sqlite3
import tempfile

import numpy as np
import pytest

from core.encoder.fingerprint import Fingerprint
from index.faiss import sentences
from index.faiss.store import VectorStore
from tests.support.fake_vectors import text_vector

FP = Fingerprint("fake", "f" * 64, "mean", 16, True)
FIRST = ["the cat sat", "the dog ran", "a bird flew"]
LATER = ["the owner added this", "and this one too"]


@pytest.fixture()
def writing():
    """A store whose owner has committed LATER after the last checkpoint, and is still open."""
    base = tempfile.mkdtemp(prefix="perm-", dir="/tmp")
    os.chmod(base, 0o755)
    folder = os.path.join(base, "s")
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=FP)
    store.add(FIRST, np.stack([text_vector(t, 16) for t in FIRST]), fingerprint=FP)
    store.save()
    store._db.conn.execute("PRAGMA wal_autocheckpoint=0")
    store.add(LATER, np.stack([text_vector(t, 16) for t in LATER]), fingerprint=FP)
    for root, dirs, files in os.walk(base):
        for name in dirs + files:
            os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
    assert os.path.getsize(os.path.join(folder, "store.db-wal")) > 0
    yield folder
    store.close()
    shutil.rmtree(base)


def read_count(folder):
    reader = VectorStore.open(folder, writable=False)
    try:
        return reader.count(), sorted(r["text"] for r in reader.iter())
    finally:
        reader.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="dropping to another user needs root")
def test_another_user_reads_the_commits_in_the_log_while_the_owner_writes(writing):
    read_count(writing)                # every module the reader needs is imported before the drop
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                       # the child: the user `nobody`, who may read but not write
        try:
            os.setgid(65534)
            os.setuid(65534)
            assert not os.access(writing, os.W_OK)
            n, texts = read_count(writing)
            os.write(w, f"{n}|{'|'.join(texts)}".encode())
        except BaseException as e:     # noqa: BLE001 - reported to the parent
            os.write(w, f"error {type(e).__name__}: {e}".encode())
        finally:
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    said = os.read(r, 65536).decode()
    os.close(r)
    assert said.split("|")[0] == "5", said
    assert set(said.split("|")[1:]) == set(FIRST + LATER)


def test_a_reader_without_write_permission_reads_the_log(writing, monkeypatch):
    monkeypatch.setattr(sentences, "on_read_only_media", lambda path: True)
    n, texts = read_count(writing)
    assert n == 5 and set(texts) == set(FIRST + LATER)


def test_when_the_log_cannot_be_read_it_is_called_a_permission_matter(writing, monkeypatch):
    from index.store.errors import StoreError
    monkeypatch.setattr(sentences, "on_read_only_media", lambda path: True)
    real = sqlite3.connect

    def refused(target, *a, **kw):     # what SQLite says when it may not use the -shm file
        if "mode=ro" in str(target):
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, *a, **kw)
    monkeypatch.setattr(sentences.sqlite3, "connect", refused)
    with pytest.raises(StoreError) as said:
        read_count(writing)
    msg = str(said.value)
    assert "read-only media" not in msg and "copy the store folder" not in msg
    assert "not write to it" in msg and "write permission" in msg


def test_real_read_only_media_keeps_its_message(writing, monkeypatch):
    from index.store.errors import StoreError
    monkeypatch.setattr(sentences, "on_read_only_media", lambda path: True)
    monkeypatch.setattr(sentences, "mounted_read_only", lambda folder: True)
    with pytest.raises(StoreError, match="read-only media"):
        read_count(writing)
