"""The Milvus store on a real Milvus server (the session's `milvus_server`, PyPI's `milvus`
package): versions, half-made collections, the writer lock and ids, `info --check/--repair`,
and the messages a person sees. The contract itself: test_store_contract.py ("server");
kill -9, concurrent writer processes and auth: test_store_milvus_server_faults.py (-m slow)."""
from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time
import uuid

import numpy as np
import pytest

from index.milvus.schema import server_version
from index.opening import open_store
from index.store.errors import StoreError, StoreNotFound
from index.store.text_hash import hash_for_format
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend, text_vector

pytest.importorskip("pymilvus")

D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments


def _name():
    return "t" + uuid.uuid4().hex[:12]


def _client(server):
    from pymilvus import MilvusClient
    return MilvusClient(uri=server.uri)


def assert_every_row_sound(store, backend, texts):
    """count = readable ids = distinct texts = the texts given; each vector is its text's."""
    rows = list(store.iter())
    ids = [r["id"] for r in rows]
    assert store.count() == len(rows) == len(set(ids)) == len({r["text"] for r in rows})
    assert {r["text"] for r in rows} == set(texts)
    got_ids, vecs = store.vectors()
    by_id = {r["id"]: r["text"] for r in rows}
    want = np.stack([backend.embed([by_id[int(i)]])[0] for i in got_ids])
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    np.testing.assert_allclose(vecs, want, atol=1e-5)


def test_server_version_read_and_schema_chosen(milvus_server):
    assert server_version("v2.3.5-lite") == (2, 3) and server_version("2.5.10") == (2, 5)
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        assert s._version == server_version(milvus_server.version)
        s.add_texts(["a text", "with a source"], b, metadata=[None, {"source": "f.txt", "row": 0}])
        got = s.get([1, 2])
    # Before 2.5 the server has no nullable fields: missing values come back as missing.
    assert got[1]["metadata"]["source"] is None and got[1]["metadata"]["row"] is None
    assert got[2]["metadata"]["source"] == "f.txt" and got[2]["metadata"]["row"] == 0


def test_an_older_server_is_refused_with_its_version(milvus_server, monkeypatch):
    import pymilvus
    monkeypatch.setattr(pymilvus.MilvusClient, "get_server_version",
                        lambda self, **kw: "v2.2.16")
    with pytest.raises(StoreError, match=r"runs version v2\.2\.16; Encoderscope needs Milvus "
                                         r"2\.3 or newer"):
        open_store(f"{milvus_server.uri}?collection={_name()}", writable=False)


def test_a_failed_create_leaves_nothing_and_a_half_made_one_is_removed(milvus_server,
                                                                        monkeypatch):
    import pymilvus
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"

    def refuse(self, *a, **kw):
        raise pymilvus.MilvusException(message="index type not match")
    with monkeypatch.context() as m:
        m.setattr(pymilvus.MilvusClient, "create_index", refuse)
        with pytest.raises(StoreError, match="index type not match"):
            open_store(loc, create=True, fingerprint=b.fingerprint())
    assert not _client(milvus_server).has_collection(name)

    # A creator killed between creating the collection and its indexes: no indexes.
    with monkeypatch.context() as m:
        m.setattr(pymilvus.MilvusClient, "create_index", lambda self, *a, **kw: None)
        with pytest.raises(StoreError, match="index not found"):
            open_store(loc, create=True, fingerprint=b.fingerprint())
    assert _client(milvus_server).has_collection(name)
    with pytest.raises(StoreNotFound, match=r"half-made") as e:     # the CLI words the ingest
        open_store(loc, writable=False)
    assert e.value.location == str(loc)
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        assert s.add_texts(["one", "two"], b).ids == [1, 2]
    assert set(_client(milvus_server).list_indexes(name)) == {"vector", "hash"}


