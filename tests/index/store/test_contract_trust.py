"""The store contract on trust, on the FAISS store, Milvus Lite and a real Milvus server (the
session's `milvus_server`): a store never deletes or rewrites what is not its own, one writer
at a time on every write path (a rebuild racing a writer loses nothing and mixes no two
poolings; a writer stalled past its lease stops instead of writing), ids are never handed out
twice (after removals and a server that lost its id counter), and repair fixes what check
finds. Every case checks every row on its own: count = readable ids = distinct texts, and
each vector is its text's embedding under the store's model."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from index.opening import open_store
from index.store.errors import ModelMismatch, StoreError, StoreLocked, WriterLockLost
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend
from tests.support.store_contract import needs_milvus

D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments


def _name():
    return "t" + uuid.uuid4().hex[:12]


def _loc(kind, tmp_path, server=None, name=None):
    if kind == "server":
        return f"{server.uri}?collection={name or _name()}"
    return str(tmp_path / "s") if kind == "faiss" else f"milvus-lite:{tmp_path / 's'}"


def sound(store, backend, texts, pooling="mean"):
    """count = readable ids = distinct texts = `texts`; each vector its text's (pooling)."""
    rows = list(store.iter())
    ids = [r["id"] for r in rows]
    assert store.count() == len(rows) == len(set(ids)) == len({r["text"] for r in rows})
    assert {r["text"] for r in rows} == set(texts)
    got_ids, vecs = store.vectors()
    by_id = {r["id"]: r["text"] for r in rows}
    want = backend.embed([by_id[int(i)] for i in got_ids], pooling=pooling)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(vecs, want, atol=1e-5)
    return ids


def _raw(server):
    from pymilvus import MilvusClient
    return MilvusClient(uri=server.uri)


def _foreign_collection(client, name, rows=100):
    """Another tool's collection: sku, embedding, title, its index named after its field."""
    from pymilvus import DataType, MilvusClient
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("sku", DataType.INT64, is_primary=True)
    schema.add_field("embedding", DataType.FLOAT_VECTOR, dim=4)
    schema.add_field("title", DataType.VARCHAR, max_length=64)
    ip = client.prepare_index_params()
    ip.add_index("embedding", index_type="FLAT", metric_type="L2")
    client.create_collection(name, schema=schema, index_params=ip)
    if rows:
        client.insert(name, [{"sku": i, "embedding": [float(i), 0, 0, 1], "title": f"p{i}"}
                             for i in range(rows)])
        client.flush(name)


def _rows(client, name):
    client.load_collection(name)
    got = client.query(name, filter="", output_fields=["count(*)"],
                       consistency_level="Strong")
    return int(got[0]["count(*)"])


# ---- a store deletes or rewrites only what is its own ----------------------------------------
@needs_milvus
def test_a_foreign_server_collection_is_never_dropped_or_written(milvus_server):
    b = FakeBackend(dim=D)
    c = _raw(milvus_server)
    name = _name()
    _foreign_collection(c, name)
    loc = f"{milvus_server.uri}?collection={name}"
    for kw in ({"create": True, "fingerprint": b.fingerprint()}, {"writable": False}):
        with pytest.raises(StoreError) as e:
            open_store(loc, **kw)
        msg = str(e.value)
        assert "\n" not in msg and "not made by Encoderscope" in msg and name in msg
        assert "?collection=NAME" in msg and "half-made" not in msg
    assert _rows(c, name) == 100 and set(c.list_indexes(name)) == {"embedding"}


