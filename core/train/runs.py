"""Past training runs: find them under a folder, read each one's config and final metrics, and
compare two or more — their curves, final metrics and the settings in which they differ.

    runs = list_runs("~/models")                       # newest first
    table = compare_runs([runs[0].path, runs[1].path])  # {"runs": [...], "differs": [...], ...}

A run is a folder holding trainer_state.json (core/train/run_folder.py reads its metrics).
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path

from core.errors import InputError
from core.files.atomic import atomic_write_with
from core.train.config import TrainConfig
from core.train.run_folder import read_metrics

STATE_JSON = "trainer_state.json"   # what makes a folder a run (core/train/checkpoint.py; importing it loads torch)
SNAPSHOTS = "snapshots"             # a run's probe snapshots: never a run inside a run

# Settings never reported as a difference, with why: they name where a run is, not how it learns.
IGNORED_SETTINGS = {
    "out": "each run has its own output folder",
    "resume": "the folder a run was continued from, not a setting of what it learns",
    "overwrite": "permission to replace an output folder, not a setting of what the run learns",
}

# The curves the lab overlays, by event kind; the loss is `step.loss`.
CURVE_KINDS = ("step", "grads", "probe", "eval")
NOT_CURVES = {"kind", "step", "total", "phase", "elapsed_s", "eta_s", "tokens_per_s"}


@dataclass
class Run:
    path: Path                 # the run folder
    config: dict               # the TrainConfig it was trained with (trainer_state.json "config")
    step: int                  # the step its checkpoint is at
    objective: str             # config["objective"], for listings
    modified: float            # when its checkpoint was written (seconds since the epoch)
    final: dict = field(default_factory=dict)   # final_metrics of its events

    def as_dict(self) -> dict:
        return {"path": str(self.path), "step": self.step, "objective": self.objective,
                "config": self.config, "final": self.final}


def read_run(folder: str | Path) -> Run:
    """The run saved in ``folder``; an InputError that names the folder when it is not one."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise InputError(f"{folder} is a file, not a run folder" if folder.exists() else f"{folder}: no such folder")
    if not is_run_folder(folder):
        raise InputError(f"{folder} is not a training run (it has no trainer_state.json)")
    path = folder / STATE_JSON
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        events = read_metrics(folder)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the run in {folder}: {e}") from None
    if not isinstance(state, dict) or not isinstance(state.get("config"), dict):
        raise InputError(f"{path} holds no training config")
    config = state["config"]
    return Run(path=folder, config=config, step=int(state.get("step", 0)),
               objective=str(config.get("objective", "")), modified=path.stat().st_mtime,
               final=final_metrics(events))


def is_run_folder(folder: str | Path) -> bool:
    """A folder a training run wrote: it holds trainer_state.json."""
    try:
        return (Path(folder) / STATE_JSON).is_file()
    except OSError:
        return False


def find_run_folders(directory: str | Path) -> list[Path]:
    """Every run folder under ``directory`` (itself included), not looking inside a run or into
    hidden folders (a checkpoint being written is a hidden sibling)."""
    root = Path(directory).expanduser()
    if not root.is_dir():
        raise InputError(f"{root}: no such folder")
    found = []
    for here, dirs, _files in os.walk(root):
        if is_run_folder(here):
            found.append(Path(here))
            dirs[:] = []
            continue
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != SNAPSHOTS)
    return found


def list_runs(directory: str | Path) -> tuple[list[Run], list[str]]:
    """The runs under ``directory``, newest first, and one message per run folder that could
    not be read (it is skipped, not shown with made-up values)."""
    runs, problems = [], []
    for folder in find_run_folders(directory):
        try:
            runs.append(read_run(folder))
        except InputError as e:
            problems.append(str(e))
    runs.sort(key=lambda r: r.modified, reverse=True)
    return runs, problems


def final_metrics(events: list[dict]) -> dict:
    """The last value of the training loss (``loss``), every number of the last evaluation, and
    the last probe's anisotropy; those a run never reported are left out."""
    final: dict = {}
    steps = [ev for ev in events if ev.get("kind") == "step" and _is_number(ev.get("loss"))]
    if steps:
        final["loss"] = steps[-1]["loss"]
    evals = [ev for ev in events if ev.get("kind") == "eval"]
    if evals:
        final.update({k: v for k, v in evals[-1].items() if k not in NOT_CURVES and _is_number(v)})
    probes = [ev for ev in events if ev.get("kind") == "probe" and _is_number(ev.get("anisotropy"))]
    if probes:
        final["anisotropy"] = probes[-1]["anisotropy"]
    return final


