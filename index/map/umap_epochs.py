"""Progress and cancel inside a UMAP fit, which runs for minutes on a big corpus.

umap-learn optimises its layout in a Python loop over epochs, `for n in tqdm(range(n_epochs))`
in umap.layouts; it takes no callback. Its `tqdm` name there is replaced, once, by a function
that hands the loop to a per-thread hook while a fit with one is running (and to tqdm itself
otherwise), so each epoch reports progress(epoch, epochs) and a set cancel Event ends the fit
at the next epoch with Cancelled. Per thread: two maps fitted at once each see their own hook.
"""
from __future__ import annotations

import contextlib
import threading

from core.errors import Cancelled

_HOOK = threading.local()
_INSTALLED: dict = {}
_LOCK = threading.Lock()


def _install(umap_module) -> None:
    """Put the dispatching loop in place of umap.layouts.tqdm (once per process)."""
    with _LOCK:
        layouts = getattr(umap_module, "layouts", None)
        if layouts is None or "tqdm" in _INSTALLED or not hasattr(layouts, "tqdm"):
            return
        original = layouts.tqdm
        _INSTALLED["tqdm"] = original

        def epochs(iterable, *args, **kwargs):
            hook = getattr(_HOOK, "fn", None)
            return original(iterable, *args, **kwargs) if hook is None else hook(iterable)
        layouts.tqdm = epochs


@contextlib.contextmanager
def epoch_hook(umap_module, progress=None, cancel=None):
    """While the block runs in this thread, UMAP's epochs call progress(epoch, epochs) and end
    with Cancelled once `cancel` (an Event) is set."""
    _install(umap_module)

    def loop(iterable):
        items = list(iterable)
        for epoch, item in enumerate(items):
            if cancel is not None and cancel.is_set():
                raise Cancelled("cancelled")
            if progress is not None:
                progress(epoch, len(items))
            yield item
        if progress is not None:
            progress(len(items), len(items))

    previous = getattr(_HOOK, "fn", None)
    _HOOK.fn = loop
    try:
        yield
    finally:
        _HOOK.fn = previous
