"""A real English corpus of 20,000 sentences, built offline and deterministically from the prose in
the docstrings of Python's standard library and of the packages Encoderscope itself installs
(numpy, torch, transformers, pyqtgraph).

    python bench/real_corpus.py --out build/real_corpus.txt          # 20,000 sentences, one a line
    python bench/real_corpus.py --out FILE --n 5000 --seed 1

Where the sentences come from, in this order (SOURCES): every ``.py`` file under the running
interpreter's standard library (``sysconfig.get_paths()["stdlib"]``), then under the installed
numpy, torch, transformers and pyqtgraph packages (their folders as ``importlib.util.find_spec``
finds them: dependencies of Encoderscope, present wherever it installs; the standard library alone
has about 8,200 sentences that pass the filters, too few). Each source's files in sorted path
order, read as text and parsed with ``ast`` (nothing is imported, so no module runs), leaving out
``site-packages``/``dist-packages`` under the standard library, test folders (``test``, ``tests``,
``idle_test``, ``testing``) and files that do not parse. From each file: the docstrings of the
module and of every class and function (``ast.get_docstring``, cleaned of indentation).

How they are filtered: a docstring is cut into paragraphs at blank lines; a paragraph is dropped
when any of its lines looks like code or markup (starts with ``>>>``, ``...``, ``$``, ``-``, ``*``,
``:``, ``..``, ``|``, ``+``, a digit followed by ``.`` or ``)``, or is indented under the first
line, or holds ``::``). The rest is joined into one line and split into sentences after ``.``, ``!``
or ``?`` followed by a space and an upper-case letter. A sentence is kept when it has 5 to 40 words,
starts with an upper-case letter, ends with ``.``, ``!`` or ``?``, at least 85 % of its non-space
characters are letters, and it holds none of ``_ = < > { } [ ] ( ) | \\ ` * @ # $ ~ ^ / :`` nor a
word with a dot inside (``os.path``), nor "e.g."/"i.e." abbreviations split badly. Sentences are
deduplicated (case and spacing ignored; the first kept), shuffled with ``random.Random(seed)`` and
the first ``n`` written, one a line, UTF-8.

Deterministic for one Python version and one version of each package: other versions have other
docstrings, so another corpus; the script prints the versions, the count before the cut and the
SHA-256 of the file (docs/features.md names the ones its figures used).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import random
import re
import sys
import sysconfig
from pathlib import Path

SKIP_PARTS = {"site-packages", "dist-packages", "test", "tests", "idle_test", "testing", "__pycache__"}
SOURCES = ("stdlib", "numpy", "torch", "transformers", "pyqtgraph")
CODE_START = re.compile(r"^\s*(>>>|\.\.\.|\$|-|\*|:|\.\.|\||\+|\d+[.)])")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
FORBIDDEN = set("_=<>{}[]()|\\`*@#$~^/:")
DOTTED = re.compile(r"\w\.\w")


def source_files(root: Path) -> list[Path]:
    """A source folder's .py files, sorted, without site-packages and test folders."""
    root = Path(root)
    return sorted(p for p in root.rglob("*.py") if not SKIP_PARTS & set(p.relative_to(root).parts[:-1]))


def source_root(name: str) -> Path | None:
    """The folder of a source: the standard library, or an installed package's (None: not installed)."""
    import importlib.util
    if name == "stdlib":
        return Path(sysconfig.get_paths()["stdlib"])
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def versions() -> dict:
    """The version of each source, which fixes its docstrings."""
    from importlib.metadata import PackageNotFoundError, version
    out = {"stdlib": sys.version.split()[0]}
    for name in SOURCES[1:]:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def docstrings(path: Path) -> list[str]:
    """The module's, its classes' and its functions' docstrings, in the file's order ([] if it does not parse)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                found.append(doc)
    return found


def prose_paragraphs(doc: str) -> list[str]:
    """The docstring's paragraphs that read as prose, each joined into one line."""
    out = []
    for para in re.split(r"\n\s*\n", doc):
        lines = [line for line in para.split("\n") if line.strip()]
        if not lines or "::" in para:
            continue
        if any(CODE_START.match(line) for line in lines) or any(line.startswith((" ", "\t")) for line in lines[1:]):
            continue
        out.append(" ".join(line.strip() for line in lines))
    return out


def is_prose(sentence: str) -> bool:
    words = sentence.split()
    if not 5 <= len(words) <= 40 or not sentence[0].isupper() or sentence[-1] not in ".!?":
        return False
    if FORBIDDEN & set(sentence) or DOTTED.search(sentence[:-1]) or "e.g" in sentence or "i.e" in sentence:
        return False
    chars = [c for c in sentence if not c.isspace()]
    return sum(c.isalpha() for c in chars) >= 0.85 * len(chars)


def real_sentences(roots=None) -> list[str]:
    """Every kept sentence of the sources' folders (default: SOURCES'), deduplicated, in file order."""
    if roots is None:
        roots = [r for r in (source_root(name) for name in SOURCES) if r is not None]
    seen, out = set(), []
    for path in (p for root in roots for p in source_files(root)):
        for doc in docstrings(path):
            for para in prose_paragraphs(doc):
                for sentence in SENTENCE_END.split(para):
                    sentence = " ".join(sentence.split())
                    key = sentence.lower()
                    if key not in seen and is_prose(sentence):
                        seen.add(key)
                        out.append(sentence)
    return out


def build(n: int = 20_000, seed: int = 0, roots=None) -> tuple[list[str], int]:
    """(``n`` sentences drawn with ``random.Random(seed)``, how many there were to draw from)."""
    sentences = real_sentences(roots)
    random.Random(seed).shuffle(sentences)
    return sentences[:n], len(sentences)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the file written, one sentence a line")
    parser.add_argument("--n", type=int, default=20_000, help="sentences (default 20,000)")
    parser.add_argument("--seed", type=int, default=0, help="the shuffle's seed (default 0)")
    args = parser.parse_args(argv)
    sentences, available = build(args.n, args.seed)
    data = ("\n".join(sentences) + "\n").encode("utf-8")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(json.dumps({"versions": versions(), "available": available, "written": len(sentences), "file": str(out),
                      "sha256": hashlib.sha256(data).hexdigest(),
                      "words": sum(len(s.split()) for s in sentences)}))
    if len(sentences) < args.n:
        print(f"only {len(sentences):,} sentences pass the filters (asked {args.n:,})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
