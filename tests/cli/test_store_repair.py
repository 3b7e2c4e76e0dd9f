"""`info --repair` on a Milvus store that it cannot make whole: the writes of the repair are
acknowledged and lost (as a server that drops an acknowledged change does), so the check after
the repair still finds the damage. The command says what it did, what is left, in one `error:`
line, and exits non-zero; once the store keeps its writes again, the same command repairs it
and `info --check` agrees."""
from __future__ import annotations

import pytest

pytest.importorskip("pymilvus")


def test_an_incomplete_repair_says_what_is_left_and_exits_non_zero(tmp_path, run, monkeypatch):
    import pymilvus

    from index.opening import open_store
    corpus = tmp_path / "c.txt"
    corpus.write_text("The cat sat on the mat.\nA dog barked at night.\nRain fell all day.\n")
    loc = f"milvus-lite:{tmp_path / 'lite'}"
    run("ingest", corpus, "--store", loc, "--quiet")
    with open_store(loc) as s:                       # id 2 stored under a wrong hash
        row = s._records([2], ["*"])[2]
        s._client.upsert(s._name, [{**row, "hash": "0" * 32}])
        s._client.flush(s._name)
    real = pymilvus.MilvusClient.upsert
    lost = []

    def acknowledged_and_lost(self, collection, data, **kw):
        lost.extend(int(r["id"]) for r in data)
        return {"upsert_count": len(data)}
    monkeypatch.setattr(pymilvus.MilvusClient, "upsert", acknowledged_and_lost)
    r = run("info", "--repair", "--store", loc, check=False)
    assert lost == [2]                               # the repair did try
    assert r.returncode == 2 and "Traceback" not in r.stderr
    said = r.stderr.splitlines()
    assert said[0] == "repair: 1 hash written again"
    assert said[-1] == (f"error: repair: the Milvus Lite store in {tmp_path / 'lite'} still has "
                        "problems it could not repair: 1 row's hash is not its text's (id 2)")
    assert len(said) == 2 and "ok" not in r.stderr
    monkeypatch.setattr(pymilvus.MilvusClient, "upsert", real)
    again = run("info", "--repair", "--store", loc)
    assert again.stderr.startswith("repair: 1 hash written again\nrepair: ok: 3 sentences read "
                                   "back of 3 rows")
    check = run("info", "--check", "--store", loc)
    assert "check: ok: 3 sentences read back of 3 rows" in check.stderr
