"""What the Intervene and Causal tabs' worker functions share (no Qt): the refusal of a model whose
modules are not ours to hook, core's progress and cancel in the workers' terms, and the folder of
the importance map's on-disk cache (both tabs read the same one).

    ours(backend)                                   # the backend, or InputError in the app's words
    core_fn(..., progress=said(progress, "Sweep"), cancel=asked(cancel))
    importance_cache_dir()                          # <data dir>/cache/importance
"""
from __future__ import annotations

from core.errors import InputError


def ours(backend):
    """Interventions hook our encoder's modules: the transformers encoder is refused in the app's words."""
    if getattr(backend, "backend", "scratch") != "scratch":
        raise InputError("interventions switch parts of Encoderscope's own encoder off: choose "
                         "“From-scratch encoder” in Inspect with (the same weights; transformers' modules "
                         "are not ours to hook)")
    return backend


def said(progress, message: str):
    """core's ``progress(done, total)`` as the workers' ``progress(done, total, message)``."""
    if progress is None:
        return None
    return lambda done, total=0, *_: progress(done, total, message)


def asked(cancel):
    """core calls ``cancel()``; the workers hand a threading.Event."""
    return getattr(cancel, "is_set", cancel)


def importance_cache_dir():
    from core.paths import data_dir
    return data_dir() / "cache" / "importance"
