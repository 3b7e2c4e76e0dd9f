"""A run folder: the training ``--out`` folder, read and appended as a run goes.

It is a model folder (model.safetensors, encoderscope.json, tokenizer files, trainer_state.json)
plus what watching a run leaves there:
- ``metrics.jsonl``: every event the trainer emitted (core/train/trainer.py, EVENT KINDS), one JSON
  object per line, appended and flushed line by line; a reader ignores a torn last line (a
  kill mid-write) and a resumed run first drops the lines past its checkpoint's step;
- ``snapshots/step-0000100.safetensors``: the probe snapshot of each probed step (attentions of
  the probe sentence, the probe set's vectors and cosines), written whole or not at all.

A checkpoint replaces the folder by a fresh copy (core.train.checkpoint.atomic_folder):
``carry_over`` hard-links these files into that copy, so they survive every checkpoint.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from core.files.atomic import writing

METRICS = "metrics.jsonl"
SNAPSHOTS = "snapshots"
_SNAPSHOT_NAME = re.compile(r"^step-(\d+)\.safetensors$")
WATCH_FILES = (METRICS, SNAPSHOTS)


def metrics_path(folder) -> Path:
    return Path(folder).expanduser() / METRICS


def snapshots_dir(folder) -> Path:
    return Path(folder).expanduser() / SNAPSHOTS


def snapshot_name(step: int) -> str:
    """The snapshot's path relative to the run folder (what a "probe" event names)."""
    return f"{SNAPSHOTS}/step-{int(step):07d}.safetensors"


def snapshot_steps(folder) -> list[int]:
    """The steps that have a snapshot, in order."""
    d = snapshots_dir(folder)
    if not d.is_dir():
        return []
    return sorted(int(m.group(1)) for m in (_SNAPSHOT_NAME.match(p.name) for p in d.iterdir()) if m)


# ---- reading ---------------------------------------------------------------------------------

def read_metrics(folder) -> list[dict]:
    """Every event of the run in ``folder``, in order. Without metrics.jsonl (a run trained
    before runs were watched), the loss and evaluations of trainer_state.json's "history" as
    "step" and "eval" events; [] when neither is there."""
    path = metrics_path(folder)
    if not path.is_file():
        return _history_events(folder)
    return parse_metrics(path.read_text(encoding="utf-8"))


def parse_metrics(text: str) -> list[dict]:
    """Lines of metrics.jsonl -> events; a last line cut short by a kill is left out."""
    lines = text.split("\n")
    events = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:          # the torn last line (each line is written with its newline)
                break
            from core.errors import InputError
            raise InputError(f"{METRICS} line {i + 1} is not JSON: {line[:80]!r}") from None
        if isinstance(ev, dict) and "kind" in ev:
            events.append(ev)
    return events


def _history_events(folder) -> list[dict]:
    from core.train.checkpoint import STATE_JSON
    state = Path(folder).expanduser() / STATE_JSON
    if not state.is_file():
        return []
    saved = json.loads(state.read_text(encoding="utf-8"))
    total = saved.get("config", {}).get("steps")
    history = saved.get("history") or {}
    events = [{"kind": "step", "total": total, **h} for h in history.get("train", [])]
    events += [{"kind": "eval", "total": total, **h} for h in history.get("eval", [])]
    return sorted(events, key=lambda e: e["step"])


# ---- writing ---------------------------------------------------------------------------------

class MetricsLog:
    """Appends events to a run folder's metrics.jsonl, one flushed line each. The file is
    opened per line: a checkpoint swaps the folder, and the next line goes to the new one.

    A new run's events are held back until its "start" event (set-up succeeded): a run that
    fails on its options or its corpus leaves no folder behind, nor clears an old one's files."""

    def __init__(self, folder, fresh: bool = False):
        self.folder = Path(folder).expanduser()
        self.pending: list | None = [] if fresh else None

    def append(self, event: dict) -> None:
        if self.pending is not None:
            self.pending.append(event)
            if event.get("kind") != "start":
                return
            clear(self.folder)
            held, self.pending = self.pending, None
            for e in held:
                self.append(e)
            return
        line = json.dumps(event, allow_nan=True, default=_jsonable) + "\n"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / METRICS, "a", encoding="utf-8") as f:
                f.write(line)
                f.flush()
        except OSError as e:   # a torn last line is left out by every reader
            _write_failed(self.folder / METRICS, e, self.folder)


