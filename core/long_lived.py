"""The cyclic garbage collector and a process's long-lived objects.

A full collection walks every object the collector tracks: torch, transformers and a loaded model
are ~170,000 of them, a corpus in memory two more per row (its tuple and metadata dict). Python
runs one whenever the objects that survived young collections grow by a quarter, which a bulk
ingest's windows of token lists do every few seconds; each takes 80-300 ms with the GIL held, so
it stalls the UI thread (the app) or the store's writer and the tokeniser together (ingest: 0.23-
0.32 s of a 2.5 s run of 100,000 sentences against a simulated 100,000/s encoder, AMD EPYC, 2 cores).
Freezing moves every object alive now out of the collector's reach (gc.freeze): they are still
freed by their reference counts, only a cycle among them waits for the next thaw.

    freeze_long_lived()               # the app after a model or corpus loaded: thaw, collect, freeze
    freeze_long_lived(collect=False)  # before a bulk ingest (the CLI's, the app's imports of
                                      # 1,024 texts or more): alive now, alive through it
"""
from __future__ import annotations

import gc


def freeze_long_lived(collect: bool = True) -> None:
    """Move every object alive now out of the cyclic GC's reach.

    collect: thaw what was frozen before and collect first (~80 ms with a model loaded), so a
    model or corpus replaced since is freed, not kept for good. Without it, a cycle that is
    already garbage waits for the next collecting call (the app's next load, or the process's
    end: the CLI's bulk commands)."""
    if collect:
        gc.unfreeze()
        gc.collect()
    gc.freeze()
