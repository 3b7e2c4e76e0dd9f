"""Timing queries for the search benchmarks: latency one query at a time (wall clock and the
calling thread's CPU time), batched throughput, and the process's resident memory."""
from __future__ import annotations

import time

import numpy as np


def rss_mib() -> float:
    """Resident memory (Linux /proc; NaN where the OS has no such file: macOS, Windows)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def pct(a, q):
    return float(np.percentile(np.asarray(a) * 1e3, q))


def single_latencies(fn, queries, budget_s=30.0):
    """Wall-clock latency per query, and the CPU time of the calling thread (single queries
    run on it): on cores shared with other jobs the wall clock includes the waits for a core,
    the CPU time is what the query costs on an idle one."""
    fn(queries[:1])   # warm up
    t, cpu = [], []
    start = time.perf_counter()
    for i in range(len(queries)):
        if i >= 20 and time.perf_counter() - start > budget_s:
            break
        q = queries[i:i + 1]
        t0, c0 = time.perf_counter(), time.thread_time()
        fn(q)
        t.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
    return {"p50_ms": pct(t, 50), "p95_ms": pct(t, 95), "p99_ms": pct(t, 99),
            "mean_ms": float(np.mean(t) * 1e3), "cpu_p50_ms": pct(cpu, 50), "n": len(t)}


def batched_qps(fn, queries, batch, budget_s=20.0):
    fn(queries[:batch])
    t0 = time.perf_counter()
    done = nb = 0
    for s in range(0, len(queries), batch):
        fn(queries[s:s + batch])
        done += len(queries[s:s + batch])
        nb += 1
        if time.perf_counter() - t0 > budget_s:
            break
    dt = time.perf_counter() - t0
    return {"qps": done / dt, "ms_per_batch": dt / nb * 1e3, "queries": done}
