"""Trust on a real Milvus server (the session's `milvus_server`, PyPI's `milvus` 2.3.x): a
writable open beside a running rebuild leaves its staging collection alone (tidied only under
the writer lock, when its owner is gone); `--check` reads every vector of a small store and
names a sample as one; migrate keeps ids across gaps both ways; a user who may only read runs
`info --check`; the lease says why it was lost, every time."""
from __future__ import annotations

import shlex
import subprocess
import sys
import threading
import time
import uuid

import pytest

from index.opening import open_store
from index.store.errors import ModelMismatch, WriterLockLost
from tests.index.milvus.test_server import assert_every_row_sound
from tests.support.milvus_server import ROOT_TOKEN, LocalMilvus, why_cannot_run
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend, text_vector

pytest.importorskip("pymilvus")

D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments
MODEL = "random:dim=32,layers=1,heads=2,ffn=64,seed=5"


def _name():
    return "t" + uuid.uuid4().hex[:12]


def _client(server, token=None):
    from pymilvus import MilvusClient
    return MilvusClient(uri=server.uri, **({"token": token} if token else {}))


class SlowBackend(FakeBackend):
    """A model that takes its time (a rebuild that runs for a while)."""

    def embed(self, texts, *a, **kw):
        time.sleep(0.4)
        return super().embed(texts, *a, **kw)


def _cli(*args, token=None):
    env = child_env()
    if token is not None:
        env["ENCODERSCOPE_MILVUS_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "app.cli", *map(str, args)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)


def _one_error(p) -> str:
    lines = [x for x in p.stderr.splitlines() if x.startswith("error: ")]
    assert p.returncode == 2 and len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    return lines[0]


@pytest.mark.slow   # a rebuild that runs for seconds on purpose
def test_a_writable_open_during_a_rebuild_leaves_its_staging_collection(milvus_server):
    old, new = FakeBackend(dim=D), SlowBackend(name="other", dim=D, weights="e" * 64)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    texts = [f"sentence {i}" for i in range(60)]
    with open_store(loc, create=True, fingerprint=old.fingerprint(), index="flat") as s:
        s.add_texts(texts, old)
    errors = []

    def rebuild():
        try:
            with open_store(loc) as s:
                s.rebuild(new, batch_size=10)
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)
    worker = threading.Thread(target=rebuild)
    worker.start()
    c = _client(milvus_server)
    deadline = time.monotonic() + 60
    while not c.has_collection(name + "__rebuild") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.has_collection(name + "__rebuild"), "the rebuild never staged"
    opened = open_store(loc)             # what `ingest` or `remove` does first
    assert c.has_collection(name + "__rebuild"), "a writable open dropped the running rebuild's staging"
    writer_error = []

    def ingest():     # waits for the writer lock, then finds the store re-embedded
        try:
            opened.add_texts(["added beside the rebuild"], old)
        except Exception as e:   # noqa: BLE001
            writer_error.append(e)
    late = threading.Thread(target=ingest)
    late.start()
    worker.join(timeout=120)
    late.join(timeout=120)
    opened.close()
    assert not errors, errors
    assert len(writer_error) == 1 and isinstance(writer_error[0], ModelMismatch), writer_error
    assert "re-embedded with other" in str(writer_error[0]) and "run the command again" in str(writer_error[0])
    from types import SimpleNamespace

    from app.cli.remedies import worded
    said = worded(writer_error[0], SimpleNamespace(command="ingest", store=loc, model=None, pooling=None,
                                                   files=["f.txt"]))
    assert said == str(writer_error[0]) and "--whiten" not in said     # run it again: nothing else to offer
    assert not c.has_collection(name + "__rebuild")
    with open_store(loc, writable=False) as s:
        assert s.model_name == "other"
        assert_every_row_sound(s, FakeBackend(name="other", dim=D, weights="e" * 64), texts)
    c.close()


def test_an_abandoned_staging_collection_is_tidied_only_under_the_writer_lock(milvus_server):
    from index.milvus.calls import Caller
    from index.milvus.lease import ServerWriterLock
    from index.milvus.schema import create_collection
    from index.store.fingerprint import as_dict
    from index.store.location import parse_location
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(["one", "two"], b)
        create_collection(s._client, s._call, s.loc, name + "__rebuild",
                          as_dict(FakeBackend(name="other", dim=D).fingerprint()),
                          "flat", {}, version=s._version)   # a rebuild killed before its switch
    c = _client(milvus_server)
    lock = ServerWriterLock(c, Caller(parse_location(loc), 30.0), name, "x").acquire()   # a live writer
    try:
        open_store(loc).close()
        assert c.has_collection(name + "__rebuild")   # its owner may be running: left alone
    finally:
        lock.release()
    open_store(loc).close()                            # nobody holds the lock: tidied
    assert not c.has_collection(name + "__rebuild")
    with open_store(loc, writable=False) as s:
        assert sorted(r["text"] for r in s.iter()) == ["one", "two"]
    c.close()


