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
import math
from pathlib import Path

import torch

from core.files import cache_file, platform_os

KERNEL_CHOICE = "kernel_choice.json"
BF16_CHECK = "bf16_check.json"
MAX_BYTES = 4 << 20           # a few hundred short entries; anything far larger is not ours


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
    """key -> the remembered result; {} when there is no cache yet or it is not one (a FIFO or link
    in its place is never opened: core.files.cache_file)."""
    try:
        data = cache_file.read(cache_path(name), MAX_BYTES)
        data = json.loads(data) if data is not None else {}
    except (cache_file.Unusable, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, (bool, float)) and not _non_finite(v)}


def _non_finite(v) -> bool:
    return isinstance(v, float) and not math.isfinite(v)


def save(name: str, entries: dict[str, bool | float]) -> None:
    """Merge ``entries`` into the cache file, written whole and atomically (a read-only or full
    data folder: measured again next start)."""
    cache_file.write(cache_path(name), json.dumps({**load(name), **entries}, indent=1, sort_keys=True).encode("utf-8"),
                     what=f"machine measurement {name}")
