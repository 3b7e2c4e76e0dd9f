"""One API over two encoders: ours (``scratch``) and Hugging Face transformers (``hf``).

``get_backend(model, backend)`` gives the loaded model, cached; ``Backend`` (base.py) is what it
returns: tokenising, batching, pooling, inspection and fill-mask written once. Each backend
(scratch.py, hf.py) only runs its network.
"""
from __future__ import annotations

import threading
from pathlib import Path

from core import machine_cache
from core.device import pick_device, requested_precision, resolve_precision
from core.encoder.backends.base import (
    BF16_CHECK_SENTENCES,
    MAX_TEXT_CHARS,
    Backend,
    EmbedStats,
    Inspection,
    check_pooling,
)
from core.encoder.sources import DEFAULT_MODEL, resolve
from core.errors import InputError, settings_fix
from core.names import BACKENDS

__all__ = ["BF16_CHECK_SENTENCES", "MAX_TEXT_CHARS", "Backend", "EmbedStats", "Inspection", "check_pooling",
           "clear_cache", "get_backend"]

_cache: dict = {}
_cache_lock = threading.Lock()


def get_backend(model: str = DEFAULT_MODEL, backend: str = "scratch", device=None,
                precision: str | None = None, progress=None) -> Backend:
    """The loaded model, cached: one object per (model, backend, device, precision).

    precision: "auto" (default: $ENCODERSCOPE_PRECISION, else auto) runs embeddings in bf16
    where the hardware has it natively and the model's bf16 vectors pass ``check_bf16``, else
    fp32; "fp32" or "bf16" force one.
    """
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    dev = pick_device(device if isinstance(device, str) or device is None else str(device))
    asked = requested_precision(precision)
    run_in = resolve_precision(dev, asked)
    if asked == "auto" and run_in == "fp32":
        # auto without bf16 here is plain fp32: the very model an explicit fp32 loads (its
        # kernels, its packed weights), so the default can never run slower than fp32 asked for
        asked = "fp32"
    if model == "random" or model.startswith("random:"):
        if backend != "scratch":
            raise InputError("random weights exist only for the from-scratch encoder",
                             fix=settings_fix(backend="scratch"))
        key = (model, backend, str(dev), asked, run_in)
        from core.encoder.backends.scratch import RandomScratchBackend as cls
        where = model
    else:
        source = resolve(model, progress=progress)
        # The files' mtimes are part of the key: a model retrained or edited in place is loaded afresh.
        key = (str(source.folder.resolve()), _weights_mtime(source.folder), backend, str(dev), asked, run_in)
        if backend == "scratch":
            from core.encoder.backends.scratch import ScratchBackend as cls
        else:
            from core.encoder.backends.hf import HFBackend as cls
        where = source
    with _cache_lock:
        if key not in _cache:
            b = cls(where, dev, run_in)
            if asked == "auto" and run_in == "bf16":
                b.check_bf16(memo=machine_cache.machine_key(*key, len(BF16_CHECK_SENTENCES)))
            _cache[key] = b
        return _cache[key]


def _weights_mtime(folder: Path) -> tuple:
    """When the weights, config and tokenizer files last changed: a model edited in place is
    a new model."""
    from core.encoder.fingerprint import NETWORK_FILES
    stamps = []
    for name in ("model.safetensors", "pytorch_model.bin", *NETWORK_FILES):
        try:
            st = (folder / name).stat()
            stamps.append((name, st.st_mtime_ns, st.st_size))
        except OSError:
            pass
    return tuple(stamps)


def clear_cache():
    with _cache_lock:
        _cache.clear()