def differing_settings(configs: list[dict]) -> list[str]:
    """The settings whose values are not the same in every config, in TrainConfig's order (then
    any others by name). A setting a config lacks (written before it existed) counts as its
    default; IGNORED_SETTINGS are never listed."""
    defaults = TrainConfig().to_dict()
    order = [f.name for f in fields(TrainConfig)]
    names = set().union(*(c.keys() for c in configs)) if configs else set()
    names -= set(IGNORED_SETTINGS)
    ordered = [n for n in order if n in names] + sorted(names - set(order))
    return [n for n in ordered
            if len({json.dumps(c.get(n, defaults.get(n)), sort_keys=True) for c in configs}) > 1]


def compare_runs(folders: list[str | Path]) -> dict:
    """Two or more runs side by side: ``{"runs": [{"path", "step", "objective", "config",
    "final"}], "differs": [setting names], "ignored": {setting: why}}``."""
    if len(folders) < 2:
        raise InputError("compare needs two or more run folders")
    runs = [read_run(f) for f in folders]
    return {"runs": [r.as_dict() for r in runs],
            "differs": differing_settings([r.config for r in runs]),
            "ignored": dict(IGNORED_SETTINGS)}


def curves(events: list[dict]) -> dict[str, list[tuple[int, float]]]:
    """Every number a run reported over steps, as named series of (step, value): ``step.loss``,
    ``eval.heldout_mlm_loss``, ``probe.anisotropy``, ``grads.total_grad_norm``; a list of numbers
    per parameter group (an event's ``groups``) becomes one series per group, e.g.
    ``grads.grad_norm.layer 1 attention``, and a dict of numbers one series per key."""
    series: dict[str, list[tuple[int, float]]] = {}

    def add(name: str, step: int, value) -> None:
        if _is_number(value):
            series.setdefault(name, []).append((step, float(value)))

    for ev in events:
        kind = ev.get("kind")
        if kind not in CURVE_KINDS or not _is_number(ev.get("step")):
            continue
        step = int(ev["step"])
        groups = ev.get("groups") if isinstance(ev.get("groups"), list) else None
        for key, value in ev.items():
            if key in NOT_CURVES:
                continue
            if isinstance(value, dict):
                for sub, v in value.items():
                    add(f"{kind}.{key}.{sub}", step, v)
            elif isinstance(value, list) and groups is not None and len(value) == len(groups) and key != "groups":
                for group, v in zip(groups, value):
                    add(f"{kind}.{key}.{group}", step, v)
            else:
                add(f"{kind}.{key}", step, value)
    return series


def write_curves_csv(path: str | Path, named_events: dict[str, list[dict]]) -> int:
    """One row per (run, series, step, value) of every run's curves; returns the rows written."""
    rows = 0

    def fill(out) -> None:
        nonlocal rows
        out.writerow(["run", "series", "step", "value"])
        for run, events in named_events.items():
            for name, points in curves(events).items():
                for step, value in points:
                    out.writerow([run, name, step, repr(value)])
                    rows += 1
    _write_csv(path, fill)
    return rows


def write_comparison_csv(path: str | Path, comparison: dict) -> None:
    """The comparison table: one row per run, its differing settings then its final metrics."""
    differs = comparison["differs"]
    metrics = sorted(set().union(*(r["final"].keys() for r in comparison["runs"])))

    def fill(out) -> None:
        out.writerow(["run", *differs, *metrics])
        for r in comparison["runs"]:
            out.writerow([r["path"], *(_cell(r["config"].get(n)) for n in differs),
                          *(repr(r["final"][m]) if m in r["final"] else "" for m in metrics)])
    _write_csv(path, fill)


def _write_csv(path: str | Path, fill) -> None:
    """An export is written beside its target and renamed over it, so a full disk or a crash
    leaves the previous file (or none), never a half-written table."""
    def write(tmp: str) -> None:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            fill(csv.writer(f))
    atomic_write_with(Path(path).expanduser(), write, durable=False)


def _cell(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
