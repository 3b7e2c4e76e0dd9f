"""The trust cases of test_store_contract_trust.py on the folder engines, FAISS and Milvus Lite,
whose one writer is a process holding the folder's OS lock (no lease to expire): a rebuild
racing a writer of the same store (the app's jobs share one store), a writer stopped (SIGSTOP)
mid-ingest while another process wants to write, a writer killed (-9) right after removals and
the next one inserting, and repair of a damaged row. Every case checks every row on its own:
count = readable ids = distinct texts, and each vector is its text's embedding."""
from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading

import pytest

from index.opening import open_store
from index.store.errors import ModelMismatch, StoreLocked
from tests.index.store.test_contract_trust import sound
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend
from tests.support.store_contract import milvus_available

D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments
needs_milvus = pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra")
KINDS = ["faiss", pytest.param("milvus", marks=needs_milvus)]


def _loc(kind, tmp_path):
    return str(tmp_path / "s") if kind == "faiss" else f"milvus-lite:{tmp_path / 's'}"


class RebuildInside(FakeBackend):
    """A backend whose first mean-pooled embedding waits while `during` runs (a rebuild)."""

    def __init__(self, *a, during=None, **kw):
        super().__init__(*a, **kw)
        self.during, self.done = during, False

    def embed(self, texts, *a, pooling="mean", **kw):
        if pooling == "mean" and not self.done and self.during is not None:
            self.done = True
            self.during()
        return super().embed(texts, *a, pooling=pooling, **kw)


@pytest.mark.parametrize("kind", KINDS)
def test_a_rebuild_inside_a_writers_embedding_mixes_no_two_poolings(kind, tmp_path):
    """The writer embeds its batch (mean) while a rebuild re-embeds the store with cls on the
    same store: the batch must not be committed as mean vectors into the cls store."""
    b = FakeBackend(dim=D)
    first = [f"first {i}" for i in range(50)]
    later = [f"later {i}" for i in range(40)]
    with open_store(_loc(kind, tmp_path), create=True, fingerprint=b.fingerprint(),
                    index="flat") as s:
        s.add_texts(first, b)
        rebuilt = []

        def rebuild():                 # another job of the app, on another thread
            t = threading.Thread(target=lambda: (s.rebuild(b, pooling="cls"), rebuilt.append(1)))
            t.start()
            t.join(60)
        writer = RebuildInside(dim=D, during=rebuild)
        try:
            s.add_texts(later, writer)
            committed = later
        except ModelMismatch as e:      # told, in one line, that the store changed under it
            assert "\n" not in str(e)
            committed = []
        assert rebuilt and s.pooling == "cls"
        sound(s, b, first + committed, pooling="cls")


WRITER = """
import os, signal, sys
from index.opening import open_store
from tests.support.store_backends import FakeBackend
loc, mode = sys.argv[1], sys.argv[2]
b = FakeBackend(dim={D})
with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
    if mode == "remove-then-die":
        s.add_texts([f"first {i}" for i in range(100)], b)
        s.remove(list(range(91, 101)) + [40])
        print("removed", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)       # no close, no save: as a crash
    for k in range(20):
        s.add_texts([f"stopped {k} {i}" for i in range(16)], b)
        print("committed", k, flush=True)
"""
WRITER = WRITER.replace("{D}", str(D))


def _child(loc, mode):
    return subprocess.Popen([sys.executable, "-c", WRITER, loc, mode], cwd=ROOT, text=True,
                            env=child_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_stopped_writer_keeps_its_folder_and_finishes_without_reusing_an_id(kind, tmp_path):
    """No lease here: the OS lock stays with the stopped process, so a second writer is
    refused (naming it) instead of writing beside it; continued, it finishes its work."""
    b = FakeBackend(dim=D)
    loc = _loc(kind, tmp_path)
    child = _child(loc, "write")
    try:
        for _ in range(3):
            assert child.stdout.readline().startswith("committed")
        child.send_signal(signal.SIGSTOP)
        with pytest.raises(StoreLocked) as e:
            open_store(loc)
        assert e.value.pid == child.pid and "\n" not in str(e.value)
        if kind == "faiss":            # readers go on (Milvus Lite lets one process in)
            with open_store(loc, writable=False) as s:
                assert s.count() >= 48
        child.send_signal(signal.SIGCONT)
        _out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    texts = [f"stopped {k} {i}" for k in range(20) for i in range(16)]
    with open_store(loc) as s:
        ids = sound(s, b, texts)
        assert sorted(ids) == list(range(1, len(texts) + 1))
        assert s.add_texts(["after"], b).ids == [len(texts) + 1]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_writer_killed_after_removals_leaves_their_ids_unused(kind, tmp_path):
    b = FakeBackend(dim=D)
    loc = _loc(kind, tmp_path)
    child = _child(loc, "remove-then-die")
    out, err = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGKILL and "removed" in out, err
    with open_store(loc) as s:                 # the next process: inserts after the crash
        assert s.add_texts([f"second {i}" for i in range(10)], b).ids == list(range(101, 111))
        kept = [f"first {i}" for i in range(90) if i != 39]
        ids = sound(s, b, kept + [f"second {i}" for i in range(10)])
        assert sorted(ids) == sorted(set(range(1, 91)) - {40}) + list(range(101, 111))


def test_repair_sets_a_damaged_faiss_row_aside_and_keeps_every_other_row_sound(tmp_path):
    from index.faiss.store import VectorStore
    b = FakeBackend(dim=D)
    texts = [f"sentence {i}" for i in range(40)]
    folder = tmp_path / "s"
    with open_store(str(folder), create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(texts, b)
    with sqlite3.connect(folder / "store.db") as c:           # a flipped text under row 7
        c.execute("UPDATE sentences SET text = 'sentence 6 tampered' WHERE id = 7")
    with VectorStore.open(folder, writable=True, repair=True) as s:
        report = s.check_report or {}
        assert report.get("set_aside") == [7]
        sound(s, b, [t for i, t in enumerate(texts, 1) if i != 7])
    with sqlite3.connect(folder / "store.db") as c:           # kept, not deleted
        assert c.execute("SELECT id FROM damaged").fetchall() == [(7,)]
    with open_store(str(folder)) as s:
        assert s.add_texts(["sentence 6"], b).ids == [41]     # its id is not handed out again
