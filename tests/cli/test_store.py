"""`encoderscope ingest/search/info/remove` end to end with the real minilm model."""
from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from index.store.adding import EMBED_WINDOW
from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import run_cli as cli
from tests.support.tiny_models import signal_ingest

CORPUS = ROOT / "assets" / "sample_corpus.txt"


def corpus_lines(n=None):
    lines = [l.strip() for l in CORPUS.read_text(encoding="utf-8").splitlines() if l.strip()]
    return lines[:n] if n else lines


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("inputs")
    lines = corpus_lines(120)
    txt = d / "a.txt"
    # 100 sentences, one blank line, one undecodable line (line 52), one duplicate.
    body = "\n".join(lines[:50]).encode() + b"\n\n\xff\xfe not utf-8\n" + \
        "\n".join(lines[50:100] + [lines[0]]).encode() + b"\n"
    txt.write_bytes(body)
    csv = d / "b.csv"
    csv.write_text("id,sentence\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(lines[100:110])),
                   encoding="utf-8")
    jsonl = d / "c.jsonl"
    jsonl.write_text("".join(json.dumps({"body": t}) + "\n" for t in lines[110:120]) + "{oops\n",
                     encoding="utf-8")
    return {"txt": txt, "csv": csv, "jsonl": jsonl, "lines": lines}


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from tests.support.tiny_models import make_tiny_distilbert
    return make_tiny_distilbert(tmp_path_factory.mktemp("tiny") / "tiny-encoder", mlm=False)


