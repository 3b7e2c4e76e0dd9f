"""Faults on a real Milvus server, each on a server of its own (-m slow, minutes each): the
server killed (-9) in the middle of an ingest and restarted, two writer processes at once on
one collection, and a server with authentication on. Every row is checked afterwards: count =
readable ids = distinct texts = the texts written, every vector its text's, `check` clean."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from index.opening import open_store
from index.store.errors import StoreUnavailable
from tests.index.milvus.test_server import assert_every_row_sound
from tests.support.milvus_server import ROOT_TOKEN, LocalMilvus, why_cannot_run
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(why_cannot_run() is not None, reason=str(why_cannot_run()))]
D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments
WRITER = """
import sys
from index.opening import open_store
from tests.support.store_backends import FakeBackend
uri, first, n, tag = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
b = FakeBackend(dim={D})
texts = [f"shared {i}" for i in range(first, first + n)] + [f"{tag} {i}" for i in range(n)]
with open_store(uri, create=True, fingerprint=b.fingerprint(), index="flat") as s:
    s.add_stream([(t, None) for t in texts], b, batch_size=64, window=128)
""".replace("{D}", str(D))


def _writer(loc, first, n, tag, env=None):
    return subprocess.Popen([sys.executable, "-c", WRITER, loc, str(first), str(n), tag],
                            env=child_env(**(env or {})), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _texts(first, n, tag):
    return [f"shared {i}" for i in range(first, first + n)] + [f"{tag} {i}" for i in range(n)]


def _sound(loc, texts, **kw):
    b = FakeBackend(dim=D)
    with open_store(loc, writable=False, **kw) as s:
        assert_every_row_sound(s, b, texts)
        report = s.check(b)
    assert report["hidden_ids"] == [] and report["duplicates"] == {}
    assert report["rows"] == report["readable"] == len(set(texts))


@pytest.fixture
def server(tmp_path):
    s = LocalMilvus(tmp_path / "milvus").start()
    yield s
    s.kill()


def test_server_killed_mid_ingest_and_restarted(server):
    loc = f"{server.uri}?collection=killed"
    w = _writer(loc, 0, 1500, "a")
    probe = None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:        # kill once some batches are in, not all
        time.sleep(0.3)
        try:
            probe = probe or open_store(loc, writable=False)
            if 300 <= probe.count():
                break
        except Exception:   # noqa: BLE001  (not created yet)
            probe = None
    server.kill()
    w.communicate(timeout=120)
    assert w.returncode != 0                   # the writer saw its server go
    server.start()                             # same data, new ports
    loc = f"{server.uri}?collection=killed"
    with open_store(loc, writable=False) as s:
        before = s.count()
    assert before >= 300
    w = _writer(loc, 0, 1500, "a")             # the same ingest again: adds the rest
    out, err = w.communicate(timeout=600)
    assert w.returncode == 0, err
    # Then new texts after another restart: never an id in use (the counter may roll back).
    server.kill()
    server.start()
    loc = f"{server.uri}?collection=killed"
    w = _writer(loc, 5000, 100, "b")
    assert w.communicate(timeout=600) and w.returncode == 0
    _sound(loc, _texts(0, 1500, "a") + _texts(5000, 100, "b"))


def test_removed_ids_are_not_reused_after_the_server_is_killed_and_restarted(server):
    """The newest ids removed, the server killed (-9) at once and restarted on its data: the
    next sentences get ids above every id ever handed out, none of a removed sentence."""
    b = FakeBackend(dim=D)
    loc = f"{server.uri}?collection=restarted"
    first = [f"first {i}" for i in range(100)]
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        assert s.add_texts(first, b).ids == list(range(1, 101))
        assert sorted(s.remove(list(range(91, 101)) + [40])) == [40] + list(range(91, 101))
    server.kill()
    server.start()                             # same data, new ports
    loc = f"{server.uri}?collection=restarted"
    kept = [t for i, t in enumerate(first, 1) if i != 40 and i <= 90]
    with open_store(loc, writable=False) as s:
        assert s.count() == 89 and s.get([40, 91, 100]) == {}
    second = [f"second {i}" for i in range(10)]
    w = subprocess.run([sys.executable, "-c", ADD, loc, *second], cwd=ROOT, text=True,
                       env=child_env(), capture_output=True, timeout=600)
    assert w.returncode == 0, w.stderr
    assert [int(i) for i in w.stdout.split()] == list(range(101, 111))    # a new process's view
    _sound(loc, kept + second)
    with open_store(loc, writable=False) as s:
        ids = {r["text"]: r["id"] for r in s.iter()}
    assert {ids[t] for t in second} == set(range(101, 111))
    assert {ids[t] for t in kept} == set(range(1, 91)) - {40}


ADD = """
import sys
from index.opening import open_store
from tests.support.store_backends import FakeBackend
with open_store(sys.argv[1]) as s:
    print(*s.add_texts(sys.argv[2:], FakeBackend(dim={D})).ids)
