"""Remembered kernel timings: which fp32 Linear kernel (oneDNN or MKL) won on this machine.

core.model.pack_for_cpu_inference times both kernels once per weight shape (70-230 ms per model
load). The winner depends on the CPU, torch's version and the thread count, not on the weights,
so it is kept on disk per (CPU, torch, threads, shape) and later starts skip the timing
(issue 14, start-up). A missing or unreadable file only means timing again.
"""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import torch

CACHE_NAME = "kernel_choice.json"


def cpu_name() -> str:
    """The CPU's model name (Linux /proc/cpuinfo; elsewhere what platform says)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def choice_key(in_features: int, out_features: int, gelu: str | None) -> str:
    """One line of the cache: what the timing depends on."""
    return (f"{cpu_name()} | torch {torch.__version__} | threads {torch.get_num_threads()} | "
            f"{out_features}x{in_features} | gelu {gelu}")


def cache_path() -> Path:
    from .paths import data_dir
    return data_dir() / "cache" / CACHE_NAME


def load_choices() -> dict[str, bool]:
    """key -> True where oneDNN won; {} when there is no cache yet or it cannot be read."""
    try:
        data = json.loads(cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, bool)} \
        if isinstance(data, dict) else {}


def save_choices(choices: dict[str, bool]) -> None:
    """Merge ``choices`` into the cache file (written whole, then renamed: never half a file)."""
    try:
        path = cache_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        merged = {**load_choices(), **choices}
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(merged, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass    # a read-only data folder: time again next start
