"""How long a 72-head importance map of minilm takes (recall@10 of the shipped queries over the
sample corpus: 616 texts per ablation), against its peer measured in the same run: one plain
embed of the same texts (the packed fast path). Goal: the map within 60 s on 2 CPU cores.

    python bench/intervene_importance.py [--precision fp32|bf16] [--threads 2]
"""
from __future__ import annotations

import argparse
import os
import time

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp32", choices=("fp32", "bf16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--metric", default="recall", choices=("recall", "spearman"))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from core.encoder.backends import get_backend
    from core.intervene.importance import _Measure, importance_map
    backend = get_backend("minilm", "scratch", device="cpu", precision=args.precision)
    texts = _Measure(backend, args.metric, 0).texts
    t0 = time.perf_counter()
    backend.embed(texts)
    embed_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = importance_map(backend, args.metric)
    map_s = time.perf_counter() - t0
    L, H = m.heads.shape
    print(f"machine: {os.cpu_count()} cores visible, {args.threads} threads, load {os.getloadavg()[0]:.1f}; "
          f"precision {args.precision}")
    print(f"one embed of the {len(texts)} texts: {embed_s:.2f} s")
    print(f"{L * H}-head map + {2 * L} layer parts ({args.metric}): {map_s:.1f} s = {map_s / embed_s:.1f} embeds "
          f"(goal 60 s: {'met' if map_s <= 60 else 'NOT met'})")
    print(f"baseline {m.baseline:.4f}; top heads " + ", ".join(f"{l + 1}.{h + 1} {d:+.4f}" for (l, h), d in m.top(5)))


if __name__ == "__main__":
    main()
