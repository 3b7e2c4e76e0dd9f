"""The importance maps' and head means' disk cache: data, never truth.

A cached file is only a shortcut. It is read only when it is a regular file (no FIFO, device or
link is opened or followed: a FIFO in its place would block the read forever), and used only
when it is well-formed and fits what is asked: this format, this metric, the model's shape,
every number finite. Anything else is computed afresh, with one note line saying why. A cache
that cannot be written (read-only or full disk) is one warning line; the result is still
returned. One file per entry: safetensors, with the map's fields as JSON in its metadata.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import stat
from pathlib import Path

import numpy as np

from core.notices import say

log = logging.getLogger(__name__)
FORMAT = 3          # bump when what a cached map means changes
MAX_BYTES = 64 << 20


class _Unusable(Exception):
    """Why a cached file is not used (said in one note line)."""


def map_key(backend, metric: str, corpus_sha: str, head_mode: str = "zero") -> str:
    # the precision too: a bf16 map may differ from the fp32 one where an item sits on the edge
    parts = [FORMAT, getattr(backend, "weights_sha256", ""), getattr(backend, "network_sha256", ""),
             backend.choose_pooling(None), getattr(backend, "precision", "fp32"), metric, corpus_sha, head_mode]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def means_key(backend, texts: list[str]) -> str:
    parts = [FORMAT, getattr(backend, "weights_sha256", ""), getattr(backend, "network_sha256", ""), texts]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not followed if a link); None if absent.
    _Unusable for anything else. Opened without blocking, then checked again on the open file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _Unusable(f"cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise _Unusable("is not a regular file (a link, FIFO or device): not opened")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise _Unusable(f"cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unusable("is not a regular file: not read")
        if st.st_size > MAX_BYTES:
            raise _Unusable(f"is {st.st_size:,} bytes, far more than a cached map")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_BYTES + 1)
    except OSError as e:
        raise _Unusable(f"cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _decode(data: bytes) -> tuple[dict, dict]:
    """(arrays, metadata) of a safetensors file's bytes; _Unusable when it is not one of ours."""
    from safetensors import SafetensorError
    from safetensors.numpy import load
    try:
        arrays = load(data)
        header_len = int.from_bytes(data[:8], "little")
        meta = json.loads(data[8:8 + header_len]).get("__metadata__") or {}
        fields = json.loads(meta.get("encoderscope", "null"))
    except (SafetensorError, ValueError, TypeError, UnicodeDecodeError, OverflowError) as e:
        raise _Unusable(f"is not a readable safetensors file ({type(e).__name__})") from None
    if not isinstance(fields, dict) or fields.get("format") != FORMAT:
        raise _Unusable("was written by another version of Encoderscope, or by something else")
    return arrays, fields


def _note(path: Path, why: str, what: str) -> None:
    say(f"the cached {what} {path.name} {why}; computing it afresh", log)


def _write(path: Path, arrays: dict, fields: dict, what: str) -> bool:
    from safetensors.numpy import save

    from core.files.atomic import atomic_write
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = save({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                    metadata={"encoderscope": json.dumps({**fields, "format": FORMAT})})
        atomic_write(path, [data])
        return True
    except OSError as e:
        say(f"the {what} could not be cached in {path.parent} ({e.strerror or e}); "
            "it is shown but will be computed again next time", log)
        return False


# -- importance maps ------------------------------------------------------------------------------
def map_path(folder: Path, key: str) -> Path:
    return Path(folder) / f"importance-{key}.safetensors"


def save_map(folder: Path, key: str, arrays: dict, fields: dict) -> bool:
    """Write one map as data: its arrays and its fields (importance.ImportanceMap.cache_data)."""
    return _write(map_path(folder, key), arrays, fields, "importance map")


def load_map(folder: Path, key: str, shapes: dict, fits) -> tuple[dict, dict] | None:
    """The cached map's (arrays, fields) when every array in ``shapes`` ({name: shape}) is there,
    of that shape and finite, and ``fits(fields)`` holds; else None (then one note line says why)."""
    path = map_path(folder, key)
    try:
        data = read_regular(path)
        if data is None:
            return None
        arrays, f = _decode(data)
        for name, sh in shapes.items():
            a = arrays.get(name)
            if a is None or tuple(a.shape) != sh:
                raise _Unusable(f"holds {name} of shape {None if a is None else tuple(a.shape)}, not {sh}")
            if not np.isfinite(a).all():
                raise _Unusable(f"holds numbers that are not finite in {name}")
        try:
            ok = bool(fits(f))
        except (KeyError, TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            raise _Unusable("does not describe a map of this metric (fields missing, wrong or not finite)")
    except _Unusable as e:
        _note(path, str(e), "importance map")
        return None
    return arrays, f


# -- head means -----------------------------------------------------------------------------------
def means_path(folder: Path, key: str) -> Path:
    return Path(folder) / f"head-means-{key}.safetensors"


def cached_means(backend, texts: list[str], folder: Path | None, compute):
    """The heads' mean outputs over ``texts`` from the cache, else ``compute()`` (then cached)."""
    import torch
    if folder is None:
        return compute()
    cfg = backend.encoder.config
    shape = (cfg.n_layers, cfg.n_heads, cfg.dim // cfg.n_heads)
    path = means_path(folder, means_key(backend, texts))
    try:
        data = read_regular(path)
        if data is not None:
            arrays, _ = _decode(data)
            a = arrays.get("means")
            if a is None or tuple(a.shape) != shape:
                raise _Unusable(f"holds means of shape {None if a is None else tuple(a.shape)}, not {shape}")
            if not np.isfinite(a).all():
                raise _Unusable("holds numbers that are not finite")
            return torch.from_numpy(a.astype(np.float32))
    except _Unusable as e:
        _note(path, str(e), "head means")
    means = compute()
    _write(path, {"means": means.numpy()}, {}, "head means")
    return means
