"""Training checkpoints on disk: the state that lets a run resume, written atomically.

A checkpoint folder is a model folder (weights + encoderscope.json + tokenizer, core/encoder/weights.py)
plus trainer_state.json / trainer_state.safetensors: optimizer moments, RNG states, data position
(no pickle). A folder is written beside its target and renamed into place, so a kill leaves the
previous complete checkpoint or the new one, never half of each.
"""
from __future__ import annotations

import errno
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from core.encoder.sources import CHECKPOINT_MARKER
from core.errors import EncoderscopeError, InputError, settings_fix

STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
STATE_VERSION = 1


def read_trainer_state(folder: Path) -> dict:
    folder = Path(folder)
    recover(folder)
    path = folder / STATE_JSON
    if not path.is_file():
        what = "a model folder without training state" if (folder / CHECKPOINT_MARKER).is_file() \
            else "not a training checkpoint"
        raise InputError(f"cannot resume from {folder}: it is {what} (no {STATE_JSON}); "
                         "start a new run from its weights instead", fix=settings_fix(init=str(folder)))
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


class OutputWriteFailed(EncoderscopeError):
    """A training output (checkpoint, metrics) could not be written: a full disk, a quota, an
    I/O error. What was saved before is kept."""


def after_write_failure(out: Path) -> tuple[str, dict | None]:
    """What to do once space is freed, and its fix: continue from the checkpoint kept (resume
    the run in `out`), or start again."""
    if (Path(out) / CHECKPOINT_MARKER).is_file():
        return ("it holds the last checkpoint; free some space and continue from it",
                {"kind": "resume", "out": str(out)})
    return "free some space and run the same command again", None


def write_reason(e: Exception) -> str:
    code = getattr(e, "errno", None)
    text = str(e)
    if code == errno.ENOSPC or "No space left" in text or "StorageFull" in text:
        return "the disk is full (ENOSPC)"
    if code == errno.EDQUOT or "quota" in text.lower():
        return "the disk quota is used up"
    return getattr(e, "strerror", None) or text.splitlines()[0][:200]


def _is_write_error(e: Exception) -> bool:
    """An OSError, or safetensors' error for one (it reports the OS error in its message)."""
    return isinstance(e, OSError) or (type(e).__name__ == "SafetensorError"
                                      and ("Io" in str(e) or "os error" in str(e).lower()))


def _failed_file(e: Exception, tmp: Path) -> Path | None:
    """The file a failed write was writing, as a path inside the folder: the one the error
    names (core.files.atomic.writing names it), else the file written last."""
    named = getattr(e, "filename", None)
    if named:
        try:
            return Path(named).relative_to(tmp)
        except ValueError:
            pass
    newest = _newest_file(tmp)
    return newest.relative_to(tmp) if newest else None


def _newest_file(folder: Path) -> Path | None:
    """The file written last in `folder` (the one a failed write was writing)."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    return max(files, key=lambda p: p.stat().st_mtime_ns) if files else None


def _siblings(out: Path) -> tuple[Path, Path]:
    return out.parent / f".{out.name}.tmp", out.parent / f".{out.name}.old"


def recover(out: Path) -> None:
    """Finish a swap a kill interrupted: ``out`` missing but its previous copy still beside it."""
    out = Path(out)
    _, old = _siblings(out)
    if not out.exists() and old.is_dir():
        old.rename(out)


def atomic_folder(out: Path, write: Callable[[Path], None]) -> Path:
    """Write a folder's files into a temporary sibling, then rename it over ``out``."""
    out = Path(out)
    tmp, old = _siblings(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    recover(out)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
    except Exception as e:
        if not _is_write_error(e):
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        failed = _failed_file(e, tmp)
        shutil.rmtree(tmp, ignore_errors=True)
        advice, fix = after_write_failure(out)
        raise OutputWriteFailed(
            f"could not write the checkpoint {out / failed if failed else out}: "
            f"{write_reason(e)}; {out} is unchanged: {advice}", fix=fix) from None
    if out.exists():
        out.rename(old)          # from here until the next line, recover() can undo it
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict, list]:
    sd = opt.state_dict()
    tensors = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            t = v if torch.is_tensor(v) else torch.tensor(v)
            tensors[f"opt.{idx}.{k}"] = t.detach().contiguous().cpu()
    return tensors, sd["param_groups"]


def optimizer_state(tensors: dict, groups: list) -> dict:
    state: dict = {}
    for key, t in tensors.items():
        if key.startswith("opt."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = t
    return {"state": state, "param_groups": groups}
