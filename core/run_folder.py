"""A run folder: the training `--out` folder, and the metrics a run wrote into it.

A run folder is a model folder (weights, encoderscope.json, tokenizer files) plus
``trainer_state.json`` (its config and history) and ``metrics.jsonl``: one JSON object per line,
each event the Trainer emitted (``{"kind", "step", "total", ...}``). Everything that reads a run's
metrics goes through ``read_metrics``, so that older runs (no metrics.jsonl) read the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

STATE_JSON = "trainer_state.json"   # as core/checkpoint.py names it (importing that loads torch)
METRICS_FILE = "metrics.jsonl"


def metrics_path(folder: str | Path) -> Path:
    return Path(folder).expanduser() / METRICS_FILE


def read_metrics(folder: str | Path) -> list[dict]:
    """The events of a run, oldest first: metrics.jsonl when the run wrote one, else the
    ``step`` and ``eval`` events rebuilt from trainer_state.json's history.

    A torn last line (a run killed while writing it) is ignored; the file is otherwise trusted
    as the trainer wrote it.
    """
    path = metrics_path(folder)
    if path.is_file():
        return _read_jsonl(path)
    return _events_from_history(folder)


def _read_jsonl(path: Path) -> list[dict]:
    events = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:       # torn while being written: the run died mid-line
                break
            raise ValueError(f"{path}: line {i + 1} is not JSON") from None
        if isinstance(ev, dict):
            events.append(ev)
    return events


def _events_from_history(folder: str | Path) -> list[dict]:
    path = Path(folder).expanduser() / STATE_JSON
    if not path.is_file():
        return []
    state = json.loads(path.read_text(encoding="utf-8"))
    total = int(state.get("config", {}).get("steps", 0) or 0)
    history = state.get("history") or {}
    events = [{"kind": "step", "step": h["step"], "total": total, **h} for h in history.get("train", [])]
    events += [{"kind": "eval", "step": h["step"], "total": total, **h} for h in history.get("eval", [])]
    # the trainer evaluates right after logging the same step: step first, then eval
    events.sort(key=lambda ev: (ev["step"], ev["kind"] != "step"))
    return events
