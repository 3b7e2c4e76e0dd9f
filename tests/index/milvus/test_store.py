"""Milvus-only behaviour of the store: location parsing, one process per Lite folder, an
unreachable server, credentials never on the command line, the missing optional extra, an
interrupted rebuild, duplicate detection by server queries.
(The shared contract — search, changes, model check, migrate — is in test_store_contract.py;
kill -9 during a Lite ingest in test_reliability_milvus.py.)
"""
from __future__ import annotations

import subprocess
import sys
import textwrap
import time

import pytest

from core.errors import InputError
from index.opening import describe_location, open_store
from index.store.errors import StoreError, StoreLocked
from index.store.location import DEFAULT_COLLECTION, LITE_MANIFEST, TOKEN_ENV, parse_location
from tests.support.paths import ROOT, child_env
from tests.support.store_backends import Fingerprint, clustered

D = 24
FP = Fingerprint("fake", "f" * 64, "mean", D, True)

try:
    import milvus_lite  # noqa: F401
    import pymilvus  # noqa: F401
    HAVE_MILVUS = True
except ImportError:
    HAVE_MILVUS = False
needs_milvus = pytest.mark.skipif(not HAVE_MILVUS, reason="needs the [milvus] extra")


# ---------------------------------------------------------------- locations
def test_location_parsing(tmp_path):
    f = parse_location(str(tmp_path / "store"))
    assert f.kind == "faiss" and f.path == tmp_path / "store"
    assert parse_location(tmp_path).kind == "faiss"
    lite = parse_location(f"milvus-lite:{tmp_path}/corpus")
    assert lite.kind == "lite" and lite.path == tmp_path / "corpus"
    assert lite.lite_db == tmp_path / "corpus" / "milvus.db"
    assert str(lite) == f"milvus-lite:{tmp_path}/corpus"
    assert parse_location(f"milvus-lite:{tmp_path}/corpus/milvus.db").path == tmp_path / "corpus"
    assert parse_location(f"MILVUS-LITE://{tmp_path}/c").path == tmp_path / "c"
    s = parse_location("http://milvus.team.internal")
    assert (s.kind, s.uri, s.db_name, s.collection) == (
        "server", "http://milvus.team.internal:19530", "", DEFAULT_COLLECTION)
    s = parse_location("https://milvus.example.com/research?collection=news_2024")
    assert (s.uri, s.db_name, s.collection) == ("https://milvus.example.com:443", "research",
                                                "news_2024")
    assert str(s) == "https://milvus.example.com:443/research?collection=news_2024"
    assert parse_location("http://10.0.0.5:19531").uri == "http://10.0.0.5:19531"
    assert "collection news" in describe_location("http://h:1?collection=news")


@pytest.mark.parametrize("bad, match", [
    ("http://alice:secret@host:19530", TOKEN_ENV),
    ("https://host:19530?token=abc", TOKEN_ENV),
    ("http://host:19530?collection=1bad", "collection names"),
    ("http://host:19530/a/b", "one segment"),
    ("http://host:port", "not a number"),
    ("ftp://host/x", "unknown store scheme"),
    ("milvus-lite:", "folder after milvus-lite"),
    ("   ", "empty store location"),
])
def test_bad_locations_are_explained(bad, match):
    with pytest.raises(InputError, match=match):
        parse_location(bad)


def test_secrets_never_in_messages(monkeypatch):
    with pytest.raises(InputError) as e:
        parse_location("http://alice:hunter2@host:19530")
    assert "hunter2" not in str(e.value)


def test_default_location_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("ENCODERSCOPE_STORE", f"milvus-lite:{tmp_path}/team")
    assert parse_location(None).kind == "lite"
    monkeypatch.delenv("ENCODERSCOPE_STORE")
    assert parse_location(None).kind == "faiss"


def test_missing_extra_gives_install_command(monkeypatch):
    from index.milvus.calls import import_pymilvus
    monkeypatch.setitem(sys.modules, "pymilvus", None)
    with pytest.raises(StoreError, match=r"pip install 'encoderscope\[milvus\]'"):
        import_pymilvus()
    with pytest.raises(StoreError, match="encoderscope\\[milvus\\]"):
        open_store("http://127.0.0.1:1")