def test_a_collection_another_writer_is_making_is_waited_for_not_dropped(milvus_server, monkeypatch):
    """Writers starting at once on a new collection: one is between creating the collection
    and its indexes when another opens it. The other waits (the creator holds the writer
    lock), then opens the finished collection; it dropped it as "half-made" before, and the
    creator failed with `could not create the collection's indexes: collection not found`."""
    import threading

    import pymilvus
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    creating, resume = threading.Event(), threading.Event()
    original_index, original_drop = pymilvus.MilvusClient.create_index, pymilvus.MilvusClient.drop_collection
    paused, dropped = [], []

    def slow_first_create_index(self, collection, *a, **kw):
        if collection == name and not paused:
            paused.append(1)
            creating.set()
            resume.wait(6.0)      # the second writer's open runs meanwhile
        return original_index(self, collection, *a, **kw)

    def drop(self, collection, *a, **kw):
        if collection == name:
            dropped.append(collection)
            resume.set()          # the creator goes on right after its collection went
        return original_drop(self, collection, *a, **kw)
    monkeypatch.setattr(pymilvus.MilvusClient, "create_index", slow_first_create_index)
    monkeypatch.setattr(pymilvus.MilvusClient, "drop_collection", drop)
    errors, ids = [], {}

    def writer(tag):
        try:
            with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
                ids[tag] = s.add_texts([f"{tag} one", f"{tag} two"], b).ids
        except Exception as e:  # noqa: BLE001  (reported below)
            errors.append(f"{tag}: {e}")
        finally:
            if tag == "second":
                resume.set()
    first = threading.Thread(target=writer, args=("first",))
    first.start()
    assert creating.wait(60)
    second = threading.Thread(target=writer, args=("second",))
    second.start()
    for t in (first, second):
        t.join(120)
    assert not errors and not dropped, (errors, dropped)
    assert sorted(ids["first"] + ids["second"]) == [1, 2, 3, 4]
    with open_store(loc, writable=False) as s:
        assert sorted(r["text"] for r in s.iter()) == ["first one", "first two", "second one", "second two"]
    assert not _client(milvus_server).has_collection(name + "__writer")


def test_a_store_opened_after_another_process_wrote_reads_every_row_at_once(milvus_server):
    """A new client's Session reads are only eventually consistent (pymilvus sends guarantee
    timestamp 1 until it has written): right after another process's ingest, a read could miss
    its last batch (the slow fault test once read 3192 of 3200 rows, count 3200). The first
    read of an opened store waits for every row (Strong); the ones after it need not."""
    loc = f"{milvus_server.uri}?collection={_name()}"
    texts = [f"written elsewhere {i}" for i in range(200)]
    w = subprocess.run([sys.executable, "-c", ADD_ELSEWHERE, loc, *texts], cwd=ROOT, text=True,
                       env=child_env(), capture_output=True, timeout=600)
    assert w.returncode == 0, w.stderr
    with open_store(loc, writable=False) as s:
        levels = []
        real = s._client.query

        def query(*args, **kw):
            levels.append(kw.get("consistency_level"))
            return real(*args, **kw)

        s._client.query = query
        assert [r["text"] for r in s.iter()] == texts
        assert s.count() == 200
    assert levels[0] == "Strong" and set(levels[1:]) == {"Session"}, levels


ADD_ELSEWHERE = f"""
import sys
from index.opening import open_store
from tests.support.store_backends import FakeBackend
b = FakeBackend(dim={D})
with open_store(sys.argv[1], create=True, fingerprint=b.fingerprint(), index="flat") as s:
    s.add_stream([(t, None) for t in sys.argv[2:]], b, batch_size=64, window=128)
"""


def test_ids_are_verified_against_the_stored_rows_not_the_counter(milvus_server):
    """A next_id hint rolled back (what a server restart did, Milvus issue #30144) never hands
    out an id in use."""
    from index.milvus.schema import PROP
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts([f"first {i}" for i in range(50)], b)
    _client(milvus_server).alter_collection_properties(name, {PROP + "next_id": "1"})
    with open_store(loc) as s:
        r = s.add_texts([f"second {i}" for i in range(20)], b)
        assert r.ids == list(range(51, 71))
        assert_every_row_sound(s, b, [f"first {i}" for i in range(50)] +
                               [f"second {i}" for i in range(20)])


