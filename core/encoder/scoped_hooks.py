"""Forward hooks that act only for the call that registered them, whatever thread runs beside it.

One loaded model serves many jobs at once in the app (an intervention in one worker, head means
or a walkthrough in another, plain embedding in a third). A plain ``register_forward_hook`` acts
on every thread's forward: a job that records the heads' outputs would also record another job's
batches and fail on their shapes ("tensor a (17) must match tensor b (19)"). Every hook Encoderscope puts on a
model goes through ``scoped_hooks``: it runs only on the thread that entered the block, and the
other threads' forwards pass through untouched.

The packed CPU fast path (core/encoder/packed_forward.py) skips the modules, so it must not run
where this thread's hooks should act; it may still run for a thread that has none, even while
another thread's scoped hooks sit on the modules (``forward_is_plain``). ``modules_path()`` asks
for the modules on this thread without any hook: the same kernels an intervened run takes, so a
run with and without an intervention compare like with like (bit for bit where nothing changed).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch

_scoped_ids: set[int] = set()       # ids of the hook handles registered here (torch's handle.id)
_local = threading.local()          # .depth: this thread's open scoped_hooks / modules_path blocks
_registering = threading.Lock()     # a hook is on a module only once its id is known to be scoped


def _enter() -> None:
    _local.depth = getattr(_local, "depth", 0) + 1


def _leave() -> None:
    _local.depth -= 1


def active_here() -> bool:
    """True inside a scoped_hooks or modules_path block on this thread."""
    return getattr(_local, "depth", 0) > 0


@contextmanager
def scoped_hooks():
    """Yields ``register(module, kind, fn, prepend=False)`` (kind "pre" or "post", fn as torch's
    hook would get it); every hook registered acts only on this thread and is removed when the
    block ends. ``prepend``: run before the module's hooks already there (e.g. to record a value
    before an intervention's hook replaces it)."""
    owner = threading.get_ident()
    handles = []

    def register(module, kind: str, fn, prepend: bool = False):
        def hook(*args):
            return fn(*args) if threading.get_ident() == owner else None
        add = module.register_forward_pre_hook if kind == "pre" else module.register_forward_hook
        with _registering:
            handle = add(hook, prepend=prepend)
            _scoped_ids.add(handle.id)
        handles.append(handle)
        return handle

    _enter()
    try:
        yield register
    finally:
        for h in handles:
            h.remove()
            _scoped_ids.discard(h.id)
        _leave()


@contextmanager
def modules_path():
    """This thread's forwards go through the modules (not the packed fast path) inside the block."""
    _enter()
    try:
        yield
    finally:
        _leave()


def forward_is_plain(modules) -> bool:
    """True when a forward on this thread would run no hook at all: none of this thread's, no
    global hook, and no hook on ``modules`` other than other threads' scoped ones."""
    if active_here():
        return False
    if torch.nn.modules.module._global_forward_hooks or torch.nn.modules.module._global_forward_pre_hooks:
        return False
    with _registering:
        for m in modules:
            for hooks in (m._forward_hooks, m._forward_pre_hooks):
                # list(): one atomic copy of the keys while another thread may remove some
                if hooks and any(k not in _scoped_ids for k in list(hooks)):
                    return False
    return True