# ---------------------------------------------------------------- servers
@needs_milvus
def test_unreachable_server_fails_fast_and_clearly(monkeypatch, tmp_path):
    from index.store.errors import StoreUnavailable
    monkeypatch.setenv(TOKEN_ENV, "root:sup3rsecret")
    t0 = time.perf_counter()
    with pytest.raises(StoreUnavailable) as e:
        open_store("http://127.0.0.1:1", writable=False, timeout=3)
    assert time.perf_counter() - t0 < 10
    msg = str(e.value)
    assert "cannot reach the Milvus server http://127.0.0.1:1" in msg
    assert "is the server running" in msg and "sup3rsecret" not in msg
    with pytest.raises(StoreUnavailable):
        open_store("http://127.0.0.1:1?collection=c", create=True, fingerprint=FP, timeout=3)
    assert list(tmp_path.iterdir()) == []          # nothing local was created


@needs_milvus
def test_error_wording_for_auth_and_timeouts():
    from pymilvus import MilvusException

    from index.milvus.calls import unavailable as _unavailable
    from index.store.errors import StoreUnavailable
    loc = parse_location("https://milvus.example.com")
    e = _unavailable(loc, MilvusException(code=1800, message="user hasn't authenticated"),
                     "connect", has_token=False)
    assert isinstance(e, StoreUnavailable) and f"set ${TOKEN_ENV}" in str(e)
    e = _unavailable(loc, MilvusException(code=1, message="Deadline Exceeded"), "search")
    assert isinstance(e, StoreUnavailable) and "did not answer in time" in str(e)


# ---------------------------------------------------------------- Milvus Lite folders
@needs_milvus
def test_lite_folder_layout_and_plain_folder_opens_it(tmp_path):
    s = open_store(f"milvus-lite:{tmp_path / 'c'}", create=True, fingerprint=FP)
    s.add(["a", "b"], clustered(2, D))
    s.close()
    names = {p.name for p in (tmp_path / "c").iterdir()}
    assert {"milvus.db", LITE_MANIFEST, "lock"} <= names
    again = open_store(tmp_path / "c", writable=False)      # no prefix: recognised
    try:
        assert type(again).__name__ == "MilvusStore" and again.count() == 2
        info = again.info()
        assert info["engine"] == "milvus-lite" and info["index"] == "flat"
    finally:
        again.close()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("hi")
    with pytest.raises(StoreError, match="not empty"):
        open_store(f"milvus-lite:{tmp_path / 'x'}", create=True, fingerprint=FP)


@needs_milvus
def test_lite_logs_no_server_tracebacks(tmp_path, caplog):
    """Milvus Lite's in-process gRPC server logs a traceback for calls it does not implement
    (pymilvus asks AllocTimestamp after creating the index); the CLI would print it."""
    import logging
    caplog.set_level(logging.WARNING)
    s = open_store(f"milvus-lite:{tmp_path / 'c'}", create=True, fingerprint=FP)
    try:
        s.add(["a", "b"], clustered(2, D))
        assert s.search(clustered(2, D)[:1], k=1)[0][0].text == "a"
        assert s.info()["count"] == 2
        s.reindex("flat")
    finally:
        s.close()
    loud = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert loud == []


HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from index.opening import open_store
    from tests.support.store_backends import Fingerprint
    s = open_store(sys.argv[1], create=True, fingerprint=Fingerprint("fake", "f" * 64, "mean", 24, True),
                   writable=sys.argv[2] != "ro")
    print("OPEN", flush=True)
    sys.stdin.readline()
    s.close()