""".replace("{D}", str(D))


def test_two_writer_processes_on_one_collection(server):
    loc = f"{server.uri}?collection=two"
    open_store(loc, create=True, fingerprint=FakeBackend(dim=D).fingerprint(),
               index="flat").close()
    ws = [_writer(loc, 0, 800, "a"), _writer(loc, 0, 800, "b")]   # same shared texts
    for w in ws:
        _out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
    _sound(loc, _texts(0, 800, "a") + _texts(0, 800, "b"))


def test_three_writer_processes_starting_at_once_on_a_new_collection(server):
    # the collection is made once, under the writer lock: no writer drops another's
    # collection as "half-made" while it builds its indexes (3 of 7 runs failed so)
    loc = f"{server.uri}?collection=fresh"
    ws = [_writer(loc, 0, 60, tag) for tag in "abc"]
    for w in ws:
        _out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
    _sound(loc, _texts(0, 60, "a") + _texts(0, 60, "b") + _texts(0, 60, "c"))


def test_authentication_on_and_off(tmp_path):
    server = LocalMilvus(tmp_path / "milvus", auth=True).start()
    try:
        loc = f"{server.uri}?collection=auth"
        with pytest.raises(StoreUnavailable, match=r"refused the credentials .* set "
                                                   r"\$ENCODERSCOPE_MILVUS_TOKEN"):
            open_store(loc, writable=False, token="")
        with pytest.raises(StoreUnavailable, match="check the token") as e:
            open_store(loc, writable=False, token="root:not-the-password")
        assert "not-the-password" not in str(e.value)
        w = _writer(loc, 0, 200, "a", env={"ENCODERSCOPE_MILVUS_TOKEN": ROOT_TOKEN})
        _out, err = w.communicate(timeout=600)
        assert w.returncode == 0, err
        _sound(loc, _texts(0, 200, "a"), token=ROOT_TOKEN)
        # A user the server knows, without privileges: told so, not to check the token.
        from pymilvus import MilvusClient
        root = MilvusClient(uri=server.uri, token=ROOT_TOKEN)
        root.create_user("reader", "reader-password")
        with pytest.raises(StoreUnavailable) as e:
            with open_store(loc, token="reader:reader-password") as s:
                s.add_texts(["never written"], FakeBackend(dim=D))
        said = str(e.value)
        assert "\n" not in said and "may not" in said and "administrator" in said, said
        assert "check the token" not in said and "reader-password" not in said
        root.close()
        _sound(loc, _texts(0, 200, "a"), token=ROOT_TOKEN)
        # Off again: the same data, no token needed.
        server.kill()
        server.auth = False
        server.start()
        _sound(f"{server.uri}?collection=auth", _texts(0, 200, "a"), token="")
    finally:
        server.kill()


N_CLI = 5000


def _cli(*args):
    return subprocess.Popen([sys.executable, "-m", "app.cli", *map(str, args)],
                            env=child_env(), cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_cli_when_the_server_dies_mid_ingest_then_rebuild(server, tmp_path):
    """One `error:` line saying what was kept, the re-run adds the rest, `--rebuild` says what
    it did, `info --check` is clean (the packaged minilm model, as a user runs it)."""
    # Five windows of minilm's CPU rate (~2 s each): the kill after the first commit lands with
    # windows still to store, however fast the store's writes are (1,200 sentences, two windows,
    # were all stored before the poll saw the first).
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"Sentence number {i} about topic {i % 37}.\n" for i in range(N_CLI)))
    loc = f"{server.uri}?collection=cli"
    p = _cli("ingest", corpus, "--store", loc, "--quiet")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        time.sleep(0.5)
        try:
            with open_store(loc, writable=False) as s:
                if s.count() >= 256:
                    break
        except Exception:   # noqa: BLE001  (not created yet)
            pass
    server.kill()
    _out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and "Traceback" not in err
    line = err.strip()
    assert line.count("\n") == 0 and line.startswith("error: cannot reach the Milvus server")
    assert "new sentences this run stored before that are kept; run the same command again" \
        in line
    server.start()
    loc = f"{server.uri}?collection=cli"
    again = _cli("ingest", corpus, "--store", loc, "--quiet")
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    assert f"holds {N_CLI} sentences" in out
    rebuilt = _cli("ingest", "--rebuild", "--pooling", "cls", "--store", loc, "--quiet")
    out, err = rebuilt.communicate(timeout=600)
    assert rebuilt.returncode == 0, err
    assert f"rebuild: re-embedded {N_CLI} sentences with minilm (cls pooling); the store now uses it" \
        in err
    check = _cli("info", "--check", "--store", loc)
    _out, err = check.communicate(timeout=600)
    assert check.returncode == 0 and f"check: ok: {N_CLI} sentences read back of {N_CLI} rows" in err
