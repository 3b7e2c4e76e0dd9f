"""Declared twins (tools/check_twins.py): every `# Twin of` in the tree holds, the twins that must
stay are declared, and the check fails when a declared twin drifts (shown on copies of the real
files in a temp tree, and on a small tree of each kind)."""
from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from tools.check_twins import ROOTS, check, main

ROOT = Path(__file__).resolve().parents[2]
PINNED = "tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch"


def test_every_declared_twin_holds():
    twins, problems = check(ROOT)
    assert problems == []
    declared = {(t.path.relative_to(ROOT).as_posix(), t.target) for t in twins}
    # the twins that must stay: the NumPy teaching network beside the torch one, the packed
    # fast path beside the readable forward
    for twin in ("Embeddings.forward", "MultiHeadSelfAttention.forward", "FFN.forward",
                 "TransformerBlock.forward", "Encoder.forward"):
        assert ("core/walkthrough/numpy_ref.py", f"core.encoder.model.{twin}") in declared
    assert ("core/encoder/packed_forward.py", "core.encoder.model.Encoder.forward") in declared
    assert all(t.why for t in twins)
    # the places `duplicates` still pairs in app/, core/ and index/ are declared (docs/architecture.md)
    for path, target in [("app/gui/wording.py", "app.cli.remedies._fix_worded"),
                         ("core/train/config.py", "core.encoder.model.EncoderConfig.__post_init__"),
                         ("index/milvus/store.py", "index.store.base.Store")]:
        assert (path, target) in declared


@pytest.fixture
def real_copy(tmp_path):
    """The product code and the tests of the real tree, copied to tmp_path."""
    for top in (*ROOTS, "tests"):
        shutil.copytree(ROOT / top, tmp_path / top, ignore=shutil.ignore_patterns("__pycache__", "fixtures"))
    assert check(tmp_path)[1] == []
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_renamed_original_is_drift(real_copy):
    edit(real_copy / "core/encoder/model.py", "class FFN(", "class FeedForward(")
    problems = check(real_copy)[1]
    assert len(problems) == 1 and "core.encoder.model.FFN.forward" in problems[0] and "does not exist" in problems[0]
    assert problems[0].startswith("core/walkthrough/numpy_ref.py:")


def test_a_removed_pinning_test_is_drift(real_copy):
    edit(real_copy / "tests/core/encoder/test_parts.py", "def test_numpy_reference_equals_torch(",
         "def test_renamed(")
    problems = check(real_copy)[1]
    assert len(problems) == 5 and all(PINNED in p and "does not exist" in p for p in problems)
    assert main(["--root", str(real_copy)]) == 1


SMALL = {
    "core/a.py": '''
        def original(x, y):
            """The original."""
            total = x + y        # a comment the copy need not share
            return total * 2
        ''',
    "core/b.py": '''
        # Twin of core.a.original, a copy with original->copied: kept in core.b because it is a test.
        def copied(x, y):
            """Another docstring."""
            total = x + y
            return total * 2


        # Twin of core.a.original,
        #   pinned by tests/test_a.py::test_original: the same sum another way.
        def other(x, y):
            return 2 * (x + y)


        # Twin of core.a.original, alike: the same shape, worded for another audience.
        def alike(x, y):
            return original(x, y)
        ''',
    "tests/test_a.py": '''
        from core import a, b


        def test_original():
            assert a.original(1, 2) == b.other(1, 2)
        ''',
}


@pytest.fixture
def small(tmp_path):
    for name, text in SMALL.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    twins, problems = check(tmp_path)
    assert problems == [] and [t.kind for t in twins] == ["copy", "pinned", "alike"]
    return tmp_path


@pytest.mark.parametrize("old, new, says", [
    ("return total * 2", "return total * 3", "is no longer a copy of core.a.original with original->copied"),
    ("def original(", "def first(", "core.a.original (the twin of copied) does not exist"),
])
def test_small_tree_drift_in_the_original(small, old, new, says):
    edit(small / "core/a.py", old, new)
    problems = check(small)[1]
    assert problems and says in problems[0]


def test_layout_comments_and_docstrings_are_not_drift(small):
    edit(small / "core/b.py", "    total = x + y\n    return total * 2",
         "    # a comment line\n    total = x + y      # and one after the code\n\n    return total * 2")
    assert check(small)[1] == []


def test_the_pinning_test_must_exist_and_name_the_twins_module(small):
    edit(small / "tests/test_a.py", "from core import a, b", "from core import a")
    edit(small / "tests/test_a.py", "b.other(1, 2)", "3 * 2")
    assert "never names core.b" in check(small)[1][0]
    edit(small / "tests/test_a.py", "def test_original", "def test_renamed")
    assert "does not exist" in check(small)[1][0]


def test_a_marker_must_parse_and_say_why(small):
    edit(small / "core/b.py", "# Twin of core.a.original, alike: the same shape, worded for another audience.",
         "# Twin of core.a.original because")
    problems = check(small)[1]
    assert len(problems) == 1 and "does not parse" in problems[0]
    edit(small / "core/b.py", "# Twin of core.a.original because", "# Twin of core.a.original, alike:")
    assert "does not say why" in check(small)[1][0]
