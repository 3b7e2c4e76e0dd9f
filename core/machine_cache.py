"""Measurements that depend on this machine, not on the session: kept on disk so later starts
skip them (start-up time). A missing or unreadable file only means measuring again.

* ``kernel_choice.json`` - core.encoder.packed_forward.pack_for_cpu_inference: which fp32 Linear kernel (oneDNN or
  MKL) won per weight shape (timing both costs 70-230 ms per model load).
* ``bf16_check.json`` - core.encoder.backends.base.Backend.check_bf16: the min cosine of a model's bf16 vectors with
  its fp32 ones (two embeddings of the check sentences, ~1 s of CPU per load).
Keys hold what the result depends on: the CPU, torch's version and thread count, plus the shape
or the model's folder and weights' mtime.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from core.files import platform_os

KERNEL_CHOICE = "kernel_choice.json"
BF16_CHECK = "bf16_check.json"


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what platform says)."""
    return platform_os.cpu_name()


def machine_key(*what) -> str:
    """A cache key: this machine (CPU, torch, threads) and ``what`` was measured."""
    return " | ".join([cpu_name(), f"torch {torch.__version__}", f"threads {torch.get_num_threads()}",
                       *map(str, what)])


def cache_path(name: str) -> Path:
    from core.paths import data_dir
    return data_dir() / "cache" / name


def load(name: str) -> dict[str, bool | float]:
    """key -> the remembered result; {} when there is no cache yet or it cannot be read."""
    try:
        data = json.loads(cache_path(name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, (bool, float))}


def save(name: str, entries: dict[str, bool | float]) -> None:
    """Merge ``entries`` into the cache file (written whole, then renamed: never half a file)."""
    try:
        path = cache_path(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({**load(name), **entries}, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass    # a read-only data folder: measure again next start