@needs_milvus
@pytest.mark.parametrize("kind", ["milvus", pytest.param("server", marks=pytest.mark.slow)])
def test_foreign_rebuild_and_writer_companions_are_kept(kind, tmp_path, request):
    server = request.getfixturevalue("milvus_server") if kind == "server" else None
    b = FakeBackend(dim=D)
    name = _name() if server else "sentences"
    loc = _loc(kind, tmp_path, server, name)
    s = open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat")
    try:
        s.add_texts(["one", "two"], b)
        c = s._client
        _foreign_collection(c, name + "__rebuild", rows=5)
        s.close()
        s = open_store(loc)            # a writable open leaves another tool's staging name alone
        c = s._client
        assert _rows(c, name + "__rebuild") == 5
        with pytest.raises(StoreError, match="not made by Encoderscope") as e:
            s.rebuild(b, pooling="cls")
        assert "\n" not in str(e.value) and f"{name}__rebuild" in str(e.value)
        assert _rows(c, name + "__rebuild") == 5
        sound(s, b, ["one", "two"])
        if kind == "server":           # the writer lock's place (Lite locks its folder instead)
            _foreign_collection(c, name + "__writer", rows=3)
            with pytest.raises(StoreError, match="did not make") as e:
                s.add_texts(["three"], b)
            assert "\n" not in str(e.value) and "?collection=NAME" in str(e.value)
            assert _rows(c, name + "__writer") == 3
            sound(s, b, ["one", "two"])
    finally:
        s.close()


@pytest.mark.parametrize("kind", ["faiss", pytest.param("milvus", marks=needs_milvus)])
def test_a_foreign_folder_is_kept_intact(tmp_path, kind):
    b = FakeBackend(dim=D)
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="not empty and holds no store"):
        open_store(str(folder) if kind == "faiss" else f"milvus-lite:{folder}", create=True,
                   fingerprint=b.fingerprint())
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    assert (folder / "notes.txt").read_text() == "mine"


# ---- one writer at a time -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["faiss", pytest.param("milvus", marks=needs_milvus)])
def test_a_second_writer_on_a_folder_is_refused_while_one_writes(kind, tmp_path):
    b = FakeBackend(dim=D)
    loc = _loc(kind, tmp_path)
    with open_store(loc, create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(["one"], b)
        with pytest.raises(StoreLocked):
            open_store(loc)            # a rebuild, remove, migrate or repair would open so
        sound(s, b, ["one"])


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
@needs_milvus
def test_a_rebuild_racing_a_writer_loses_nothing_and_keeps_one_pooling(milvus_server):
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    first = [f"first {i}" for i in range(300)]
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(first, b)
    later = [f"later {i}" for i in range(1500)]
    committed, failure = [], []
    started = threading.Event()

    def write():
        try:
            with open_store(loc) as w:
                for k in range(0, len(later), 100):
                    w.add_texts(later[k:k + 100], b)
                    committed.extend(later[k:k + 100])
                    started.set()
        except ModelMismatch as e:        # the store was re-embedded under this writer
            failure.append(e)
        finally:
            started.set()
    t = threading.Thread(target=write)
    t.start()
    started.wait(60)
    with open_store(loc) as r:
        r.rebuild(b, pooling="cls", batch_size=64)
    t.join(120)
    assert not t.is_alive()
    with open_store(loc, writable=False) as s:
        assert s.pooling == "cls"
        stored = {r["text"] for r in s.iter()}
        assert set(committed) <= stored and set(first) <= stored    # nothing committed lost
        sound(s, b, stored, pooling="cls")                           # one pooling throughout
    if failure:
        assert "re-embedded" in str(failure[0]) and "\n" not in str(failure[0])


STALLED_WRITER = """
import sys, time
from index.milvus import lease, store as mstore
from index.opening import open_store
from tests.support.store_backends import FakeBackend
lease.LEASE, lease.MARGIN, lease.RENEW_AFTER = 4.0, 1.0, 1.0
uri = sys.argv[1]
b = FakeBackend(dim={D})
real = mstore.MilvusStore._store_planned
def slow(self, *a, **kw):            # a commit that holds the lock a while before it writes
    print("committing", flush=True)
    time.sleep(0.5)
    return real(self, *a, **kw)
mstore.MilvusStore._store_planned = slow
with open_store(uri) as s:
    for k in range(40):
        s.add_texts([f"stalled {k} {i}" for i in range(32)], b)
""".replace("{D}", str(D))


@needs_milvus
@pytest.mark.slow
def test_a_writer_stalled_past_its_lease_stops_before_writing(milvus_server, monkeypatch):
    from index.milvus import lease
    monkeypatch.setattr(lease, "LEASE", 4.0)
    monkeypatch.setattr(lease, "MARGIN", 1.0)
    monkeypatch.setattr(lease, "RENEW_AFTER", 1.0)
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(["before"], b)
    child = subprocess.Popen([sys.executable, "-c", STALLED_WRITER, loc], cwd=ROOT,
                             env=child_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(3):
            assert child.stdout.readline().startswith("committing")
        child.send_signal(signal.SIGSTOP)       # inside a commit, holding the lock
        time.sleep(0.5)
        t = time.monotonic()
        with open_store(loc) as s:
            mine = [f"while stalled {i}" for i in range(64)]
            s.add_texts(mine, b)                # takes the abandoned lock over
        assert time.monotonic() - t < 30
        time.sleep(max(0.0, 6.0 - (time.monotonic() - t)))
        child.send_signal(signal.SIGCONT)
        _out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode != 0 and "lost the writer lock" in err, err[-2000:]
    assert "Traceback" in err or "WriterLockLost" in err
    with open_store(loc, writable=False) as s:
        stored = {r["text"] for r in s.iter()}
        assert set(mine) | {"before"} <= stored
        sound(s, b, stored)
        report = s.check(b)
    assert report["hidden_ids"] == [] and report["duplicates"] == {}
    assert report["rows"] == report["readable"] == len(stored)


@needs_milvus
def test_a_lost_lease_stops_the_next_write(milvus_server, monkeypatch):
    """The fence: a holder whose lease ran out on its own clock writes nothing more."""
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(["kept"], b)
        with pytest.raises(WriterLockLost, match="lost the writer lock") as e:
            with s.exclusive():
                s._server_lock._valid_until = time.monotonic() - 1     # as after a stall
                s.add_texts(["never written"], b)
        assert "\n" not in str(e.value)
        assert s._call.lease is None
        sound(s, b, ["kept"])


@needs_milvus
def test_a_lock_of_a_killed_writer_on_this_machine_is_taken_over_at_once(milvus_server,
                                                                         caplog):
    from index.milvus import lease
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        held = lease.ServerWriterLock(s._client, s._call, name, "x")
        held.acquire()
        held._stop.set()
        s._client.drop_collection(lease.lock_name(name))
        schema = held._schema(held.token)
        schema._description = schema.description.replace(f" {os.getpid()} ", f" {dead.pid} ")
        s._client.create_collection(lease.lock_name(name), schema=schema)
        t = time.monotonic()
        with caplog.at_level("WARNING", logger="index.milvus.lease"):
            assert s.add_texts(["after the dead writer"], b).ids == [1]
        assert time.monotonic() - t < lease.LEASE / 2
        assert f"process {dead.pid}" in caplog.text and "abandoned" in caplog.text


# ---- ids never handed out twice ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["faiss", pytest.param("milvus", marks=needs_milvus),
                                  pytest.param("server", marks=needs_milvus)])
