"""What the store commands say, word for word where a word was wrong: the counts of `info
--check` on a Milvus store in the singular and plural, a `migrate` whose source or database is
missing (worded for --from/--to, not as an ingest), `info` on a server store (no "0 B" for disks
it cannot see, index settings as numbers people read). Each suggested command is run."""
from __future__ import annotations

import shlex
import uuid
from types import SimpleNamespace

import pytest

from app.cli.remedies import worded
from app.cli.store_info import _milvus_problems, index_params_worded
from index.opening import open_store
from index.store.errors import StoreNotFound
from tests.support.store_backends import FakeBackend
from tests.support.store_contract import needs_milvus

D = 16


def _report(**kw):
    return {"hidden_ids": [], "duplicates": {}, "wrong_hash": [], "vectors_off": [],
            "sampled": 299, "of": 5000, "full": False, "confidence": 0.95, "share": 0.01, **kw}


def test_check_counts_agree_in_number():
    one = _milvus_problems(_report(hidden_ids=[5], duplicates={"h": [3, 9]}, wrong_hash=[6],
                                   vectors_off=[7]))
    assert one == ["1 id hides another sentence behind it (id 5)",
                   "1 sentence is stored twice",
                   "1 row's hash is not its text's (id 6)",
                   "299 of 5000 vectors checked, drawn at random: 1 is not its text's "
                   "embedding (id 7)"]
    two = _milvus_problems(_report(hidden_ids=[5, 8], duplicates={"h": [3, 9, 11]},
                                   wrong_hash=[6, 41], vectors_off=[7, 12], full=True,
                                   sampled=577, of=577))
    assert two == ["2 ids hide another sentence behind them (ids 5, 8)",
                   "2 sentences are stored twice",
                   "2 rows' hashes are not their texts' (ids 6, 41)",
                   "all 577 vectors checked: 2 are not their texts' embeddings (ids 7, 12)"]


def test_a_check_says_whether_it_read_every_vector_or_a_sample():
    """"ok" says what it means: every vector of a store small enough to check in seconds, else
    a sample named as a sample with its confidence (it said "ok" after 32 of 577)."""
    from app.cli.store_info import _sample_note, vectors_checked
    from index.milvus.check import FULL_UP_TO, sample_size
    assert vectors_checked(_report(sampled=577, of=577, full=True)) == "all 577 vectors checked"
    sampled = _report(sampled=299, of=50_000)
    assert vectors_checked(sampled) == "299 of 50000 vectors checked, drawn at random"
    assert "95% of the time when 1% or more of them are wrong; --full checks every one" in \
        _sample_note(sampled)
    assert sample_size(50_000) == 299 and sample_size(100) == 100 and FULL_UP_TO >= 577
    # 299 draws miss a 1% share of wrong vectors at most 5% of the time
    assert (1 - 0.01) ** sample_size(10 ** 9) <= 0.05 < (1 - 0.01) ** (sample_size(10 ** 9) - 1)


def test_index_settings_read_as_numbers():
    assert index_params_worded({"M": 32, "efConstruction": 200, "search": {"ef": 128}}) == \
        "(M 32, efConstruction 200; search: ef 128)"
    assert index_params_worded({"nlist": 1024, "search": {}}) == "(nlist 1024)"
    assert index_params_worded({}) == "" and index_params_worded(None) == ""


def test_migrate_from_a_missing_store_is_not_told_to_ingest(tmp_path, run):
    missing, out = tmp_path / "none", tmp_path / "out"
    r = run("migrate", "--from", str(missing), "--to", str(out), check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert r.stderr == (f"error: no store at {missing}: nothing to migrate from there; --from "
                        "names an existing store (a store folder, milvus-lite:FOLDER or "
                        "http(s)://HOST:PORT?collection=NAME)\n")
    assert not out.exists()                          # nothing made for the copy


@needs_milvus
def test_migrate_from_a_missing_lite_store_is_not_told_to_ingest(tmp_path, run):
    missing, out = tmp_path / "none", tmp_path / "out"
    r = run("migrate", "--from", f"milvus-lite:{missing}", "--to", str(out), check=False)
    assert r.returncode == 2 and "nothing to migrate from there" in r.stderr
    assert "ingest" not in r.stderr and "copying" not in r.stderr


def _migrate_args(source, destination):
    return SimpleNamespace(command="migrate", source=source, destination=destination, store=None)


def test_a_missing_database_names_the_option_that_named_it():
    from core.errors import settings_fix
    e = StoreNotFound("the Milvus server http://h:1 has no database nodb: ask its administrator "
                      "to create it, or use the default database",
                      fix=settings_fix(store="http://h:1?collection=c"))
    to = worded(e, _migrate_args("/a/store", "http://h:1/nodb?collection=c"))
    assert to.endswith("use the default database (--to http://h:1?collection=c)")
    frm = worded(e, _migrate_args("http://h:1/nodb?collection=c", "/a/store"))
    assert frm.endswith("(--from http://h:1?collection=c)")
    info = worded(e, SimpleNamespace(command="info", store="http://h:1/nodb?collection=c"))
    assert info.endswith("(--store http://h:1?collection=c)") and "ingest" not in info


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_server_store_info_and_migrate_into_a_missing_database(milvus_server, tmp_path, run):
    pytest.importorskip("pymilvus")
    b = FakeBackend(dim=D)
    name = "t" + uuid.uuid4().hex[:12]
    loc = f"{milvus_server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="hnsw") as s:
        s.add_texts(["one", "two", "three"], b)
    out = run("info", "--store", loc).stdout
    index_line = next(line for line in out.splitlines() if line.startswith("index"))
    assert index_line.startswith("index     hnsw (M 32, efConstruction 200; search: ef ")
    assert "'" not in index_line
    assert "on disk   on the server (not measured from here)" in out and " 0 B" not in out
    source = tmp_path / "faiss"
    with open_store(str(source), create=True, fingerprint=b.fingerprint()) as s:
        s.add_texts(["four", "five"], b)
    nodb = f"{milvus_server.uri}/nodb?collection={name}2"
    r = run("migrate", "--from", str(source), "--to", nodb, check=False)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no database nodb" in r.stderr
    suggested = shlex.split(r.stderr.rstrip("\n").rsplit("(--to ", 1)[1].rstrip(")"))[0]
    assert suggested == f"{milvus_server.uri}?collection={name}2"
    done = run("migrate", "--from", str(source), "--to", suggested, "--quiet")
    assert "copied 2 sentences" in done.stdout
