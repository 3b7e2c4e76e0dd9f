"""transformers, imported under one lock: the one way the code reaches its names.

transformers loads its names lazily on first access (a module-level ``__getattr__``). Two threads
that reach it at once for the first time - the app starting on Search loads the corpus model in
one worker and an inspected checkpoint's tokenizer in another - can see a half-initialised
module and fail with ``ImportError: cannot import name 'AutoTokenizer'``. Here the import and
every first access happen under one lock, so the second thread waits for the first.
"""
from __future__ import annotations

import threading

_lock = threading.RLock()


def from_transformers(*names: str):
    """The named objects of the transformers package (one object for one name, else a tuple),
    imported and looked up under the lock."""
    with _lock:
        import transformers
        found = tuple(getattr(transformers, name) for name in names)
    return found[0] if len(found) == 1 else found


def transformers_lock() -> threading.RLock:
    """The lock itself, for a first use that loads more of transformers lazily (a tokenizer's
    from_pretrained imports its tokenizer class's module)."""
    return _lock
