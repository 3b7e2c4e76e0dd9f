"""Every numeric option of every command is bounded (app/cli/bounds.py): a value past its limit, or
not finite, is one `error:` line naming the option and the limit, before any work is done."""
from __future__ import annotations

import argparse

import pytest

from app.cli import build_parser
from tests.support.tiny_models import run_cli

# what each command needs to parse at all (nothing is run: the bounds are checked first)
REQUIRED = {"embed": ["x"], "inspect": ["x"], "fill-mask": ["x"], "ingest": ["f.txt"], "search": ["q"],
            "remove": ["1"], "migrate": ["--from", "a", "--to", "b"], "explain": ["x"], "why": ["a", "b"],
            "eval": ["--pairs", "p.tsv"], "ablate": ["x"], "patch": ["a", "--trace", "a"],
            "attribute": ["x", "--to", "y"],
            "experiment": ["positions", "--corpus", "c.txt", "--out", "o"]}


def numeric_options():
    """(command, option string, type) of every int or float option of every command."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found = []
    for command, p in sub.choices.items():
        for action in p._actions:
            if action.type in (int, float) and action.option_strings:
                found.append((command, action.option_strings[-1], action.type))
    return found


OPTIONS = numeric_options()


def test_the_options_are_found():
    assert ("attribute", "--steps", int) in OPTIONS and ("patch", "--samples", int) in OPTIONS
    assert ("patch", "--noise", float) in OPTIONS and len(OPTIONS) > 40


@pytest.mark.parametrize("command, option, kind", OPTIONS, ids=[f"{c} {o}" for c, o, _ in OPTIONS])
def test_every_numeric_option_has_a_ceiling_named_in_one_line_before_any_work(command, option, kind, capsys,
                                                                               monkeypatch):
    loaded = []
    monkeypatch.setattr("core.encoder.backends.get_backend", lambda *a, **k: loaded.append(a))
    for value in (["1000000000000"] if kind is int else ["1e30", "inf", "nan"]):
        code, out, err = run_cli([command, *REQUIRED.get(command, []), option, value], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {option} "), err
        assert ("is at most " in lines[0]) if value in ("1000000000000", "1e30") else ("finite" in lines[0])
        assert out == "" and loaded == [] and "Traceback" not in err


@pytest.mark.parametrize("argv, says", [
    (["attribute", "x", "--to", "y", "--steps", "20000"], "--steps is at most 4,096, not 20,000"),
    (["attribute", "x", "--to", "y", "--steps", "10000000"], "--steps is at most 4,096"),
    (["patch", "a", "--trace", "a", "--samples", "100000"], "--samples is at most 1,000"),
    (["patch", "a", "--trace", "a", "--noise", "inf"], "--noise must be a finite number, not inf"),
    (["patch", "a", "--trace", "a", "--noise", "1e30"], "--noise is at most 100"),
    (["map", "--store", "s", "--seed", "-1"], "--seed is at least 0, not -1"),
])
def test_the_reported_cases_are_refused_with_their_limit(argv, says, capsys):
    code, out, err = run_cli(argv, capsys)
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err


def test_the_json_writer_never_writes_nan_or_infinity(capsys):
    import json
    import math

    from app.cli.options import emit_json, json_line
    obj = {"a": float("nan"), "b": [1.0, float("inf"), {"c": -float("inf")}], "d": (0.5, float("nan")), "e": "NaN",
           "f": 3, "g": None, "h": [[1e308 * 10]]}

    def refuse(name):
        raise AssertionError(f"bare {name} in the JSON")
    emit_json(obj)
    out = capsys.readouterr().out
    got = json.loads(out, parse_constant=refuse)
    assert got == {"a": None, "b": [1.0, None, {"c": None}], "d": [0.5, None], "e": "NaN", "f": 3, "g": None,
                   "h": [[None]]}
    assert json.loads(json_line({"x": 1.5}), parse_constant=refuse) == {"x": 1.5}       # finite: as it was
    assert not math.isnan(json.loads(json_line([2.0]))[0])
