"""Declared twins: code written twice on purpose, and a check that the two have not drifted.

In the spirit of Hugging Face's ``# Copied from`` (transformers' utils/check_copies.py), a twin
is declared by one comment directly above its ``def`` or ``class`` (decorators may sit between),
naming the other one by its dotted path and saying how the pair is kept equal, then (after a
colon) why it stays two; the marker may run on over the comment lines right below it::

    # Twin of core.encoder.model.FFN.forward,
    #   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
    #   the NumPy network a learner reads beside the torch one.
    def feed_forward(x, p, name, approximate): ...

Three kinds:

* ``a copy`` (optionally ``a copy with Old->New, Old2->New2``): the code below the marker must be
  the named code, token for token, after the substitutions (comments and docstrings aside);
* ``pinned by tests/PATH.py::test_name``: a semantic twin (NumPy beside torch, a fast path
  beside the readable one) kept equal by a numerical test: that test must exist;
* ``alike``: two places of the same shape that stay two for the reason given (they word things
  differently, they run on different layers...); only the names are checked.

Every kind checks that the named twin exists (a rename or a move is drift too).

    python -m tools.check_twins            # exit 1 and one line per drifted twin
    python -m tools.check_twins --list     # every declared twin
"""
from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

ROOTS = ("app", "core", "index", "bench", "tools")     # where twins are declared
MARKER = re.compile(r"Twin of\s+(?P<target>[A-Za-z_][\w.]*)\s*,\s*"
                    r"(?:(?P<copy>a copy)(?:\s+with\s+(?P<subs>[^:]+?))?"
                    r"|pinned by\s+(?P<test>[\w/.-]+\.py(?:::\w+)+)|(?P<alike>alike))"
                    r"\s*:(?:\s+|$)(?P<why>.*)$")
LOOSE = re.compile(r"#\s*Twin of\b")      # a line meant as a marker: it must parse


@dataclass
class Twin:
    path: Path              # the file holding the marker
    line: int               # the marker's line (1-based)
    kind: str               # "copy", "pinned" or "alike"
    target: str             # the named twin: module.Class.function
    why: str
    subs: tuple = ()        # (old, new) pairs of a copy
    test: str = ""          # tests/PATH.py::test_name of a pinned twin

    def where(self, root: Path) -> str:
        return f"{self.path.relative_to(root).as_posix()}:{self.line}"


