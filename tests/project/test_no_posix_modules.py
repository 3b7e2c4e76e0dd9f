"""Windows has no fcntl, resource, pwd, grp or termios: every module of app/, core/ and index/
imports without them, and the Qt-free CLI runs end to end with them unimportable (in a
subprocess, tests/support/no_posix_driver.py; the file lock there is the Windows implementation over an
msvcrt stand-in): ingest, search, remove, info --check, train into a folder, ablate, importance."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import ROOT, child_env

pytestmark = [pytest.mark.slow,   # one subprocess of ~12-18 s on 2 cores: `make test-slow`
              pytest.mark.skipif(sys.platform != "linux", reason="its msvcrt stand-in is a Linux OFD lock")]
SENTENCES = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river",
             "the king read a book", "the queen ate food in the garden"]


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    work = tmp_path_factory.mktemp("no-posix")
    env = child_env(ENCODERSCOPE_PRECISION="fp32")
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "support" / "no_posix_driver.py"), str(work)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return work, json.loads((work / "results.json").read_text(encoding="utf-8"))


def _ok(step):
    assert step["code"] == 0, (step["argv"], step["err"][-2000:])
    return step


def test_every_module_imports_without_posix_only_modules(results):
    _, r = results
    assert r["still_blocked"] == []
    names = set(r["modules"])
    for expected in ("core.files.platform_os", "core.files.folder_lock", "index.store.durability", "index.faiss.store",
                     "index.milvus.lite", "app.cli", "app.cli.train", "app.gui.shell.main"):
        assert expected in names
    py_files = {p for p in ROOT.glob("*/**/*.py") if p.parts[len(ROOT.parts)] in ("app", "core", "index")
                and p.name != "__main__.py"}
    assert len(names) >= len(py_files) - 5    # packages count once, files each; nothing skipped


def test_the_store_commands_run_and_are_right(results):
    work, r = results
    assert "added 5, duplicates 0" in _ok(r["ingest"])["out"]       # \r\n lines read as 5 sentences
    hits = json.loads(_ok(r["search"])["out"])["results"]
    assert hits[0]["text"] == SENTENCES[3] and hits[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert "removed 1 sentence; the store holds 4" in _ok(r["remove"])["out"]
    after = [h["text"] for h in json.loads(_ok(r["search_after"])["out"])["results"]]
    assert sorted(after) == sorted(t for t in SENTENCES if t != SENTENCES[3])
    check = _ok(r["check"])
    assert "check: ok: 4 sentences verified" in check["err"] + check["out"]
    lock = (work / "store" / "lock").read_bytes()
    assert lock == b"", "the writer's record is emptied when the lock is given back"


def test_train_writes_its_run_folder(results):
    work, r = results
    _ok(r["train"])
    run = work / "run"
    assert (run / "model.safetensors").is_file() and (run / "metrics.jsonl").is_file()
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
             if x.strip() and json.loads(x).get("kind") == "step"]
    assert steps == [1, 2, 3]
    assert not (work / ".run.writer").exists(), "the folder's lock file is removed when given back"


def test_ablate_and_importance_give_their_numbers(results):
    _, r = results
    ablate = json.loads(_ok(r["ablate"])["out"])
    assert ablate["intervention"] == "heads 1.2, 2.4 zeroed"
    assert ablate["vector_before"] != ablate["vector_after"]
    importance = json.loads(_ok(r["importance"])["out"])
    assert set(importance["heads"]) == {f"{l}.{h}" for l in (1, 2) for h in (1, 2, 3, 4)}
    assert importance["top_heads"][0]["drop"] == max(importance["heads"].values())