def test_ingest_search_info_remove(tmp_path, inputs, capsys):
    store = tmp_path / "store"
    rc, out, err = cli(["ingest", inputs["txt"], inputs["csv"], inputs["jsonl"], "--store", store,
                        "--column", "sentence", "--field", "body"], capsys)
    assert rc == 0, err
    assert "added 120, duplicates 1, skipped 3 (blank 1, unreadable 2), truncated 0" in out
    assert f"{inputs['txt']}:52: not valid UTF-8" in err and "c.jsonl:11: not valid JSON" in err
    assert "sentences/s" in err            # the tqdm progress bar with its rate

    query = inputs["lines"][7]
    rc, out, err = cli(["search", query, "--store", store, "-k", "5", "--json"], capsys)
    assert rc == 0, err
    res = json.loads(out)["results"]
    assert len(res) == 5 and all(set(r) == {"score", "id", "text"} for r in res)
    assert res[0]["text"] == query and res[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert [r["score"] for r in res] == sorted((r["score"] for r in res), reverse=True)

    rc, out, err = cli(["info", "--store", store, "--json"], capsys)
    info = json.loads(out)
    assert set(info) == {"count", "model", "dim", "index", "bytes", "whitening", "complete"} and info["complete"]
    assert info["whitening"] is None
    assert info["count"] == 120 and info["model"] == "minilm" and info["dim"] == 384
    assert info["index"] == "flat" and info["bytes"] > 120 * 384 * 4

    rc, out, err = cli(["remove", res[0]["id"], "--store", store], capsys)
    assert rc == 0 and "removed 1 sentence" in out
    rc, out, err = cli(["search", query, "--store", store, "-k", "3", "--json"], capsys)
    assert query not in [r["text"] for r in json.loads(out)["results"]]
    rc, out, err = cli(["remove", "999999", "--store", store], capsys)
    assert rc == 2 and err.startswith("error: no sentence with id 999999")
    assert out == "" and len(err.splitlines()) == 1 and "nothing was removed" in err   # no "removed 0"

    # Ingesting the same files again adds nothing; the removed sentence comes back.
    rc, out, err = cli(["ingest", inputs["txt"], "--store", store, "--quiet"], capsys)
    assert rc == 0 and "added 1, duplicates 100" in out


def test_plain_output_and_default_store_folder(tmp_path, inputs, capsys, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("ENCODERSCOPE_DATA_DIR", raising=False)
    monkeypatch.delenv("ENCODERSCOPE_STORE", raising=False)
    rc, out, err = cli(["ingest", inputs["csv"], "--column", "sentence", "--quiet"], capsys)
    assert rc == 0, err
    assert (tmp_path / "xdg" / "encoderscope" / "stores" / "default" / "manifest.json").is_file()
    rc, out, err = cli(["search", inputs["lines"][100], "-k", "2"], capsys)
    assert rc == 0 and inputs["lines"][100] in out.splitlines()[0]
    rc, out, err = cli(["info"], capsys)
    assert rc == 0 and "sentences 10" in out and "minilm" in out


@pytest.mark.skipif(not __import__("importlib").util.find_spec("milvus_lite"),
                    reason="needs the [milvus] extra")
def test_same_commands_on_milvus_lite(tmp_path, inputs, tiny_model, capsys, monkeypatch):
    """ingest/search/info/remove unchanged on a milvus-lite: store, and migrate to FAISS."""
    store = f"milvus-lite:{tmp_path / 'lite'}"
    rc, out, err = cli(["ingest", inputs["txt"], inputs["csv"], "--column", "sentence",
                        "--store", store, "--quiet"], capsys)
    assert rc == 0, err
    assert "added 110, duplicates 1" in out and "Milvus Lite store" in out
    query = inputs["lines"][104]
    rc, out, err = cli(["search", query, "--store", store, "-k", "3", "--json"], capsys)
    res = json.loads(out)["results"]
    assert rc == 0 and res[0]["text"] == query and res[0]["score"] == pytest.approx(1, abs=1e-4)
    info = json.loads(cli(["info", "--store", store, "--json"], capsys)[1])
    assert info["count"] == 110 and info["model"] == "minilm" and info["dim"] == 384
    assert info["index"] == "flat" and info["bytes"] > 0
    rc, out, err = cli(["search", "x", "--store", store, "--model", tiny_model], capsys)
    assert rc == 2 and "tiny-encoder" in err and "minilm" in err and "Traceback" not in err
    rc, out, err = cli(["remove", res[0]["id"], "--store", store], capsys)
    assert rc == 0 and "removed 1 sentence; the store holds 109" in out
    # The same corpus copied to a FAISS folder answers the same query the same way.
    rc, out, err = cli(["migrate", "--from", store, "--to", tmp_path / "faiss", "--quiet",
                        "--json"], capsys)
    assert rc == 0 and json.loads(out)["verified"] and json.loads(out)["destination_count"] == 109
    q = inputs["lines"][5]
    lite_hits = json.loads(cli(["search", q, "--store", store, "--json"], capsys)[1])["results"]
    monkeypatch.setenv("ENCODERSCOPE_STORE", str(tmp_path / "faiss"))   # the default location
    faiss_hits = json.loads(cli(["search", q, "--json"], capsys)[1])["results"]
    assert [h["text"] for h in lite_hits[:5]] == [h["text"] for h in faiss_hits[:5]]
    assert [h["score"] for h in lite_hits] == pytest.approx([h["score"] for h in faiss_hits], abs=1e-5)
    rc, out, err = cli(["ingest", inputs["csv"], "--column", "sentence", "--index", "ivf",
                        "--store", tmp_path / "f2"], capsys)
    assert rc == 0, err          # ivf exists on FAISS folders too now (issue 14)
    assert json.loads(cli(["info", "--store", tmp_path / "f2", "--json"], capsys)[1])["index"] == "ivf"
    rc, out, err = cli(["info", "--store", tmp_path / "f2"], capsys)
    assert rc == 0 and "structure ivf (IndexIDMap2 over IndexRefine over IVF" in out
    assert "re-ranked with fp16 vectors" in out
    # migrate and ingest take the same --index kinds: ivf on a FAISS folder too
    rc, out, err = cli(["migrate", "--from", store, "--to", tmp_path / "faiss-ivf", "--index", "ivf",
                        "--quiet", "--json"], capsys)
    assert rc == 0 and json.loads(out)["verified"], err
    assert json.loads(cli(["info", "--store", tmp_path / "faiss-ivf", "--json"], capsys)[1])["index"] == "ivf"
    rc, out, err = cli(["info", "--store", store, "--repair"], capsys)   # Milvus: rows read back
    assert rc == 0 and "repair: ok: 109 sentences read back of 109 rows" in err, err


def test_long_index_rebuild_is_announced(tmp_path, inputs, capsys, monkeypatch):
    from index.faiss.store import VectorStore
    monkeypatch.setattr(VectorStore, "pending_reindex",
                        lambda self: "building the approximate (HNSW) index: test")
    rc, out, err = cli(["ingest", inputs["csv"], "--column", "sentence", "--store",
                        tmp_path / "s", "--quiet"], capsys)
    assert rc == 0 and "building the approximate (HNSW) index: test ..." in err


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_index_option_switches_an_existing_store(tmp_path, inputs, capsys, kind):
    store = tmp_path / "store"
    assert cli(["ingest", inputs["csv"], "--column", "sentence", "--store", store, "--quiet"],
               capsys)[0] == 0
    assert json.loads(cli(["info", "--store", store, "--json"], capsys)[1])["index"] == "flat"
    rc, out, err = cli(["ingest", inputs["jsonl"], "--field", "body", "--store", store, "--quiet",
                        "--index", kind], capsys)
    assert rc == 0, err
    assert f"from flat to {kind}" in err and f"(index: {kind})" in out
    info = json.loads(cli(["info", "--store", store, "--json"], capsys)[1])
    assert info["index"] == kind and info["count"] == 20
    rc, out, err = cli(["info", "--store", store], capsys)
    assert f"index     {kind} " in out
    rc, out, err = cli(["search", inputs["lines"][112], "--store", store, "-k", "1", "--json"], capsys)
    assert json.loads(out)["results"][0]["text"] == inputs["lines"][112]


def test_other_model_is_refused_then_rebuilt(tmp_path, inputs, tiny_model, capsys):
    store = tmp_path / "store"
    assert cli(["ingest", inputs["csv"], "--column", "sentence", "--store", store, "--quiet"],
               capsys)[0] == 0
    rc, out, err = cli(["search", "hello", "--store", store, "--model", tiny_model], capsys)
    assert rc == 2 and err.startswith("error: ") and "Traceback" not in err
    assert "tiny-encoder" in err and "minilm" in err
    rc, out, err = cli(["search", "hello", "--store", store, "--pooling", "cls"], capsys)
    assert rc == 2 and "cls pooling" in err and "mean pooling" in err
    rc, out, err = cli(["ingest", inputs["jsonl"], "--field", "body", "--store", store,
                        "--model", tiny_model, "--quiet"], capsys)
    assert rc == 2 and "tiny-encoder" in err and "minilm" in err and "--rebuild" in err
    rc, out, err = cli(["ingest", inputs["jsonl"], "--field", "body", "--store", store,
                        "--model", tiny_model, "--quiet", "--rebuild"], capsys)
    assert rc == 0, err
    info = json.loads(cli(["info", "--store", store, "--json"], capsys)[1])
    assert info["count"] == 20 and info["dim"] == 32 and info["model"].endswith("tiny-encoder")
    # The store now searches with its recorded (tiny) model by default.
    rc, out, err = cli(["search", inputs["lines"][111], "--store", store, "--json", "-k", "1"], capsys)
    assert rc == 0 and json.loads(out)["results"][0]["text"] == inputs["lines"][111]


def test_errors_are_messages_not_tracebacks(tmp_path, inputs, capsys):
    rc, out, err = cli(["search", "x", "--store", tmp_path / "none"], capsys)
    assert rc == 2 and err.startswith("error: no store at")
    rc, out, err = cli(["ingest", tmp_path / "missing.txt", "--store", tmp_path / "s"], capsys)
    assert rc == 2 and "no such file" in err
    two = tmp_path / "two.csv"                     # two columns, none of them named like text
    two.write_text("id,label\n1,Hello there.\n", encoding="utf-8")
    rc, out, err = cli(["ingest", two, "--store", tmp_path / "s"], capsys)
    assert rc == 2 and "--column" in err
    store = tmp_path / "s2"
    assert cli(["ingest", inputs["csv"], "--column", "sentence", "--store", store, "--quiet"],
               capsys)[0] == 0
    (store / "manifest.json").write_text("{not json")
    rc, out, err = cli(["info", "--store", store], capsys)
    assert rc == 2 and "manifest" in err and "damaged" in err and "Traceback" not in err
    # A second writer gets a clear message naming the process holding the store.
    from index.faiss.store import VectorStore
    (store / "manifest.json").unlink()
    holder = VectorStore.open(store, writable=True)
    try:
        rc, out, err = cli(["remove", "1", "--store", store], capsys)
        assert rc == 2 and "open for writing in" in err and f"process {os.getpid()}" in err
        rc, out, err = cli(["info", "--store", store, "--json"], capsys)   # readers are fine
        assert rc == 0 and json.loads(out)["count"] == 10
    finally:
        holder.close()




@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_ctrl_c_keeps_committed_sentences(tmp_path):
    """SIGINT in the middle of an ingest: exit 130, a summary, committed batches kept."""
    store = tmp_path / "store"
    src = tmp_path / "in.txt"
    # Three embedding windows (index.store.adding.EMBED_WINDOW): when the 8th row is committed, two
    # windows are still to be embedded, seconds of model work, so the signal lands mid-ingest.
    lines = [f"{line} ({i})" for i, line in enumerate(corpus_lines() * 6)][:3 * EMBED_WINDOW]
    assert len(set(lines)) == 3 * EMBED_WINDOW
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    env = child_env()
    cmd = [sys.executable, "-m", "app.cli", "ingest", str(src), "--store", str(store),
           "--batch-size", "4", "--quiet"]
    code, out, err = signal_ingest(cmd, store, signal.SIGINT)
    assert code == 130, err
    assert "interrupted" in err and "Traceback" not in err
    added = int(out.split("added ")[1].split(",")[0])
    from index.faiss.store import VectorStore
    with VectorStore.open(store) as s:
        assert s.count() == added >= 8
        assert added < len(lines)                     # stopped mid-way, not after the last commit
        assert s._index.ntotal == added
    # Running it again finishes the job, without re-adding what was kept.
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"duplicates {added}," in done.stdout
    assert f"holds {len(lines)} sentences" in done.stdout


def test_console_script(tmp_path, inputs):
    exe = Path(sys.executable).parent / "encoderscope"
    if not exe.exists():
        pytest.skip("console script not installed")
    r = subprocess.run([str(exe), "info", "--store", str(tmp_path / "none"), "--json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("error: no store at")


def test_a_store_of_one_sentence_holds_1_sentence(tmp_path, tiny_model, capsys):
    (tmp_path / "one.txt").write_text("just this one\n", encoding="utf-8")
    code, out, err = cli(["ingest", str(tmp_path / "one.txt"), "--store", str(tmp_path / "s"),
                              "--model", str(tiny_model), "--quiet"], capsys)
    assert code == 0 and "holds 1 sentence" in out and "1 sentences" not in out, (out, err)


def test_ingest_leaves_the_model_the_store_and_the_rows_read_out_of_full_collections(
        tmp_path, inputs, tiny_model, capsys):
    """Alive until the process ends: a full collection during the ingest would walk them all."""
    gc.unfreeze()       # whatever an earlier test's threads froze: this test starts from nothing frozen
    rc, _, err = cli(["ingest", inputs["txt"], "--store", tmp_path / "s", "--model", tiny_model,
                      "--quiet"], capsys)
    assert rc == 0, err
    from app.cli import store as store_cmd
    assert gc.get_freeze_count() > 0
    assert not any(o is store_cmd.cmd_ingest for o in gc.get_objects()), "the command's module is frozen"
