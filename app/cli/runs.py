"""`encoderscope runs`: the training runs kept on disk, listed and compared.

    encoderscope runs list [--dir D] [--json]          # newest first (default: the models folder)
    encoderscope runs compare RUN RUN... [--json]

compare prints each run's final metrics and the settings in which the runs differ; with --json
{"runs": [{"path", "step", "objective", "config", "final"}], "differs": [...], "ignored": {...}}.
The output folder (and resume / overwrite) always differ and are never listed. No Qt here.
"""
from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("runs", help="list and compare training runs (their curves, final metrics, settings)")
    verbs = p.add_subparsers(dest="runs_command", required=True, metavar="VERB")
    ls = verbs.add_parser("list", help="the training runs under a folder, newest first")
    ls.add_argument("--dir", metavar="D", help="where to look, subfolders included (default: the models folder)")
    ls.add_argument("--json", action="store_true", help="print the runs as JSON")
    ls.set_defaults(func=cmd_list)
    cmp = verbs.add_parser("compare", help="two or more runs side by side: final metrics and differing settings")
    cmp.add_argument("runs", nargs="+", metavar="RUN", help="a run folder (a training --out folder)")
    cmp.add_argument("--json", action="store_true", help="print the comparison as JSON")
    cmp.set_defaults(func=cmd_compare)


def cmd_list(args) -> int:
    from app.cli.options import emit_json
    from core.paths import models_dir
    from core.train.runs import list_runs

    folder = args.dir or models_dir()
    runs, problems = list_runs(folder)
    for problem in problems:
        print(f"note: skipped {problem}", file=sys.stderr)
    if args.json:
        emit_json({"dir": str(folder), "runs": [r.as_dict() for r in runs]})
        return 0
    if not runs:
        print(f"no training runs under {folder}")
        return 0
    rows = [["run", "objective", "step", "loss", "held-out loss"]]
    for r in runs:
        rows.append([str(r.path), r.objective, f"{r.step:,}", _num(r.final.get("loss")),
                     _num(r.final.get("heldout_loss"))])
    print_table(rows)
    return 0


def cmd_compare(args) -> int:
    from app.cli.options import emit_json
    from core.train.runs import compare_runs

    comparison = compare_runs(args.runs)
    if args.json:
        emit_json(comparison)
        return 0
    print_comparison(comparison)
    return 0


def print_comparison(comparison: dict, labels: list[str] | None = None) -> None:
    """The comparison as two tables: the settings that differ, then the final metrics."""
    from pathlib import Path

    runs = comparison["runs"]
    names = labels or [r.get("label") or Path(r["path"]).name for r in runs]
    if len(set(names)) < len(names):          # folders of the same name: show the paths
        names = [r["path"] for r in runs]
    differs = comparison["differs"]
    if differs:
        print("settings that differ:")
        print_table([["run", *differs]] + [[n, *(_value(r["config"].get(s)) for s in differs)]
                                            for n, r in zip(names, runs)])
    else:
        print("the runs have the same settings")
    print(f"(never compared: {', '.join(comparison['ignored'])} — they name where a run is, not how it learns)")
    metrics = sorted(set().union(*(r["final"].keys() for r in runs)))
    if metrics:
        print("final metrics:")
        print_table([["metric", *names]] + [[m, *(_num(r["final"].get(m)) for r in runs)] for m in metrics])


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for k, row in enumerate(rows):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))


def _num(value) -> str:
    return "—" if value is None else f"{value:.4g}"


def _value(value) -> str:
    return "—" if value is None else str(value)
