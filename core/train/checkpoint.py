"""Training checkpoints on disk: the state that lets a run resume, written atomically.

A checkpoint folder is a model folder (weights + encoderscope.json + tokenizer, core/encoder/weights.py)
plus trainer_state.json / trainer_state.safetensors: optimizer moments, RNG states, data position
(no pickle). A folder is written beside its target and renamed into place, so a kill leaves the
previous complete checkpoint or the new one, never half of each.
"""
from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from core.encoder.sources import CHECKPOINT_MARKER
from core.errors import InputError

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
                         "use --init FOLDER to start a new run from its weights")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


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
    write(tmp)
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
