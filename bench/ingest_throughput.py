"""Ingest sentences/second against our own embed sentences/second, same model, same texts, one run.

    python bench/ingest_throughput.py                  # the guard model, 50,000 sentences, CPU
    python bench/ingest_throughput.py --model minilm --n 2000
    python bench/ingest_throughput.py --device cuda --model minilm --n 50000

ingest = VectorStore.add_stream into a new FAISS store (flat index), then save(): the pipeline of
index/store/base.py and index/store/embed_ahead.py, every commit durable. embed = Backend.embed of the same
texts, nothing stored. Start-up (loading the model, opening the store) is outside the timing.
The ratio ingest / embed is the store's own cost: on a GPU its waiting and batching, on a CPU
with the guard model (1 layer, 32 wide: an encoder too small to matter) its overhead per text.
Rounds alternate the two, best of each. The functions are importable (make gpu-check).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import numpy as np  # noqa: E402

from bench.encoder_throughput import mixed_sentences  # noqa: E402

# 1 layer, 32 wide: the encoder costs next to nothing, so ingest / embed shows the store's overhead.
GUARD_MODEL = "random:dim=32,layers=1,heads=2,ffn=64"
GUARD_MIN_RATIO = 0.8


def load(model: str, device: str = "cpu", precision: str | None = None):
    from core.encoder.backends import get_backend
    if precision is None:
        precision = "fp32" if model.startswith("random") else "auto"
    return get_backend(model, "scratch", device=device, precision=precision)


def unique_sentences(n: int) -> list[str]:
    """n distinct mixed sentences (bench/encoder_throughput.py's), so every one is stored."""
    return [f"{t} ({i})" for i, t in enumerate(mixed_sentences(n))]


def embed_rate(backend, texts) -> float:
    """Sentences/second of backend.embed(texts)."""
    t = time.perf_counter()
    backend.embed(texts)
    return len(texts) / (time.perf_counter() - t)


def ingest_rate(backend, texts, folder: Path | None = None, **add) -> float:
    """Sentences/second of add_stream(texts, **add) into a new FAISS store and save(); the store
    is opened before the clock starts and removed afterwards. ``add``: add_stream's options
    (window, batch_size)."""
    from core.long_lived import freeze_long_lived
    from index.faiss.store import VectorStore
    where = Path(tempfile.mkdtemp(prefix="encoderscope-ingest-", dir=folder)) / "store"
    try:
        store = VectorStore.open(where, writable=True, create=True, fingerprint=backend.fingerprint())
        freeze_long_lived(collect=False)        # as `encoderscope ingest` does (core/long_lived.py)
        t = time.perf_counter()
        result = store.add_stream(texts, backend, **add)
        store.save()
        rate = len(texts) / (time.perf_counter() - t)
        store.close()
        if result.added != len(texts):
            raise RuntimeError(f"ingest stored {result.added} of {len(texts)} sentences")
        return rate
    finally:
        shutil.rmtree(where.parent, ignore_errors=True)


def compare(backend, texts, rounds: int = 3, **add) -> dict:
    """`rounds` alternating rounds of embed and ingest (add_stream's options ``add``): the best
    rate of each, the ratio of the bests, and the median of each round's own ratio (steadier
    where other work comes and goes)."""
    embed_rate(backend, texts[:256])                       # warm-up
    embeds, ingests = [], []
    for _ in range(rounds):
        embeds.append(embed_rate(backend, texts))
        ingests.append(ingest_rate(backend, texts, **add))
    return {"embed": max(embeds), "ingest": max(ingests), "ratio": max(ingests) / max(embeds),
            "median_round_ratio": float(np.median([i / e for i, e in zip(ingests, embeds)]))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=GUARD_MODEL, help=f"model (default: the guard model {GUARD_MODEL})")
    ap.add_argument("--n", type=int, default=50_000, help="sentences (default 50,000)")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    ap.add_argument("--precision", default=None, help="fp32 | bf16 | auto (default: fp32 for random weights)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    backend = load(args.model, args.device, args.precision)
    texts = unique_sentences(args.n)
    r = compare(backend, texts, args.rounds)
    r.update(model=args.model, n=args.n, device=backend.device_name, precision=backend.precision,
             threads=torch.get_num_threads())
    if args.json:
        print(json.dumps(r))
    else:
        print(f"{args.model} on {backend.device_name} ({backend.precision}), {args.n:,} sentences: "
              f"embed {r['embed']:,.0f} s/s, ingest {r['ingest']:,.0f} s/s, ingest / embed {r['ratio']:.2f} "
              f"(median of the rounds' own ratios {r['median_round_ratio']:.2f})")
    if args.model == GUARD_MODEL and r["ratio"] < GUARD_MIN_RATIO:
        print(f"below the guard: ingest must run at >= {GUARD_MIN_RATIO}x embed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
