"""How the command line words the way out of a store error. The store says what fixes it as
data (StoreCorrupted.remedy, StoreNotFound.location, ModelMismatch.rebuild, EmptyStore); here
it becomes the `encoderscope` command that applies it (the app words the same as menu actions)."""
from __future__ import annotations

import shlex


def worded(error: Exception, args) -> str:
    """The error's message, with the command that fixes it where there is one."""
    from index.corpus_map import EmptyStore
    from index.errors import ModelMismatch, StoreCorrupted, StoreNotFound

    message = str(error)
    store = getattr(args, "store", None)
    store_option = f" --store {shlex.quote(store)}" if store else ""
    if isinstance(error, StoreCorrupted):
        if error.remedy == "repair" and not getattr(args, "repair", False):
            return f"{message}: run `encoderscope info --repair{store_option}`"
    elif isinstance(error, StoreNotFound):
        if error.location is not None:
            return (f"{message}: ingest some files first (encoderscope ingest FILE --store "
                    f"{shlex.quote(error.location)})")
    elif isinstance(error, ModelMismatch):
        r = error.rebuild
        if r and "`encoderscope" not in message:
            return (f"{message}: `encoderscope ingest --rebuild --model {shlex.quote(str(r['model']))} "
                    f"--pooling {r['pooling']} --store {shlex.quote(r['location'])}`")
    elif isinstance(error, EmptyStore):
        return f"{message}: encoderscope ingest FILE{store_option or ' --store STORE'}"
    return message
