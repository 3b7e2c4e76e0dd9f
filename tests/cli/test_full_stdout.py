"""Every command that prints, plain and --json, into a full stdout (/dev/full fails every write
with ENOSPC) ends in one `error:` line naming the file and the full disk, never a traceback:
its output goes through the one guarded stdout of app/cli/output.py."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.tiny_models import make_tiny_bert, run_cli
from tests.support.train_corpus import write_corpus

pytestmark = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"
TRAIN = ["--steps", "4", "--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64",
         "--batch-size", "8", "--max-length", "16", "--threads", "1", "--device", "cpu",
         "--no-progress"]


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A tiny model, a store of it, a queries file and two kept runs."""
    from app.cli import main
    root = tmp_path_factory.mktemp("full")
    model = make_tiny_bert(root / "m")
    lines = root / "a.txt"
    lines.write_text("the cat sat on the mat\nthe dog ran in the park\nthe bird sang a song\n"
                     "a fish swam in the sea\n", encoding="utf-8")
    queries = root / "q.tsv"
    queries.write_text("query\trelevant\ncat\tthe cat sat on the mat\n", encoding="utf-8")
    corpus = write_corpus(root / "c.txt", n=60)
    pairs = root / "p.tsv"
    pairs.write_text("a\tb\tscore\nthe cat sat\ta cat sat\t4.5\nthe dog ran\ta bird sang\t1.0\n"
                     "a fish swam\tthe fish swam\t4.0\n", encoding="utf-8")
    assert main(["ingest", str(lines), "--store", str(root / "s"), "--model", str(model), "--quiet"]) == 0
    for run in ("a", "b"):
        assert main(["train", "--corpus", str(corpus), "--out", str(root / "runs" / run), *TRAIN]) == 0
    return dict(model=model, lines=lines, queries=queries, corpus=corpus, pairs=pairs, store=root / "s",
                runs=root / "runs")


def _commands(m, tmp):
    """Every subcommand that prints a result, as it would be typed."""
    model, store = str(m["model"]), tmp / "s"
    return {
        "embed": ["embed", "the cat", "--model", model],
        "inspect": ["inspect", "the cat", "--model", model],
        "fill-mask": ["fill-mask", "the [MASK] sat", "--model", model],
        "models": ["models"],
        "ingest": ["ingest", m["lines"], "--store", tmp / "new", "--model", model, "--quiet"],
        "search": ["search", "cat", "--store", store, "--model", model],
        "info": ["info", "--store", store],
        "info --check": ["info", "--store", store, "--check"],
        "remove": ["remove", "1", "--store", store],
        "migrate": ["migrate", "--from", store, "--to", tmp / "copy", "--quiet"],
        "train": ["train", "--corpus", m["corpus"], "--out", tmp / "run", *TRAIN],
        "runs list": ["runs", "list", "--dir", m["runs"]],
        "runs compare": ["runs", "compare", m["runs"] / "a", m["runs"] / "b"],
        "eval --queries": ["eval", "--queries", m["queries"], "--store", store, "--model", model, "-k", "2"],
        "explain": ["explain", "the cat", "--model", model],
        "why": ["why", "a cat", "the cat sat", "--model", model],
        "ablate": ["ablate", "the cat sat on the mat", "--heads", "1.2", "--model", RANDOM],
        "patch": ["patch", "the cat sat on the mat", "the dog ran in the park", "--site", "L1.resid",
                  "--model", RANDOM],
        "patch --sweep": ["patch", "the cat sat on the mat", "the dog ran in the park", "--sweep", "resid",
                          "--model", RANDOM],
        "patch --trace": ["patch", "the cat sat on the mat", "--trace", "cat", "--model", RANDOM],
        "importance": ["importance", "--metric", "spearman", "--model", RANDOM],
        "attribute": ["attribute", "the cat sat", "--to", "the dog ran", "--model", RANDOM],
        "eval --pairs": ["eval", "--pairs", m["pairs"], "--model", model],
        "experiment": ["experiment", "positions", "--corpus", m["corpus"], "--out", tmp / "exp",
                       *[a for a in TRAIN if a != "--no-progress"]],
        "map": ["map", "--store", store, "--clusters", "2"],
    }


NAMES = list(_commands(dict.fromkeys(("model", "lines", "queries", "corpus", "pairs", "store", "runs"),
                                    Path("x")), Path("x")))
DONE = {"remove": "removed 1 sentence; the store holds 3", "train": "the run is saved in ",
        "experiment": "2 of 2 runs saved under "}
JSON_TOO = {"embed", "inspect", "fill-mask", "models", "search", "info", "migrate",
            "train", "runs list", "runs compare", "eval --queries", "explain", "why", "ablate",
            "patch", "patch --sweep", "patch --trace", "importance", "attribute", "eval --pairs",
            "experiment", "map"}


def _to_full_stdout(capsys, monkeypatch, argv):
    full = open("/dev/full", "w")
    monkeypatch.setattr(sys, "stdout", full)
    try:
        code, _, err = run_cli(argv, capsys)
    finally:
        monkeypatch.undo()
        try:
            full.close()
        except OSError:      # what the command left in its buffer (the old behaviour)
            pass
    return code, err


@pytest.mark.parametrize("json_out", [False, True], ids=["plain", "json"])
@pytest.mark.parametrize("name", NAMES)
def test_every_command_into_a_full_stdout_is_one_error_line(made, tmp_path, capsys, monkeypatch,
                                                            name, json_out):
    if json_out and name not in JSON_TOO:
        pytest.skip(f"`{name}` has no --json")
    shutil.copytree(made["store"], tmp_path / "s")
    argv = _commands(made, tmp_path)[name] + (["--json"] if json_out else [])
    code, err = _to_full_stdout(capsys, monkeypatch, argv)
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert code == 2 and len(errors) == 1, err
    assert "Traceback" not in err, err
    assert errors[0].startswith("error: could not write the ")
    assert " to /dev/full: the disk is full (ENOSPC); " in errors[0], errors[0]
    # work done that running again would not redo: said (train --json stops at its first event)
    if name in DONE and not (json_out and name == "train"):
        assert f"; the work is done and kept ({DONE[name]}" in errors[0], errors[0]
        assert errors[0].endswith("there is no need to run it again; free some space or send the output "
                                  "elsewhere next time"), errors[0]
    else:
        assert errors[0].endswith("free some space or send the output elsewhere, and run it again")
