"""A full disk under a command's output, plain or --json, is one `error:` line naming the file
that could not be written (here /dev/full, which fails every write with ENOSPC), never a traceback
nor a second error when Python flushes at exit (a real process; every command in-process:
tests/test_cli_full_stdout.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert


def _to_dev_full(*argv):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "app.cli", *map(str, argv)], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300,
                           env=child_env())
    return p.returncode, p.stderr


def _one_full_disk_line(argv) -> None:
    code, err = _to_dev_full(*argv)
    errors = [x for x in err.splitlines() if x.startswith("error: ")]
    assert code == 2 and len(errors) == 1, err
    assert "Traceback" not in err and "Exception ignored" not in err, err
    what = "the JSON output" if "--json" in argv else "the output"
    assert f"could not write {what} to /dev/full: the disk is full" in errors[0], errors[0]


@pytest.fixture
def store_and_model(tmp_path, capsys):
    model = make_tiny_bert(tmp_path / "m")
    lines = tmp_path / "a.txt"
    lines.write_text("the cat sat on the mat\nthe dog ran in the park\n", encoding="utf-8")
    store = tmp_path / "store"
    code, _, err = cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")
    assert code == 0, err
    return store, model


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
@pytest.mark.parametrize("json_out", [False, True], ids=["plain", "json"])
def test_output_to_a_full_disk_is_one_line_naming_it(store_and_model, tmp_path, json_out):
    store, model = store_and_model
    flag = ["--json"] if json_out else []
    _one_full_disk_line(["search", "cat", "--store", store, "--model", model, *flag])
    _one_full_disk_line(["runs", "list", "--dir", tmp_path, *flag])
