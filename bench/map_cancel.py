"""How soon the default (UMAP) corpus map shows progress and how fast its cancel takes effect,
on a FAISS store of N × 384-d clustered vectors (tests/test_store_support.clustered).

Prints the time to read the vectors, the time until UMAP reports its first layout epoch (its
neighbour search and first layout run before, with no progress inside umap-learn), and the
delay between setting the cancel (at epoch 3) and the fit ending with Cancelled.

    python bench/map_cancel.py [--rows 100000]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def measure(rows: int, folder: Path) -> dict:
    from core.encoder.fingerprint import Fingerprint
    from core.errors import Cancelled
    from index.faiss.store import VectorStore
    from index.map.corpus_map import build_map
    from tests.support.store_backends import clustered
    fp = Fingerprint("fake", "f" * 64, "mean", 384, True)
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=fp)
    x = clustered(rows, 384, seed=1)
    for i in range(0, rows, 10_000):
        end = min(rows, i + 10_000)
        store.add([f"sentence {j} topic {j % 13}" for j in range(i, end)], x[i:end])
    store.save()
    store.close()
    store = VectorStore.open(folder, writable=False)
    cancel, marks = threading.Event(), {}
    t0 = time.perf_counter()

    def progress(done, total, message):
        now = time.perf_counter() - t0
        if message.startswith("Projecting"):
            marks.setdefault("read_s", now)
        if "layout epoch" in message:
            marks.setdefault("first_epoch_s", now)
            if done == 3:
                marks["cancel_at"] = now
                cancel.set()
    try:
        build_map(store, method="umap", progress=progress, cancel=cancel)
    except Cancelled:
        marks["cancel_delay_s"] = time.perf_counter() - t0 - marks.pop("cancel_at")
    finally:
        store.close()
    return marks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=100_000)
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        marks = measure(args.rows, Path(tmp) / "s")
    print(" ".join(f"{k}={v:.2f}" for k, v in marks.items()))


if __name__ == "__main__":
    main()
