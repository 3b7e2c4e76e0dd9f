"""docs/architecture.md stays true to the tree: every module of app/, core/, index/, bench/ and
tools/ (each with a docstring; an empty __init__.py is only a package's face) is named in
"Every file", and the path of a command-line query takes at most 8 hops, each file once."""
from __future__ import annotations

import ast
import re
import subprocess

from tests.support.paths import ROOT

DOC = ROOT / "docs" / "architecture.md"


def modules() -> list[str]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.py"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [f for f in out if f.split("/")[0] in ("app", "core", "index", "bench", "tools")
            and ast.get_docstring(ast.parse((ROOT / f).read_text(encoding="utf-8")))]


def test_every_module_is_named():
    text = DOC.read_text(encoding="utf-8")
    every_file = text[text.index("## Every file"):]
    missing = [m for m in modules() if f"- `{m}` — " not in every_file]
    assert not missing, "name these in docs/architecture.md (## Every file): " + ", ".join(missing)


def test_named_files_exist():
    text = DOC.read_text(encoding="utf-8")
    named = re.findall(r"^- `([^`]+\.py)` — ", text, flags=re.M)
    assert named and [n for n in named if "*" not in n and not (ROOT / n).is_file()] == []


def test_the_query_path_is_at_most_eight_hops_each_file_once():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## The path of a query"):text.index("**From the app**")]
    hops = re.findall(r"^\| (\d+) \| (.+?) \|", section, flags=re.M)
    assert 1 <= len(hops) <= 8 and [int(n) for n, _ in hops] == list(range(1, len(hops) + 1))
    first_files = [re.findall(r"`([^`]+\.py)`", files)[0] for _, files in hops]
    for f in {f for _, files in hops for f in re.findall(r"`([^`]+\.py|[^`]+/)`", files)}:
        assert (ROOT / f).exists(), f
    # each hop enters a new file, except the last, which returns to the command that asked
    assert len(set(first_files[:-1])) == len(first_files) - 1, first_files