def _with_wrong_vectors(milvus_server, n, wrong):
    """A store of n texts whose rows `wrong` hold another text's vector."""
    from index.store.text_hash import hash_for_format
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    texts = [f"sentence {i}" for i in range(n)]
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        ids = s.add_texts(texts, b).ids
    c = _client(milvus_server)
    h = hash_for_format(2)
    c.upsert(name, [{"id": ids[i], "vector": text_vector(f"not {i}", D, "f" * 64 + "mean").tolist(),
                     "text": texts[i], "hash": h(texts[i]), "source": "", "row": -1, "added": 0.0,
                     "meta": {}} for i in wrong])
    c.close()
    return loc, b, sorted(ids[i] for i in wrong)


def test_check_reads_every_vector_of_a_small_store_and_names_a_sample(milvus_server, monkeypatch):
    """2 wrong vectors among 40: a store this small has every vector checked, so both are
    found every time (a sample of 32 said "ok" while 2 of 577 were wrong); a larger store's
    sample is said to be one, with its size."""
    from app.cli.store_info import _milvus_problems, vectors_checked
    from index.milvus import check
    loc, b, wrong = _with_wrong_vectors(milvus_server, 40, [5, 33])
    with open_store(loc, writable=False) as s:
        report = s.check(b)
    assert report["full"] and report["sampled"] == report["of"] == 40
    assert sorted(report["vectors_off"]) == wrong
    assert _milvus_problems(report) == [f"all 40 vectors checked: 2 are not their texts' embeddings "
                                        f"(ids {wrong[0]}, {wrong[1]})"]
    monkeypatch.setattr(check, "FULL_UP_TO", 10)
    monkeypatch.setattr(check, "SMALLEST_SHARE", 0.2)       # a sample of 14
    with open_store(loc, writable=False) as s:
        sampled = s.check(b)
    assert not sampled["full"] and sampled["sampled"] == 14 and sampled["of"] == 40
    assert vectors_checked(sampled) == "14 of 40 vectors checked, drawn at random"
    assert set(sampled["vectors_off"]) <= set(wrong)


@pytest.mark.slow   # three CLI runs with a model (each a new Python)
def test_check_on_the_cli_finds_wrong_vectors_and_its_repair_command_works(milvus_server, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"line number {i} of the corpus" for i in range(30)) + "\n")
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    assert _cli("ingest", corpus, "--store", loc, "--model", MODEL, "--quiet").returncode == 0
    c = _client(milvus_server)
    row = c.get(name, ids=[4], output_fields=["*"])[0]
    c.upsert(name, [{**dict(row), "vector": text_vector("elsewhere", 32, "x").tolist()}])
    c.close()
    line = _one_error(_cli("info", "--check", "--store", loc))
    assert "all 30 vectors checked: 1 is not its text's embedding (id 4)" in line, line
    fix = shlex.split(line.split("`encoderscope ", 1)[1].split("`", 1)[0])
    assert fix[0] == "info" and "--repair" in fix, line
    repaired = _cli(*fix)
    assert repaired.returncode == 0, repaired.stderr
    assert "repair: 1 vector embedded again" in repaired.stderr
    assert "all 30 vectors checked: all right" in _cli("info", "--check", "--store", loc).stderr


def test_a_sampled_check_suggests_a_repair_that_repairs_the_ids_it_named_and_full(milvus_server, tmp_path, run,
                                                                                 monkeypatch):
    """A store larger than a full check: the check names the wrong vectors of its sample; the
    repair it suggests repairs those very ids (it drew a fresh sample before, and left a named
    one in place while saying "ok"), and the --full it names repairs every one."""
    from index.milvus import check
    monkeypatch.setattr(check, "FULL_UP_TO", 10)
    monkeypatch.setattr(check, "SMALLEST_SHARE", 0.2)       # a sample of 14 of 30
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"line number {i} of the corpus" for i in range(30)) + "\n")
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    run("ingest", str(corpus), "--store", loc, "--model", MODEL, "--quiet")
    c = _client(milvus_server)
    wrong = list(range(1, 31, 3))                            # 10 of 30
    rows = c.get(name, ids=wrong, output_fields=["*"])
    c.upsert(name, [{**dict(r), "vector": text_vector(f"elsewhere {r['id']}", 32, "x").tolist()} for r in rows])
    line = _one_error(run("info", "--check", "--store", loc, check=False))
    named = [int(i) for i in line.split("(ids ", 1)[1].split(")", 1)[0].replace("...", "").split(",")]
    assert named and set(named) <= set(wrong), line
    repair, full = [shlex.split(cmd) for cmd in
                    [part.split("`", 1)[0] for part in line.split("`encoderscope ")[1:]]]
    assert repair == ["info", "--repair", "--store", loc] and full == ["info", "--repair", "--full", "--store", loc]
    done = run(*repair)
    assert f"{len(named)} vectors embedded again" in done.stderr and "--full" in done.stderr, done.stderr
    from core.encoder.backends import get_backend
    with open_store(loc, writable=False) as s:      # the named ones repaired, the others not yet
        report = s.check(get_backend(MODEL, "scratch", device="cpu"), full=True)
    assert set(report["vectors_off"]) == set(wrong) - set(named)
    run(*full)
    assert "all 30 vectors checked: all right" in run("info", "--check", "--full", "--store", loc).stderr
    c.close()