@pytest.mark.slow
def test_two_writers_in_threads_store_every_text_once(milvus_server):
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat").close()
    texts = [f"shared {i}" for i in range(300)]
    own = {k: [f"only {k} {i}" for i in range(200)] for k in "ab"}
    errors = []

    def write(k):
        try:
            with open_store(loc) as s:
                s.add_stream([(t, None) for t in texts + own[k]], b, batch_size=64, window=128)
        except Exception as e:   # noqa: BLE001
            errors.append(e)
    threads = [threading.Thread(target=write, args=(k,)) for k in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with open_store(loc, writable=False) as s:
        assert_every_row_sound(s, b, texts + own["a"] + own["b"])
        report = s.check(b)
    assert report["hidden_ids"] == [] and report["duplicates"] == {}


def test_an_abandoned_writer_lock_is_taken_over(milvus_server, monkeypatch):
    from index.milvus import lease as ids
    monkeypatch.setattr(ids, "LEASE", 1.0)
    monkeypatch.setattr(ids, "MARGIN", 0.2)
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        lock = ids.ServerWriterLock(s._client, s._call, name, "x")
        lock.acquire()           # a writer stalled while it held the lock: never renewed
        lock._stop.set()
        t = time.monotonic()
        assert s.add_texts(["after the dead writer"], b).ids == [1]
        assert time.monotonic() - t >= 1.0
        assert not _client(milvus_server).has_collection(ids.lock_name(name))


def test_check_finds_and_repair_fixes_hidden_rows_and_duplicate_texts(milvus_server):
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    texts = [f"sentence {i}" for i in range(40)]
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(texts, b)
        fresh = s.check(b)
        assert fresh["rows"] == fresh["readable"] == 40 and fresh["sampled"] > 0
        assert fresh["hidden_ids"] == [] and fresh["duplicates"] == {} and not fresh["vectors_off"]
    # What colliding writers left behind before ids were verified: a second row under id 7,
    # and "sentence 3" again under id 41.
    h = hash_for_format(2)
    c = _client(milvus_server)

    def row(id_, text):
        return {"id": id_, "vector": text_vector(text, D, "f" * 64 + "mean").tolist(),
                "text": text, "hash": h(text), "source": "", "row": -1, "added": 0.0,
                "meta": {}}
    c.insert(name, [row(7, "hidden text"), row(41, "sentence 3")])
    with open_store(loc) as s:
        found = s.check(b)
        assert found["rows"] == 42 and found["readable"] == 41
        assert found["hidden_ids"] == [7]
        assert found["duplicates"] == {h("sentence 3"): [4, 41]}
        fixed = s.check(b, repair=True)["repaired"]
        assert fixed == {"hidden_dropped": 1, "duplicates_removed": 1, "hashes_rewritten": 0,
                         "vectors_reembedded": 0}
        after = s.check(b)
        assert after["rows"] == after["readable"] == 40
        assert after["hidden_ids"] == [] and after["duplicates"] == {}
        readable = [r["text"] for r in s.iter()]
        assert len(readable) == len(set(readable)) == 40


def _cli(*args, env=None):
    env = child_env(**(env or {}))
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_cli_on_the_server_check_and_missing_database(milvus_server, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("The cat sat on the mat.\nA dog barked at night.\nRain fell.\n")
    name = _name()
    missing = _cli("info", "--store", f"{milvus_server.uri}/nodb?collection={name}")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    line = missing.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("error:") and "no database nodb:" in line
    assert "ingest" not in line      # the fix is the database, whatever the command was
    default = shlex.split(line.split("(--store ", 1)[1].rstrip(")"))[0]
    assert default == f"{milvus_server.uri}?collection={name}"
    made = _cli("ingest", str(corpus), "--store", default, "--quiet")
    assert made.returncode == 0, made.stderr
    assert "holds 3 sentences" in made.stdout
    check = _cli("info", "--check", "--store", f"{milvus_server.uri}?collection={name}")
    assert check.returncode == 0, check.stderr
    assert "check: ok: 3 sentences read back of 3 rows" in check.stderr
    assert "every hash its text's; all 3 vectors checked: all right; the store holds 3" in check.stderr