def _jsonable(x):
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def start_run(out, resume=None, step: int = 0) -> MetricsLog:
    """Make ``out`` ready for a run's metrics: a new run starts them afresh; a resumed run keeps
    its checkpoint's lines and snapshots up to ``step`` (those past it were trained after that
    checkpoint and are trained again now), copied over when it resumes into another folder."""
    out = Path(out).expanduser()
    source = Path(resume).expanduser() if resume else None
    if source is None:
        return MetricsLog(out, fresh=True)
    same = out.exists() and source.resolve() == out.resolve()
    if not same:
        clear(out)
    events = [e for e in read_metrics(source) if e.get("step", 0) <= step]
    keep = [snapshot_name(s) for s in snapshot_steps(source) if s <= step]
    if same:
        for s in snapshot_steps(out):
            if s > step:
                (out / snapshot_name(s)).unlink()
    else:
        (out / SNAPSHOTS).mkdir(parents=True, exist_ok=True)
        for name in keep:
            shutil.copy2(source / name, out / name)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / (METRICS + ".tmp")
    try:
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        os.replace(tmp, out / METRICS)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        _write_failed(out / METRICS, e, out)
    return MetricsLog(out)


def _write_failed(path: Path, e: OSError, out: Path):
    from core.train.checkpoint import OutputWriteFailed, after_write_failure, write_reason
    advice, fix = after_write_failure(out)
    raise OutputWriteFailed(f"could not write {path}: {write_reason(e)}; {advice}", fix=fix) from None


def clear(out) -> None:
    """Remove a folder's metrics and snapshots (a new run in a folder that held another)."""
    out = Path(out).expanduser()
    (out / METRICS).unlink(missing_ok=True)
    shutil.rmtree(out / SNAPSHOTS, ignore_errors=True)


def only_watch_files(folder) -> bool:
    """True when ``folder`` holds nothing but metrics and snapshots (a run stopped before its
    first checkpoint): a new run may use it."""
    names = {p.name for p in Path(folder).iterdir()}
    return bool(names) and names <= set(WATCH_FILES) | {METRICS + ".tmp"}


def carry_over(out, new_folder) -> None:
    """Put ``out``'s metrics and snapshots into ``new_folder`` (the checkpoint about to replace
    ``out``): hard links where the file system has them (no copy, instant), else copies."""
    out, new_folder = Path(out).expanduser(), Path(new_folder)
    if not out.is_dir():
        return
    if (out / METRICS).is_file():
        _link_or_copy(out / METRICS, new_folder / METRICS)
    if (out / SNAPSHOTS).is_dir():
        (new_folder / SNAPSHOTS).mkdir(exist_ok=True)
        for p in (out / SNAPSHOTS).iterdir():
            if _SNAPSHOT_NAME.match(p.name):
                _link_or_copy(p, new_folder / SNAPSHOTS / p.name)


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        with writing(dst):
            shutil.copy2(src, dst)


def read_snapshot(folder, step: int) -> dict:
    """A probe snapshot: its arrays (attentions (L, H, T, T), entropy (L, H), probe_vectors,
    probe_cosine) as float32 numpy, plus "step", "tokens" and "probe_texts"."""
    from safetensors import safe_open
    path = Path(folder).expanduser() / snapshot_name(step)
    with safe_open(str(path), framework="numpy") as f:
        out = {k: f.get_tensor(k).astype("float32") for k in f.keys()}
        meta = f.metadata() or {}
    out["step"] = int(meta.get("step", step))
    out["tokens"] = json.loads(meta.get("tokens", "[]"))
    out["probe_texts"] = json.loads(meta.get("probe_texts", "[]"))
    return out
