"""Standard output closed (`cmd >&-`: Python then has no sys.stdout) is one `error:` line for every
command, before any work: never a traceback, never a store committed and then a crash. The null
device the message suggests runs it."""
from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.output import CLOSED_STDOUT
from tests.cli.test_full_stdout import NAMES, _commands
from tests.support.paths import child_env
from tests.support.tiny_models import cli_command, make_tiny_bert, run_cli

DUMMY = dict.fromkeys(("model", "lines", "queries", "corpus", "pairs", "store", "runs"), Path("x"))


@pytest.mark.parametrize("name", NAMES)
def test_every_command_with_stdout_closed_is_one_error_line_before_any_work(name, tmp_path, capsys, monkeypatch):
    argv = _commands(DUMMY, tmp_path)[name]
    monkeypatch.setattr(sys, "stdout", None)
    code, _, err = run_cli(argv, capsys)
    monkeypatch.undo()
    assert code == 2 and err.strip() == f"error: {CLOSED_STDOUT}", err
    assert list(tmp_path.iterdir()) == []            # nothing made: no store, no run, no copy


@pytest.mark.skipif(sys.platform == "win32", reason="`>&-` is a POSIX shell's")
def test_remove_and_ingest_with_stdout_closed_change_nothing_and_dev_null_runs_them(tmp_path, capsys):
    model = make_tiny_bert(tmp_path / "m")
    lines = tmp_path / "a.txt"
    lines.write_text("the cat sat on the mat\nthe dog ran in the park\n", encoding="utf-8")
    store = tmp_path / "s"
    assert run_cli(["ingest", lines, "--store", store, "--model", model, "--quiet"], capsys)[0] == 0
    cli = " ".join(map(shlex.quote, cli_command()))

    def shell(args, redirect):
        line = f"exec {cli} {' '.join(shlex.quote(str(a)) for a in args)} {redirect}"
        return subprocess.run(["bash", "-c", line], env=child_env(), capture_output=True, text=True, timeout=300)

    def count():
        code, out, _ = run_cli(["info", "--store", store, "--json"], capsys)
        return json.loads(out)["count"]
    more = tmp_path / "b.txt"
    more.write_text("a bird sang a song\n", encoding="utf-8")
    for args in (["remove", "1", "--store", store], ["ingest", more, "--store", store, "--model", model, "--quiet"]):
        p = shell(args, ">&-")
        assert p.returncode == 2 and p.stderr.strip() == f"error: {CLOSED_STDOUT}", p.stderr
        assert count() == 2
    assert shell(["remove", "1", "--store", store], "> /dev/null").returncode == 0      # what it suggests
    assert count() == 1
