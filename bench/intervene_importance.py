"""How long a 72-head importance map of minilm takes (recall@10 of the shipped queries over the
sample corpus: 616 texts per ablation), against its peer measured in the same run: one plain
embed of the same texts (the packed fast path). Goal: the map within 60 s on 2 CPU cores.

The machine may be shared: the load average, the process's CPU time and the ratio to the peer
are printed with the wall time, so that runs under different loads can be compared.

    python bench/intervene_importance.py [--precision auto|fp32|bf16] [--threads 2] [--reference]

--reference also times the one-at-a-time path (each part through the hooked modules) on one
layer, the path the stacked sweep replaced, and checks that both give the same drops there.
"""
from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np
import torch


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn):
    load, w, c = os.getloadavg()[0], time.perf_counter(), cpu_s()
    out = fn()
    return out, time.perf_counter() - w, cpu_s() - c, (load + os.getloadavg()[0]) / 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default=None, choices=("auto", "fp32", "bf16"),
                    help="default: the app's (auto: bf16 where the CPU computes it natively)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--metric", default="recall", choices=("recall", "spearman"))
    ap.add_argument("--reference", action="store_true", help="also time the one-at-a-time path on layer 4")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from core.encoder.backends import get_backend
    from core.intervene.importance import importance_map
    from core.intervene.measure import Measure
    from core.intervene.sweep import layer_variants
    backend = get_backend("minilm", "scratch", device="cpu", precision=args.precision)
    texts = Measure(backend, args.metric, 0).texts
    backend.embed(texts[:64])                                      # warm up
    _, embed_s, embed_cpu, load1 = timed(lambda: backend.embed(texts))
    m, map_s, map_cpu, load2 = timed(lambda: importance_map(backend, args.metric))
    _, embed2_s, embed2_cpu, load3 = timed(lambda: backend.embed(texts))
    peer, peer_cpu = (embed_s + embed2_s) / 2, (embed_cpu + embed2_cpu) / 2
    L, H = m.heads.shape
    print(f"machine: {os.cpu_count()} cores visible, {args.threads} threads; precision {backend.precision}; "
          f"load average {load1:.1f} / {load2:.1f} / {load3:.1f} (embed, map, embed)")
    print(f"peer, one embed of the {len(texts)} texts: {embed_s:.2f} s and {embed2_s:.2f} s wall, "
          f"{peer_cpu:.2f} s CPU")
    print(f"{L * H}-head map + {2 * L} layer parts ({args.metric}): {map_s:.1f} s wall = {map_s / peer:.1f} embeds; "
          f"{map_cpu:.1f} s CPU = {map_cpu / peer_cpu:.1f} embeds' CPU "
          f"(goal 60 s: {'met' if map_s <= 60 else 'NOT met'} at this load)")
    print(f"baseline {m.baseline:.4f}; top heads " + ", ".join(f"{l + 1}.{h + 1} {d:+.4f}" for (l, h), d in m.top(5)))
    if args.reference:
        meas, layer = Measure(backend, args.metric, 0), 3
        fast, f_s, f_cpu, _ = timed(lambda: meas.sweep(layer))
        slow, s_s, s_cpu, load4 = timed(lambda: [meas(s, from_layer=layer) for s in layer_variants(H, layer)])
        print(f"layer {layer + 1}'s {H + 2} parts: stacked sweep {f_s:.1f} s wall / {f_cpu:.1f} s CPU, one at a time "
              f"{s_s:.1f} s / {s_cpu:.1f} s CPU ({s_s / f_s:.1f}x wall, {s_cpu / f_cpu:.1f}x CPU; load {load4:.1f}); "
              f"largest difference of a metric {np.max(np.abs(np.subtract(fast, slow))):.2g}")


if __name__ == "__main__":
    main()