@pytest.mark.slow   # four stores made and checked: over 10 s
def test_migrate_between_a_server_and_a_folder_keeps_ids_across_gaps(milvus_server, tmp_path):
    from index.corpus.migrate import migrate
    b = FakeBackend(dim=D)
    loc = f"{milvus_server.uri}?collection={_name()}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts([f"sentence {i}" for i in range(1, 31)], b)
        s.remove([8, 9, 20])
        source = {r["id"]: r["text"] for r in s.iter()}
    assert 8 not in source and source[10] == "sentence 10"
    res = migrate(loc, tmp_path / "folder")
    assert res.verified and res.ids_kept and res.rows_checked == 27
    with open_store(tmp_path / "folder", writable=False) as s:
        assert {r["id"]: r["text"] for r in s.iter()} == source     # id 10 is still sentence 10
    back = f"{milvus_server.uri}?collection={_name()}"
    res = migrate(tmp_path / "folder", back)
    assert res.verified and res.ids_kept
    with open_store(back, writable=False) as s:
        assert {r["id"]: r["text"] for r in s.iter()} == source
    with open_store(tmp_path / "folder") as s:             # ids go on past the highest kept
        assert s.add_texts(["a new one"], b).ids == [31]


def test_a_lost_lease_says_why_every_time(milvus_server, monkeypatch):
    """After a takeover the holder's later calls say it was taken over, never "(it was given
    back)"."""
    from index.milvus import lease
    b = FakeBackend(dim=D)
    name = _name()
    loc = f"{milvus_server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        mine = lease.ServerWriterLock(s._client, s._call, name, "x").acquire()
        mine._stop.set()                                   # stalled: never renews
        s._client.drop_collection(lease.lock_name(name))  # taken over ...
        theirs = lease.ServerWriterLock(s._client, s._call, name, "x").acquire()
        try:
            for _ in range(2):
                with pytest.raises(WriterLockLost) as e:
                    mine.fence(write=True)
                assert "another writer took it over" in str(e.value), str(e.value)
                assert "given back" not in str(e.value)
        finally:
            theirs.release()


@pytest.mark.slow   # a server of its own, with authentication on
@pytest.mark.skipif(why_cannot_run() is not None, reason=str(why_cannot_run()))
def test_a_user_who_may_only_read_runs_info_check(tmp_path):
    server = LocalMilvus(tmp_path / "milvus", auth=True).start()
    try:
        corpus = tmp_path / "c.txt"
        corpus.write_text("the cat sat on the mat\nthe dog ran in the park\na bird sang\n")
        loc = f"{server.uri}?collection=kept"
        made = _cli("ingest", corpus, "--store", loc, "--model", MODEL, "--quiet", token=ROOT_TOKEN)
        assert made.returncode == 0, made.stderr
        root = _client(server, ROOT_TOKEN)
        root.create_user("reader", "reader-password")
        root.create_role("read_only")
        for privilege in ("Query", "Search", "Load", "GetLoadState", "GetStatistics"):
            root.grant_privilege("read_only", "Collection", privilege, "*")
        for privilege in ("DescribeCollection", "ShowCollections"):
            root.grant_privilege("read_only", "Global", privilege, "*")
        root.grant_role("reader", "read_only")
        root.close()
        reader = "reader:reader-password"
        check = _cli("info", "--check", "--store", loc, token=reader)
        assert check.returncode == 0, check.stderr
        assert "check: ok: 3 sentences read back of 3 rows" in check.stderr
        assert "all 3 vectors checked: all right" in check.stderr
        assert "read without the writer lock, which this user may not take" in check.stderr
        for argv in (("info", "--repair", "--store", loc),
                     ("ingest", corpus, "--store", loc, "--model", MODEL, "--quiet")):
            line = _one_error(_cli(*argv, token=reader))
            assert "may not take the writer lock" in line and "administrator" in line, line
            assert "once the server is back" not in line and "reader-password" not in line, line
        assert "run the same command again with a token that may write" in line
        again = _cli("ingest", corpus, "--store", loc, "--model", MODEL, "--quiet", token=ROOT_TOKEN)
        assert again.returncode == 0 and "duplicates 3" in again.stdout, again.stderr   # it works
    finally:
        server.kill()
