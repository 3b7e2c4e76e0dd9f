"""Which device and precision the models run on: CUDA, then MPS, then CPU; bf16 where native.

Overridable per call (``device="cpu"``, ``precision="fp32"``) or for the whole process with the
environment variables ``ENCODERSCOPE_DEVICE`` (auto | cpu | cuda | cuda:1 | mps) and
``ENCODERSCOPE_PRECISION`` (auto | fp32 | bf16).

Precision "auto" (the default) means bf16 where the hardware computes it natively — CPUs with
AVX512-BF16 or AMX, CUDA GPUs with bf16, Apple GPUs (MPS) where a bf16 matmul runs there (macOS 14
and later; older systems refuse it) — and fp32 elsewhere: there bf16 is 1.7-1.8x faster than our
fp32 and 2.6-2.8x transformers' fp32 (minilm, batches of 64, AMD Zen 5; docs/benchmarks.md), and its
vectors keep cosine >= 0.9999 with fp32 (core.encoder.backends checks that for each model before it uses
bf16). Without native instructions bf16 is emulated and slower than fp32.
"""
from __future__ import annotations

import contextlib
import functools
import os

import torch

from core.errors import DeviceUnavailable, InputError, settings_fix
from core.names import PRECISION_CHOICES, PRECISIONS

ENV_VAR = "ENCODERSCOPE_DEVICE"
PRECISION_ENV = "ENCODERSCOPE_PRECISION"


def pick_device(requested: str | None = None) -> torch.device:
    """The device to run on: ``requested``, else $ENCODERSCOPE_DEVICE, else CUDA, MPS, CPU.

    A device that is not there is a DeviceUnavailable (a RuntimeError) worded for people.
    """
    choice = (requested or os.environ.get(ENV_VAR) or "auto").strip().lower()
    source = "" if requested else f" (from ${ENV_VAR})" if os.environ.get(ENV_VAR, "").strip() else ""
    if choice == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if _mps_available():
            return torch.device("mps")
        return torch.device("cpu")
    kind, colon, index = choice.partition(":")
    if kind not in ("cpu", "cuda", "mps") or (colon and not (kind == "cuda" and index.isdigit())):
        raise DeviceUnavailable(f"unknown device {choice!r}{source}: use auto, cpu, cuda, cuda:N or mps")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                f"device {choice!r} was asked for{source}, but this torch build sees no CUDA GPU "
                f"(torch {torch.__version__}); run on the CPU or install a CUDA torch",
                fix=settings_fix(device="cpu"))
        if index and int(index) >= torch.cuda.device_count():
            raise DeviceUnavailable(f"device {choice!r} was asked for{source}, but this machine has "
                                    f"{torch.cuda.device_count()} CUDA GPU(s): cuda:0 .. "
                                    f"cuda:{torch.cuda.device_count() - 1}")
    if kind == "mps" and not _mps_available():
        raise DeviceUnavailable(f"device 'mps' was asked for{source}, but Apple's Metal backend "
                                "is not available here (it needs a Mac with Apple silicon or an AMD "
                                "GPU, and macOS 12.3 or later)", fix=settings_fix(device="cpu"))
    return torch.device(choice)


def _mps_available() -> bool:
    return bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available())


@functools.cache
def _mps_bf16() -> bool:
    """Whether MPS computes bf16 here: a small bf16 matmul runs on it (macOS 14+), else False."""
    if not _mps_available():
        return False
    try:
        x = torch.ones(4, 4, dtype=torch.bfloat16, device="mps")
        return bool(torch.isfinite((x @ x).float().cpu()).all())
    except (RuntimeError, TypeError):
        return False


