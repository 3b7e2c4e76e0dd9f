"""A full disk under a command's --json output is one `error:` line naming the file that could
not be written (here /dev/full, which fails every write with ENOSPC), never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.paths import ROOT
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert


def _to_dev_full(*argv):
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "app.cli", *map(str, argv)], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=300,
                           env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return p.returncode, p.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")
def test_json_output_to_a_full_disk_is_one_line_naming_it(tmp_path, capsys):
    model = make_tiny_bert(tmp_path / "m")
    lines = tmp_path / "a.txt"
    lines.write_text("the cat sat on the mat\nthe dog ran in the park\n", encoding="utf-8")
    store = tmp_path / "store"
    code, _, err = cli(capsys, "ingest", lines, "--store", store, "--model", model, "--quiet")
    assert code == 0, err
    for argv in [("search", "cat", "--store", store, "--model", model, "--json"),
                 ("runs", "list", "--dir", tmp_path, "--json")]:
        code, err = _to_dev_full(*argv)
        errors = [x for x in err.splitlines() if x.startswith("error: ")]
        assert code == 2 and len(errors) == 1, err
        assert "Traceback" not in err and "Exception ignored" not in err, err
        assert "could not write the JSON output to /dev/full: the disk is full" in errors[0]