""")


@needs_milvus
def test_second_process_on_a_lite_folder_gets_a_clear_message(tmp_path):
    location = f"milvus-lite:{tmp_path / 'c'}"
    open_store(location, create=True, fingerprint=FP).close()
    script = tmp_path / "holder.py"
    script.write_text(HOLDER.format(root=str(ROOT)))
    proc = subprocess.Popen([sys.executable, str(script), location, "rw"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    try:
        assert proc.stdout.readline().strip() == "OPEN", proc.stderr.read()
        with pytest.raises(StoreLocked) as e:
            open_store(location)                       # a second writer
        assert f"process {proc.pid}" in str(e.value) and "one writer" in str(e.value)
        with pytest.raises(StoreLocked) as e:
            open_store(location, writable=False)        # Lite: one process, readers included
        assert f"process {proc.pid}" in str(e.value) and "Milvus server" in str(e.value)
    finally:
        proc.communicate("\n", timeout=60)
    s = open_store(location)                          # free again once it closed
    s.close()
    # inside one process: a second writer is refused, readers share the folder
    w = open_store(location)
    try:
        with pytest.raises(StoreLocked):
            open_store(location)
        r = open_store(location, writable=False)
        assert r.count() == 0
        r.close()
        w.add(["still works"], clustered(1, D))
        assert w.count() == 1
    finally:
        w.close()


@needs_milvus
def test_dedup_by_server_queries(tmp_path):
    """Servers check duplicates with a query per batch (no in-memory map); same results."""
    from index.milvus import MilvusStore
    s = MilvusStore.open(f"milvus-lite:{tmp_path / 'q'}", writable=True, create=True,
                         fingerprint=FP, dedup="query")
    try:
        x = clustered(6, D)
        assert s.add(["a", "b", "a"], x[:3]).ids == [1, 2, 1]
        r = s.add(["b", "c"], x[3:5])
        assert r.ids == [2, 3] and r.duplicates == 1
        s.remove([2])
        assert s.add(["b"], x[5:6]).ids == [4]
        assert s.id_of("c") == 3 and s.id_of("zzz") is None
    finally:
        s.close()


@needs_milvus
def test_interrupted_rebuild_is_finished_on_open(tmp_path):
    """A crash between dropping the old collection and renaming the re-embedded one."""
    location = f"milvus-lite:{tmp_path / 'r'}"
    s = open_store(location, create=True, fingerprint=FP)
    s.add(["a", "b", "c"], clustered(3, D))
    s.save()
    c = s._client
    c.release_collection("sentences")
    c.rename_collection("sentences", "sentences__rebuild")
    c.alter_collection_properties("sentences__rebuild",
                                  properties={"encoderscope.rebuild_complete": "1"})
    s._closed = True                       # the process "died" here
    s._client.close()
    from index.milvus import lite
    lite.release(s._lite_key, registered=True)
    s._lock.release()
    again = open_store(location)
    try:
        assert again.count() == 3 and [r["text"] for r in again.iter()] == ["a", "b", "c"]
        assert not again._client.has_collection("sentences__rebuild")
    finally:
        again.close()


@needs_milvus
def test_lite_index_file_cut_by_a_crash_is_rebuilt(tmp_path, caplog):
    """Milvus Lite writes its index files in place: a kill in the middle leaves one truncated,
    and every later load failed. The open removes the file its own header proves incomplete
    (derived data: Milvus Lite builds it again from the segment) and loads again."""
    from index.milvus.repair import INDEX_SIDECARS, incomplete
    loc = f"milvus-lite:{tmp_path / 'c'}"
    vectors = clustered(40, D)
    s = open_store(loc, create=True, fingerprint=FP)
    s.add([f"sentence {i}" for i in range(40)], vectors)
    s.close()
    open_store(loc, writable=False).close()                  # a load writes the index file
    (idx,) = [p for p in (tmp_path / "c" / "milvus.db").glob(INDEX_SIDECARS) if p.suffix == ".idx"]
    whole = idx.read_bytes()
    assert not incomplete(idx)
    for cut in (0, 3, 100, len(whole) // 2, len(whole) - 1):   # wherever the kill landed
        idx.write_bytes(whole[:cut])
        assert incomplete(idx), cut
    idx.write_bytes(whole[: len(whole) // 2])               # what a kill -9 mid-write leaves
    for writable in (False, True):                          # a reader repairs too when no one writes
        with caplog.at_level("WARNING"):
            again = open_store(loc, writable=writable)
        try:
            assert again.count() == 40
            hits = again.search(vectors[7:8], k=1)[0]
            assert hits[0].text == "sentence 7" and abs(hits[0].score - 1.0) < 1e-5
        finally:
            again.close()
        assert idx.read_bytes() == whole, "rebuilt from the segment"
        idx.write_bytes(whole[:100])
    assert "half-written" in caplog.text


@needs_milvus
def test_lite_index_file_of_unknown_content_is_left_alone(tmp_path):
    from index.milvus.repair import INDEX_SIDECARS
    loc = f"milvus-lite:{tmp_path / 'c'}"
    s = open_store(loc, create=True, fingerprint=FP)
    s.add(["a", "b"], clustered(2, D))
    s.close()
    open_store(loc, writable=False).close()
    (idx,) = [p for p in (tmp_path / "c" / "milvus.db").glob(INDEX_SIDECARS) if p.suffix == ".idx"]
    idx.write_bytes(b"not an index, not ours to delete")
    with pytest.raises(StoreError, match="could not load the collection"):
        open_store(loc, writable=False)
    assert idx.read_bytes() == b"not an index, not ours to delete"