def declared(root: Path, roots=ROOTS) -> tuple[list[Twin], list[str]]:
    """Every twin declared under root's `roots`, and the problems of markers that do not parse."""
    twins, problems = [], []
    for top in roots:
        for path in sorted((root / top).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            if not LOOSE.search(source):
                continue
            lines = source.splitlines()
            for n, text in _comments(source):
                if not LOOSE.match(text):
                    continue
                # the marker and the comment lines after it, read as one sentence
                m = MARKER.match(" ".join([text.lstrip("#").strip()] + _continued(lines, n)))
                where = f"{path.relative_to(root).as_posix()}:{n}"
                if m is None:
                    problems.append(f"{where}: a twin marker that does not parse: write '# Twin of "
                                    "module.name, a copy [with A->B] | pinned by tests/x.py::test_y | alike: why'")
                    continue
                why = m["why"].strip()
                if not why:
                    problems.append(f"{where}: the twin of {m['target']} does not say why it stays two")
                subs = tuple(tuple(s.strip() for s in pair.split("->", 1))
                             for pair in (m["subs"] or "").split(",") if "->" in pair)
                kind = "copy" if m["copy"] else "pinned" if m["test"] else "alike"
                twins.append(Twin(path, n, kind, m["target"], why, subs, m["test"] or ""))
    return twins, problems


def _comments(source: str):
    """(line, text) of each comment that stands alone on its line (not one inside a string)."""
    for t in tokenize.generate_tokens(io.StringIO(source).readline):
        if t.type == tokenize.COMMENT and not t.line[:t.start[1]].strip():
            yield t.start[0], t.string


def _continued(lines: list[str], n: int) -> list[str]:
    """The comment lines right after the marker (line n, 1-based): its reason, continued."""
    out = []
    for text in lines[n:]:
        s = text.strip()
        if not s.startswith("#") or LOOSE.search(s):
            break
        out.append(s.lstrip("#").strip())
    return out


def _node_at(tree: ast.AST, names: list[str]):
    """The def/class reached by walking `names` down from the module tree, or None."""
    node = tree
    for name in names:
        node = next((c for c in getattr(node, "body", [])
                     if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and c.name == name), None)
        if node is None:
            return None
    return node


def resolve(root: Path, dotted: str):
    """(source text, the def/class node) named by `dotted` (package.module.Class.method)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = root.joinpath(*parts[:cut]).with_suffix(".py")
        if path.is_file():
            source = path.read_text(encoding="utf-8")
            node = _node_at(ast.parse(source), parts[cut:]) if parts[cut:] else None
            return source, node
    return None, None


def _block_below(path: Path, line: int):
    """(source, the def/class node) that the marker on `line` (1-based) stands above: the first
    line after the marker's comment lines is that def/class or its first decorator."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    k = line                                  # 0-based index of the line after the marker
    while k < len(lines) and lines[k].strip().startswith("#"):
        k += 1
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if min([node.lineno] + [d.lineno for d in node.decorator_list]) == k + 1:
                return source, node
    return source, None


def code_tokens(source: str, node) -> list[str]:
    """The node's code as tokens: comments, docstrings and layout (blank lines, line breaks
    inside brackets) left out, so that a copy differs from its original only in its code."""
    start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    segment = "".join(source.splitlines(keepends=True)[start - 1:node.end_lineno])
    docs = set()          # lines (1-based, in the segment) where a docstring starts
    for n in ast.walk(node):
        body = getattr(n, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docs.add(body[0].value.lineno - start + 1)
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING, tokenize.ENDMARKER)
    return [tokenize.tok_name[t.type] if t.type in (tokenize.INDENT, tokenize.DEDENT) else t.string
            for t in tokenize.generate_tokens(io.StringIO(_dedent(segment)).readline)
            if t.type not in skip and not (t.type == tokenize.STRING and t.start[0] in docs)]


def _dedent(text: str) -> str:
    lines = text.splitlines(keepends=True)
    pad = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return "".join(x[pad:] if x.strip() else "\n" for x in lines)


def _test_problem(root: Path, test: str, module: str) -> str | None:
    """Why tests/PATH.py::name (or ::Class::name) does not pin a twin of `module`: the test
    must exist, and its file must name the twin's module (it runs that code, not another)."""
    file, _, names = test.partition("::")
    path = root / file
    if not path.is_file() or _node_at(ast.parse(path.read_text(encoding="utf-8")), names.split("::")) is None:
        return "does not exist"
    if module.rsplit(".", 1)[-1] not in path.read_text(encoding="utf-8"):
        return f"never names {module}"
    return None


def drift(root: Path, twin: Twin) -> str | None:
    """What is wrong with one declared twin, or None."""
    where = twin.where(root)
    source, node = _block_below(twin.path, twin.line)
    if node is None:
        return f"{where}: the twin marker stands above no def or class"
    target_source, target = resolve(root, twin.target)
    if target is None:
        return f"{where}: {twin.target} (the twin of {node.name}) does not exist: moved or renamed?"
    module = ".".join(twin.path.relative_to(root).with_suffix("").parts)
    if twin.kind == "pinned" and (why := _test_problem(root, twin.test, module)):
        return f"{where}: {twin.test}, the test pinning {node.name} to {twin.target}, {why}"
    if twin.kind == "copy":
        want = target_source
        for old, new in twin.subs:
            want = want.replace(old, new)
        ours, theirs = code_tokens(source, node), code_tokens(want, _node_at_line(want, target.lineno))
        if ours != theirs:
            at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
            return (f"{where}: {node.name} is no longer a copy of {twin.target}"
                    + (f" with {', '.join(f'{a}->{b}' for a, b in twin.subs)}" if twin.subs else "")
                    + f": first difference at {' '.join(ours[at:at + 6])!r} vs {' '.join(theirs[at:at + 6])!r}")
    return None


def _node_at_line(source: str, lineno: int):
    """The def/class starting at `lineno` of `source` (after substitutions the names may differ)."""
    return next(n for n in ast.walk(ast.parse(source))
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.lineno == lineno)


def check(root: Path, roots=ROOTS) -> tuple[list[Twin], list[str]]:
    """(every declared twin, one line per problem: a marker that does not parse, or a drift)."""
    twins, problems = declared(root, roots)
    problems += [p for p in (drift(root, t) for t in twins) if p]
    return twins, problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--list", action="store_true", help="list every declared twin")
    args = ap.parse_args(argv)
    twins, problems = check(args.root)
    if args.list:
        for t in twins:
            print(f"{t.where(args.root)}  {t.kind:6}  {t.target}  {t.test}")
    for p in problems:
        print(f"drift: {p}", file=sys.stderr)
    print(f"{len(twins)} declared twins, {len(problems)} drifted", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