def test_ids_of_removed_sentences_are_not_reused_after_a_restart(kind, tmp_path, request):
    server = request.getfixturevalue("milvus_server") if kind == "server" else None
    b = FakeBackend(dim=D)
    name = _name()
    loc = _loc(kind, tmp_path, server, name)
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts([f"first {i}" for i in range(100)], b)
        assert s.remove(range(91, 101)) == list(range(91, 101))
    if kind == "server":
        # What a server restart did: the acknowledged next_id property lost (milvus#30144).
        from index.milvus.schema import PROP
        _raw(server).alter_collection_properties(name, {PROP + "next_id": "91"})
    with open_store(loc) as s:               # a new process's view: reopened
        r = s.add_texts([f"second {i}" for i in range(10)], b)
        assert r.ids == list(range(101, 111))
        ids = sound(s, b, [f"first {i}" for i in range(90)] + [f"second {i}" for i in range(10)])
        assert sorted(ids) == list(range(1, 91)) + list(range(101, 111))
        s.clear()
        assert s.add_texts(["after clear"], b).ids == [111]


# ---- repair fixes what check finds -------------------------------------------------------------
@pytest.mark.parametrize("kind", [pytest.param("milvus", marks=needs_milvus),
                                  pytest.param("server", marks=needs_milvus)])