def describe_device(device: torch.device) -> str:
    """A short human description, e.g. 'cuda:0 (NVIDIA H100)', 'cpu (2 threads)', 'mps (Apple GPU)'."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    if device.type == "cpu":
        n = torch.get_num_threads()
        return f"cpu ({n} thread{'s' if n != 1 else ''})"
    if device.type == "mps":
        return "mps (Apple GPU)"
    return str(device)


def available_devices() -> list[str]:
    names = ["auto", "cpu"]
    if torch.cuda.is_available():
        names.append("cuda")
    if _mps_available():
        names.append("mps")
    return names


@functools.cache
def _cpu_bf16_kernels_refusal() -> str | None:
    """None where this CPU's kernels run bf16, else torch's own reason. Probed, not guessed from
    CPU flags: oneDNN packs bf16 weights only with AVX512-BW/VL/DQ or AVX-NE-CONVERT (an AVX2-only
    CPU refuses, as does ONEDNN_MAX_CPU_ISA=AVX2), so a tiny weight is packed the way
    pack_for_cpu_inference packs the model's, and a tiny autocast matmul is run."""
    try:
        with torch.no_grad():
            x, w = torch.ones(2, 8), torch.ones(4, 8)
            if torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_reorder_linear_weight"):
                torch.ops.mkldnn._reorder_linear_weight(w.to(torch.bfloat16), 2)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                torch.nn.functional.linear(x, w)
    except RuntimeError as e:
        return f"this CPU's kernels cannot run bf16 ({str(e).strip().splitlines()[0]})"
    if not (getattr(torch.backends.cpu, "get_cpu_capability", lambda: "")() in ("AVX512", "AMX")
            or torch.ops.mkldnn._is_mkldnn_bf16_supported()):
        return "this CPU's kernels have no bf16 path (torch reports neither AVX-512 nor oneDNN bf16)"
    return None


def bf16_refusal(device: torch.device) -> str | None:
    """Why bf16 cannot run on ``device`` (a sentence), or None where it can."""
    if device.type == "cuda":
        return None if torch.cuda.is_bf16_supported() else f"{describe_device(device)} has no bf16"
    if device.type == "cpu":
        return _cpu_bf16_kernels_refusal()
    if device.type == "mps":
        return None if _mps_bf16() else "Apple's GPU runs bf16 from macOS 14 on"
    return f"bf16 is not supported on {device.type}"


def bf16_supported(device: torch.device) -> bool:
    """bf16 runs on ``device`` (on a CPU without native bf16, emulated and slower than fp32)."""
    return bf16_refusal(device) is None


def bf16_native(device: torch.device) -> bool:
    """bf16 computed by the hardware itself (AVX512-BF16 or AMX; a CUDA GPU with bf16), with
    kernels that run it here."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        cpu = torch.cpu
        return bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)()
                    or getattr(cpu, "_is_amx_tile_supported", lambda: False)()) and bf16_supported(device)
    if device.type == "mps":
        return _mps_bf16()
    return False


def requested_precision(requested: str | None = None) -> str:
    """``requested``, else $ENCODERSCOPE_PRECISION, else "auto" (validated)."""
    choice = (requested or os.environ.get(PRECISION_ENV) or "auto").strip().lower()
    if choice not in PRECISION_CHOICES:
        source = "" if requested else f" (from ${PRECISION_ENV})"
        raise InputError(f"precision must be one of {', '.join(PRECISION_CHOICES)}, not {choice!r}{source}")
    return choice


def resolve_precision(device: torch.device, requested: str | None = None) -> str:
    """The precision to run in: "auto" becomes bf16 where it is native on ``device``, else fp32;
    an explicit bf16 must be supported there."""
    choice = requested_precision(requested)
    if choice == "auto":
        return "bf16" if bf16_native(device) else "fp32"
    if choice == "bf16" and not bf16_supported(device):
        raise DeviceUnavailable(f"bf16 is not supported on {describe_device(device)}; use fp32")
    return choice


def autocast(device: torch.device, precision: str):
    """A context that runs matmuls in the chosen precision (fp32: no-op)."""
    if precision not in PRECISIONS:
        raise InputError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if precision == "fp32":
        return contextlib.nullcontext()
    if not bf16_supported(device):
        raise DeviceUnavailable(f"bf16 is not supported on {describe_device(device)}; use fp32")
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
