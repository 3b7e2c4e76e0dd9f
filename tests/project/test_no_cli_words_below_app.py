"""core/ and index/ never word the command line: no `--flag` of encoderscope's parser and no
`encoderscope COMMAND` in the messages they raise or log. An error carries its fix as data
(EncoderscopeError.fix); app/cli/remedies.py words it as options, app/gui/wording.py as the
app's controls. The reference for what counts as a flag is the real parser (app.cli)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.support.paths import ROOT

LOG_METHODS = {"debug", "info", "warning", "error", "exception", "critical", "warn"}
ADVICE_NAMES = re.compile(r"(remedy|hint|advice|failure)", re.I)
# An exception built (to be raised by a caller, or returned): its message is a message too.
ERROR_CLASS = re.compile(r"(Error|Exception|NotFound|Unavailable|Corrupted|Failed|Busy|Head|Mismatch|"
                         r"Locked|Lost|File)$")


def parser_words() -> tuple[set[str], set[str]]:
    """Every option string (--x) and every subcommand name of `encoderscope`'s parser."""
    import argparse

    from app.cli import build_parser
    flags, commands = set(), set()

    def walk(p: argparse.ArgumentParser):
        for action in p._actions:
            flags.update(s for s in action.option_strings if s.startswith("--"))
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    commands.add(name)
                    walk(sub)
    walk(build_parser(None))
    flags.discard("--help")
    return flags, commands


def _text(node) -> str | None:
    """A string constant, or an f-string's constant parts with {} for each value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def _strings(node) -> list[ast.AST]:
    """The string nodes under `node` (an f-string once, not again as its constant parts)."""
    parts = {id(v) for j in ast.walk(node) if isinstance(j, ast.JoinedStr) for v in j.values}
    return [sub for sub in ast.walk(node) if id(sub) not in parts and _text(sub) is not None]


def message_nodes(tree: ast.AST):
    """The parts of a module that become a message: raise statements, exceptions built, log and
    warning calls, remedy/hint/advice arguments, defaults, constants and functions."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) and node.exc is not None:
            yield node.exc
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in LOG_METHODS or ERROR_CLASS.search(name):
                yield from node.args
            yield from (k.value for k in node.keywords if k.arg and ADVICE_NAMES.search(k.arg))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            for arg, default in zip(args, defaults + node.args.kw_defaults):
                if default is not None and ADVICE_NAMES.search(arg.arg):
                    yield default
            if ADVICE_NAMES.search(node.name):      # a function that words advice: what it returns
                yield from (r.value for r in ast.walk(node) if isinstance(r, ast.Return) and r.value)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and ADVICE_NAMES.search(t.id) for t in node.targets):
                yield node.value


def cli_words(root: Path, flags: set[str], commands: set[str]) -> list[str]:
    """'path:line: text' for every message under core/ and index/ that words the CLI."""
    command_re = re.compile(r"\bencoderscope (" + "|".join(map(re.escape, sorted(commands))) + r")\b")
    hits = {}
    for path in sorted((root / "core").rglob("*.py")) + sorted((root / "index").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in message_nodes(tree):
            for string in _strings(node):
                text = _text(string)
                named = [f for f in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text) if f in flags]
                if named or command_re.search(text):
                    where = f"{path.relative_to(root)}:{string.lineno}"
                    hits[(where, string.col_offset)] = f"{where}: {text.strip()[:100]}"
    return sorted(hits.values())


def test_the_scan_knows_the_parser_and_finds_cli_words(tmp_path):
    flags, commands = parser_words()
    assert {"--backend", "--precision", "--lr", "--columns", "--whiten", "--store"} <= flags
    assert {"train", "ingest", "search", "info"} <= commands
    (tmp_path / "core").mkdir()
    (tmp_path / "index").mkdir()
    (tmp_path / "core" / "a.py").write_text(
        'def f(x, remedy="name them with --columns"):\n'
        '    log.warning("use --precision fp32")\n'
        '    raise ValueError(f"bad {x}: try " "--backend hf")\n'
        'def g(x):\n'
        '    raise ValueError(f"run `encoderscope train --resume {x}`")\n'
        'def h(x):\n'
        '    raise ValueError(f"held by `encoderscope {x}`; pip install --no-deps x")\n'
        'def after_failure(x):\n'
        '    return f"continue with `encoderscope train --resume {x}`"\n'
        'def k(x):\n'
        '    return StoreNotFound(f"or use the default database (--store {x})")\n')
    found = cli_words(tmp_path, flags, commands)
    assert len(found) == 6, found     # h: a process's name and pip's own option are not our CLI


def test_core_and_index_messages_word_no_command_line():
    flags, commands = parser_words()
    found = cli_words(ROOT, flags, commands)
    assert not found, "CLI wording below app/ (carry the fix as data instead):\n" + "\n".join(found)
