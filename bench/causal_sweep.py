"""How long a minilm residual-stream patching sweep of a 12-token pair takes ([CLS], 10 words,
[SEP]: 6 layers x 12 tokens = 72 cells), against its peer measured in the same run: the same 72
cells one `patch --site` run at a time (patching.patched_run + intervene + embed, a forward pass
per cell). Goal: the sweep within 10 s on 2 CPU cores. Also times the heads and FFN sweeps and
a causal trace (10 samples).

The machine may be shared: the load average and the process's CPU time are printed with the wall
time, so that runs under different loads can be compared.

    python bench/causal_sweep.py [--precision auto|fp32|bf16] [--threads 2] [--no-peer]
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

A = "the quick brown fox jumped over the lazy dog today"
B = "the quick brown cat jumped over the lazy dog today"


def timed(fn):
    load, w, c = os.getloadavg()[0], time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w, time.process_time() - c, (load + os.getloadavg()[0]) / 2


def one_at_a_time(backend, layers: int, n_tokens: int) -> np.ndarray:
    from core.intervene.apply import intervene
    from core.intervene.patching import patched_run
    from core.intervene.spec import parse_site
    va, vb = backend.embed([A, B]).astype(np.float64)
    out = np.zeros((layers, n_tokens))
    for layer in range(layers):
        for t in range(n_tokens):
            spec, source, _, _ = patched_run(backend, A, B, [parse_site(f"L{layer + 1}.resid@{t}")])
            with intervene(backend, spec, patch_source=source):
                v = backend.embed([A])[0].astype(np.float64)
            out[layer, t] = (v @ vb - va @ vb) / (1 - va @ vb)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default=None, choices=("auto", "fp32", "bf16"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-peer", action="store_true", help="skip the one-cell-at-a-time peer")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from core.encoder.backends import get_backend
    from core.intervene.patch_sweep import patch_sweep
    from core.intervene.trace import causal_trace
    backend = get_backend("minilm", "scratch", device="cpu", precision=args.precision)
    n_tokens = len(backend.encode_ids([A])[0][0])
    patch_sweep(backend, A, B, "ffn")                               # warm up
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "?") if os.path.exists("/proc/cpuinfo") else "?"
    print(f"machine: {cpu}, {os.cpu_count()} cores visible, {args.threads} threads; precision {backend.precision}")
    r, s, c, load = timed(lambda: patch_sweep(backend, A, B, "resid"))
    print(f"resid sweep, {r.values.size} cells ({len(r.rows)} layers x {len(r.cols)} tokens, {n_tokens} with the "
          "specials): "
          f"{s:.2f} s wall, {c:.2f} s CPU, load {load:.1f} (goal 10 s: {'met' if s <= 10 else 'NOT met'})")
    for kind in ("heads", "ffn"):
        q, s2, c2, load2 = timed(lambda kind=kind: patch_sweep(backend, A, B, kind))
        print(f"{kind} sweep, {q.values.size} cells: {s2:.2f} s wall, {c2:.2f} s CPU, load {load2:.1f}")
    _, s3, c3, load3 = timed(lambda: causal_trace(backend, A, ["fox"]))
    print(f"causal trace, 10 samples x {len(r.rows) + 1} rows x {len(r.cols)} tokens: {s3:.2f} s wall, "
          f"{c3:.2f} s CPU, load {load3:.1f}")
    if not args.no_peer:
        ref, s4, c4, load4 = timed(lambda: one_at_a_time(backend, len(r.rows), len(r.cols)))
        print(f"peer, the same {ref.size} cells one patch run each: {s4:.2f} s wall, {c4:.2f} s CPU, load {load4:.1f}; "
              f"sweep {s4 / s:.1f}x faster (wall), {c4 / c:.1f}x (CPU); largest difference of a cell "
              f"{np.abs(ref - r.values).max():.2g} (fractions; cos(A, B) {r.cosine_a_b:.4f})")


if __name__ == "__main__":
    main()