def test_repair_fixes_every_damaged_row_that_check_finds(kind, tmp_path, request):
    from index.store.text_hash import hash_for_format
    from tests.support.store_backends import text_vector
    server = request.getfixturevalue("milvus_server") if kind == "server" else None
    b = FakeBackend(dim=D)
    name = _name() if server else "sentences"
    loc = _loc(kind, tmp_path, server, name)
    texts = [f"sentence {i}" for i in range(40)]
    h = hash_for_format(2)
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(texts, b)
        row = s._records([5], ["*"])[5]
        placeholders = {k: row[k] for k in ("source", "row", "meta", "added")}

        def put(id_, text, hash_, vector_of):
            return {"id": id_, "vector": text_vector(vector_of, D, "f" * 64 + "mean").tolist(),
                    "text": text, "hash": hash_, **placeholders}
        c = s._client
        c.upsert(name, [put(6, "sentence 5", "0" * 32, "sentence 5"),      # a wrong hash
                        put(7, "sentence 6", h("sentence 6"), "sentence 30")])  # a wrong vector
        c.insert(name, [put(41, "sentence 3", "f" * 32, "sentence 3")])  # twice, a wrong hash
        c.flush(name)
    with open_store(loc) as s:
        found = s.check(b, full=True)
        assert found["wrong_hash"] == [6, 41] and found["vectors_off"] == [7]
        assert found["duplicates"] == {h("sentence 3"): [4, 41]}
        assert found["sampled"] == 41 and found["full"]
        report = s.check(b, repair=True, full=True)
        assert report["repaired"] == {"hidden_dropped": 0, "duplicates_removed": 1,
                                      "hashes_rewritten": 1, "vectors_reembedded": 1}
        after = report["after"]                     # what the "ok" line reports
        assert after["rows"] == after["readable"] == 40
        assert after["wrong_hash"] == [] and after["vectors_off"] == [] and \
            after["duplicates"] == {}
        sound(s, b, texts)
        assert s.id_of("sentence 5") == 6
    with open_store(loc, writable=False) as s:
        again = s.check(b, full=True)
        assert again["wrong_hash"] == again["vectors_off"] == [] and again["duplicates"] == {}


# ---- messages --------------------------------------------------------------------------------
class _RpcError(Exception):
    """What gRPC raises: str() is a multi-line repr of its status; details() the words."""

    def __init__(self, code, details):
        super().__init__(f"<_InactiveRpcError of RPC that terminated with:\n\tstatus = "
                         f"StatusCode.{code}\n\tdetails = \"{details}\"\n\tdebug_error_string = "
                         "\"UNKNOWN:Error received from peer\"\n>")
        self._code, self._details = code, details

    def code(self):
        return type("Code", (), {"name": self._code})()

    def details(self):
        return self._details


def test_server_errors_are_one_line_and_say_permission_or_token():
    from index.milvus.calls import unavailable
    from index.store.location import parse_location
    loc = parse_location("http://127.0.0.1:19530?collection=c")
    hung = unavailable(loc, _RpcError("DEADLINE_EXCEEDED", "Deadline Exceeded"), "insert sentences")
    assert "\n" not in str(hung) and "_InactiveRpcError" not in str(hung)
    assert "did not answer in time" in str(hung) and "(Deadline Exceeded)" in str(hung)
    denied = unavailable(loc, _RpcError("PERMISSION_DENIED", "PrivilegeInsert: permission deny "
                                        "to reader"), "insert sentences")
    assert "\n" not in str(denied) and "may not insert sentences" in str(denied)
    assert "administrator" in str(denied) and "check the token" not in str(denied)
    refused = unavailable(loc, _RpcError("UNAUTHENTICATED", "auth check failure"), "connect")
    assert "refused the credentials" in str(refused) and "check the token" in str(refused)


def test_ingest_cut_off_words_what_it_kept():
    from app.cli.store import _kept
    from index.store.adding import AddResult
    from index.store.errors import StoreUnavailable
    e = StoreUnavailable("cannot reach the server. Nothing was changed locally.")
    none = str(_kept(e, AddResult(ids=[], added=0), given=5))
    assert "The 0 new" not in none and "stored no new sentence yet" in none
    one = str(_kept(e, AddResult(ids=[], added=1), given=5))
    assert "The 1 new sentence this run stored before that is kept" in one
