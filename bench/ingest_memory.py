"""Peak memory of `encoderscope ingest` as the corpus grows: it should be bounded by the
ingest's window, not by the number of rows (beyond the index itself).

Each run is a fresh `encoderscope ingest` process on N short distinct lines into a new FAISS
store, with a tiny random encoder (so embedding is fast and the model's own memory small);
its peak RSS is read from the kernel (ru_maxrss of the waited child). The peer, measured in the
same run, is the same command on the smallest N: the report is the growth per added row, and
how much of it the index itself explains (dim x 4 bytes + an 8-byte id per row for FAISS flat).

    python bench/ingest_memory.py                      # 1k, 100k, 1M rows, 32-d
    python bench/ingest_memory.py --rows 1000 200000 --dim 64
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


# The child reports its own peak (ru_maxrss of RUSAGE_SELF, KiB on Linux) as it exits.
CHILD = ("import resource, sys; from app.cli import main; rc = main(); "
         "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
         "file=sys.stderr); sys.exit(rc)")


# The peer: the same process imports, then only the FAISS index the store builds, filled with
# n vectors in chunks as the ingest fills it: what the rows cost that no window can bound.
PEER = ("import resource, sys; import numpy as np; import torch, transformers; "
        "from index.faiss.faiss_index import FaissIndex; n, d = int(sys.argv[1]), int(sys.argv[2]); "
        "ix = FaissIndex.build('flat', d, {}, np.zeros(0, np.int64), np.zeros((0, d), np.float32)); "
        "rng = np.random.default_rng(0)\n"
        "for s in range(0, n, 1024):\n"
        "    e = min(n, s + 1024); v = rng.standard_normal((e - s, d)).astype(np.float32); "
        "ix.add(np.arange(s, e, dtype=np.int64), v / np.linalg.norm(v, axis=1, keepdims=True))\n"
        "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)")


def peak_rss_of_index(n: int, dim: int) -> float:
    proc = subprocess.run([sys.executable, "-c", PEER, str(n), str(dim)], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"the index-only peer failed: {proc.stderr[-2000:]}")
    return int(proc.stderr.rsplit("PEAK_RSS_KIB ", 1)[1].split()[0]) / 1024


def write_lines(path: Path, n: int) -> None:
    words = ("cat dog bird fish mat tree river sky house garden park street book film food "
             "water king queen city music").split()
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            f.write(f"the {words[i % len(words)]} saw {words[(i // 7) % len(words)]} {i}\n")


def peak_rss_of_ingest(n: int, dim: int, work: Path, index: str) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of one ingest of n lines in a child process."""
    src = work / f"lines-{n}.txt"
    write_lines(src, n)
    store = work / f"store-{n}"
    model = f"random:dim={dim},layers=1,heads=2,ffn={2 * dim},max_len=32"
    cmd = [sys.executable, "-c", CHILD,
           "ingest", str(src), "--store", str(store), "--model", model, "--index", index, "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT),
                                                    ENCODERSCOPE_PRECISION="fp32"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"ingest of {n} rows failed: {err[-2000:]}")
    src.unlink()
    peak_kib = int(err.rsplit("PEAK_RSS_KIB ", 1)[1].split()[0])
    return peak_kib / 1024, seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1_000, 100_000, 1_000_000])
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--index", default="flat",
                    help="the store's index (default flat, the peer's kind; auto switches to ivf "
                         "at 200k rows, whose build holds every vector once more)")
    args = ap.parse_args(argv)
    rows = sorted(args.rows)
    print(f"ingest peak RSS, {args.dim}-d tiny random encoder, --index {args.index}, one fresh "
          "process per run")
    results = []
    with tempfile.TemporaryDirectory(prefix="encoderscope-bench-") as tmp:
        for n in rows:
            mib, sec = peak_rss_of_ingest(n, args.dim, Path(tmp), args.index)
            peer = peak_rss_of_index(n, args.dim)
            results.append((n, mib, peer))
            print(f"  {n:>9,} rows: ingest peak {mib:8.1f} MiB ({sec:6.1f} s); the index alone "
                  f"(peer) {peer:8.1f} MiB; ingest beyond the index {mib - peer:7.1f} MiB",
                  flush=True)
    (n0, m0, p0), (n1, m1, p1) = results[0], results[-1]
    mib = 1024 * 1024
    per_row = (m1 - m0) * mib / max(n1 - n0, 1)
    index_row = (p1 - p0) * mib / max(n1 - n0, 1)
    beyond = ((m1 - p1) - (m0 - p0)) * mib / max(n1 - n0, 1)
    print(f"from {n0:,} to {n1:,} rows: the ingest grows {per_row:,.0f} bytes per row, the index "
          f"alone {index_row:,.0f} (ratio {per_row / max(index_row, 1):.2f}x); beyond the index "
          f"{beyond:,.0f} bytes per row ({((m1 - p1) - (m0 - p0)):+.1f} MiB in all)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
