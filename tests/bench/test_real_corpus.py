"""bench/real_corpus.py: from a folder of Python files it keeps the docstrings' prose sentences and
nothing else (code, markup, identifiers, test folders, too short or too long), once each; the draw is
seeded."""
from __future__ import annotations

from bench.real_corpus import build, real_sentences

MODULE = '''"""The module reads files from the disk and keeps them in memory.

    >>> read("x")
    'x'

Use read_all() for every file. Call it twice and nothing changes. The module reads files from
the disk and keeps them in memory.
"""


class Reader:
    """A reader remembers which files it has already opened for you.

    Example::

        Reader().open("a")
    """

    def open(self, name):
        """Open the named file and return its text as one long string! Too short here.
        - a list item that is not a sentence of prose at all here
        """
'''


def test_only_the_prose_sentences_are_kept_once_each(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "reader.py").write_text(MODULE, encoding="utf-8")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_reader.py").write_text('"""A test file holds sentences we never want to see."""\n')
    (tmp_path / "broken.py").write_text('"""This file does not parse at all, so it is left out."""\ndef (:\n')
    got = real_sentences([tmp_path])
    assert got == ["The module reads files from the disk and keeps them in memory.",
                   "Call it twice and nothing changes.",
                   "A reader remembers which files it has already opened for you."]


def test_the_draw_is_seeded(tmp_path):
    lines = "\n\n".join(f"Sentence number {w} is plain English prose for the corpus." for w in
                        ("one", "two", "three", "four", "five", "six"))
    (tmp_path / "m.py").write_text(f'"""{lines}"""\n', encoding="utf-8")
    first, available = build(4, seed=3, roots=[tmp_path])
    assert available == 6 and len(first) == 4
    assert build(4, seed=3, roots=[tmp_path])[0] == first
    assert build(6, seed=4, roots=[tmp_path])[0] != build(6, seed=3, roots=[tmp_path])[0]
