"""Search benchmark for the vector store (index/).

    .venv/bin/python bench/search.py            # --quick: 100k x 768
    .venv/bin/python bench/search.py --full     # 1M x 768 (about 10 GiB of RAM at peak)

Vectors: unit vectors with cluster structure like sentence embeddings (topics -> clusters of
Zipf-distributed sizes -> points; top-1 cosine ~0.8, random pairs ~0.07); queries are held-out
points of the same distribution. Pure Gaussian vectors are HNSW's worst case and are not used.

Measures, for exact (flat), HNSW and SQ8: build time, memory, single-query p50/p99 latency,
batched throughput and recall@10 against exact search; the baseline is numpy brute force
(matrix product + argpartition) measured in the same run. Also: FAISS's
distance_compute_blas_threshold and thread count for single and batched queries, the store end
to end (SQLite + snapshot + reopen), and ingest throughput with minilm on real sentences (share
of the time not spent in the model). Prints a Markdown report; --json writes the raw numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import faiss  # noqa: E402

from bench.vectors import clustered  # noqa: E402  (shared with bench/milvus_search.py)
from index.faiss.faiss_index import FaissIndex, resolve_kind  # noqa: E402

FAISS_DEFAULT_BLAS_THRESHOLD = 128000   # faiss-cpu 1.15's own default, restored for baselines


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
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


def recall_at(I, gt, k=10):
    return float(np.mean([len(set(a[:k]) & set(b[:k])) / k for a, b in zip(I, gt)]))


def numpy_search(x, q, k=10):
    s = q @ x.T
    part = np.argpartition(-s, k, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(s, part, 1), axis=1)
    return np.take_along_axis(part, order, 1)


class Settings:
    def __init__(self, blas=None, threads=None):
        self.blas, self.threads = blas, threads

    def __enter__(self):
        self.old = (faiss.cvar.distance_compute_blas_threshold, faiss.omp_get_max_threads())
        if self.blas is not None:
            faiss.cvar.distance_compute_blas_threshold = self.blas
        if self.threads is not None:
            faiss.omp_set_num_threads(self.threads)

    def __exit__(self, *a):
        faiss.cvar.distance_compute_blas_threshold = self.old[0]
        faiss.omp_set_num_threads(self.old[1])


def bench_index(kind, x, q, gt, params, args, log):
    ids = np.arange(len(x), dtype=np.int64)
    r0 = rss_mib()
    t0 = time.perf_counter()
    fi = FaissIndex.build(kind, x.shape[1], params, ids, x)
    build = time.perf_counter() - t0
    mem = rss_mib() - r0
    res = {"kind": kind, "params": {k: v for k, v in fi.params.items()}, "build_s": build,
           "memory_mib": mem, "load_avg": os.getloadavg(), "structure": fi.describe()}
    log(f"  {kind}: built in {build:.1f} s, +{mem:.0f} MiB (load {os.getloadavg()[0]:.1f})")
    if args.rule_only:
        _, I = fi.search(q, 10)
        res["recall@10"] = recall_at(I, gt)
        res["single"] = {"store_policy": single_latencies(lambda qq: fi.search(qq, 10), q[:args.single])}
        res["batched"] = {}
        if kind == "ivf":
            res["nprobe_sweep"] = ivf_sweep(fi, q, gt, args)
        log(f"  {kind}: recall@10 {res['recall@10']:.4f}, p50 {res['single']['store_policy']['p50_ms']:.2f} ms")
        return res
    # Settings rows call FAISS directly (FaissIndex.search applies the store's own thread
    # policy); the "store policy" row goes through FaissIndex.search.
    search = lambda qq: fi.index.search(qq, 10)  # noqa: E731
    _, I = fi.search(q, 10)
    res["recall@10"] = recall_at(I, gt)
    nthreads = faiss.omp_get_max_threads()
    qs = q[:args.single]
    res["single"] = {}
    for blas in ((FAISS_DEFAULT_BLAS_THRESHOLD, 1) if kind != "hnsw" else (FAISS_DEFAULT_BLAS_THRESHOLD,)):
        for th in sorted({1, nthreads}):
            with Settings(blas, th):
                res["single"][f"blas{blas}_t{th}"] = single_latencies(search, qs)
    res["single"]["store_policy"] = single_latencies(lambda qq: fi.search(qq, 10), qs)
    res["batched"] = {}
    for batch in args.batches:
        for blas in ((FAISS_DEFAULT_BLAS_THRESHOLD, 4) if kind != "hnsw" else (FAISS_DEFAULT_BLAS_THRESHOLD,)):
            for th in sorted({1, nthreads}):
                with Settings(blas, th):
                    res["batched"][f"b{batch}_blas{blas}_t{th}"] = batched_qps(search, q, batch)
    if kind == "hnsw":
        sweep = {}
        default_ef = fi.params["ef_search"]
        for ef in (16, 32, 64, 128, 256, 512, 1024):
            fi.params["ef_search"] = ef          # FaissIndex.search applies it
            _, I = fi.search(q, 10)
            lat = single_latencies(lambda qq: fi.search(qq, 10), qs)
            sweep[ef] = {"recall@10": recall_at(I, gt), **lat}
        fi.params["ef_search"] = default_ef
        fi.search(q[:1], 10)
        res["ef_search_sweep"] = sweep
    if kind == "ivf":
        res["nprobe_sweep"] = ivf_sweep(fi, q, gt, args)
    log(f"  {kind}: recall@10 {res['recall@10']:.4f}")
    fi = None      # frees the index (the timing lambdas hold the variable, not the object)
    return res


def ivf_sweep(fi, q, gt, args):
    """recall@10 and single-query latency of the ivf index for other nprobe / k_factor."""
    sweep = {}
    default = dict(fi.params)
    nlist, chosen, kf = fi.nlist(), fi.nprobe(), fi.k_factor()
    for nprobe in sorted({max(1, chosen // 2), chosen, min(nlist, chosen * 2)}):
        for k_factor in ((kf / 2, kf, kf * 2) if nprobe == chosen else (kf,)):
            fi.params.update(nprobe=nprobe, k_factor=k_factor)   # FaissIndex.search applies them
            _, I = fi.search(q, 10)
            lat = single_latencies(lambda qq: fi.search(qq, 10), q[:args.single], budget_s=10)
            sweep[f"{nprobe}/{k_factor:g}"] = {"recall@10": recall_at(I, gt), **lat}
    fi.params.clear()
    fi.params.update(default)
    return sweep


def bench_factory(spec, x, q, gt, args, log):
    """A FAISS index_factory candidate the store does not use, for comparison: trained on the
    same 32k sample as ivf, compressed codes re-ranked by IndexRefineFlat, a probe sweep."""
    from index.faiss.faiss_index import IVF_TRAIN_SAMPLE
    n, d = x.shape
    r0 = rss_mib()
    t0 = time.perf_counter()
    base = faiss.index_factory(d, spec, faiss.METRIC_INNER_PRODUCT)
    if "HNSW" in spec and "IVF" not in spec:
        faiss.downcast_index(base).hnsw.efConstruction = args.factory_ef_construction
    try:
        ivf = faiss.extract_index_ivf(base)
        ivf.cp.niter, ivf.cp.min_points_per_centroid = 10, 1
    except RuntimeError:
        ivf = None
    refined = any(code in spec for code in ("PQ", "SQ"))
    index = faiss.IndexRefineFlat(base) if refined else base
    pick = np.sort(np.random.default_rng(0).choice(n, min(n, IVF_TRAIN_SAMPLE), replace=False))
    index.train(x[pick])
    for s in range(0, n, 50_000):
        index.add(x[s:s + 50_000])
    build = time.perf_counter() - t0
    res = {"kind": f"factory {spec}" + (" + RefineFlat" if refined else ""), "build_s": build,
           "memory_mib": rss_mib() - r0, "load_avg": os.getloadavg(), "sweep": {}}
    log(f"  {spec}: built in {build:.1f} s (load {os.getloadavg()[0]:.1f})")
    settings = ([("nprobe", v) for v in (16, 32, 64, 128)] if ivf is not None
                else [("efSearch", v) for v in (128, 256, 512)])
    with Settings(threads=1):
        for name, value in settings:
            p = faiss.SearchParametersIVF() if ivf is not None else faiss.SearchParametersHNSW()
            setattr(p, name, value)
            if refined:
                outer = faiss.IndexRefineSearchParameters()
                outer.k_factor, outer.base_index_params = 4.0, p
                p = outer
            _, I = index.search(q, 10, params=p)
            lat = single_latencies(lambda qq: index.search(qq, 10, params=p), q[:args.single], budget_s=10)
            res["sweep"][f"{name} {value}"] = {"recall@10": recall_at(I, gt), **lat}
            log(f"    {name} {value}: recall {res['sweep'][f'{name} {value}']['recall@10']:.4f}, "
                f"p50 {lat['p50_ms']:.2f} ms")
    return res


def bench_store(x, q, args, log):
    """The store end to end: SQLite inserts + FAISS add, snapshot, reopen, search via the store."""
    from core.encoder.fingerprint import Fingerprint
    from index.faiss.store import VectorStore
    n, d = x.shape
    folder = Path(tempfile.mkdtemp(prefix="es-bench-", dir=args.tmp))
    fp = Fingerprint("bench", "0" * 64, "mean", d, True)
    out = {"n": n}
    try:
        t0 = time.perf_counter()
        s = VectorStore.open(folder / "s", writable=True, create=True, fingerprint=fp, index="flat")
        texts = [f"synthetic sentence number {i}" for i in range(n)]
        for a in range(0, n, 10_000):
            s.add(texts[a:a + 10_000], x[a:a + 10_000])
        out["add_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        s.save()
        out["save_s"] = time.perf_counter() - t0
        s.close()
        out["bytes_on_disk"] = sum(p.stat().st_size for p in (folder / "s").iterdir())
        t0 = time.perf_counter()
        s = VectorStore.open(folder / "s")
        out["open_s"] = time.perf_counter() - t0
        lat = single_latencies(lambda qq: s.search(qq[0], k=10), q[:args.single])
        out["search_single"] = lat
        s.close()
        log(f"  store: add {out['add_s']:.1f} s, save {out['save_s']:.1f} s, open "
            f"{out['open_s']:.1f} s, search p50 {lat['p50_ms']:.2f} ms")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def bench_door(x, q, args, log, index="flat"):
    """One query as a user searches it, through the door the CLI and the app call
    (index.corpus.search: model check, search, texts), beside the store's own search
    (VectorStore.search on a vector) and its FAISS index alone, timed in interleaved rounds on
    the same store. The query's "embedding" is a lookup of its held-out vector, so the model's
    time (measured by bench_ingest) does not hide what the door adds."""
    from core.encoder.fingerprint import Fingerprint
    from index import corpus
    from index.faiss.store import VectorStore
    n, d = x.shape
    folder = Path(tempfile.mkdtemp(prefix="es-door-", dir=args.tmp))
    fp = Fingerprint("bench", "0" * 64, "mean", d, True)
    texts = [f"query number {i}" for i in range(len(q))]
    vectors = dict(zip(texts, q))

    class Lookup:
        model_name = "bench"

        def fingerprint(self, pooling="mean"):
            return fp

        def embed(self, batch, pooling="mean", **kw):
            return np.stack([vectors[t] for t in batch])

    out = {"n": n, "kind": index}
    try:
        s = VectorStore.open(folder / "s", writable=True, create=True, fingerprint=fp, index=index)
        for a in range(0, n, 10_000):
            s.add([f"synthetic sentence number {i}" for i in range(a, min(n, a + 10_000))], x[a:a + 10_000])
        s.close()
        s = VectorStore.open(folder / "s")
        backend, ids = Lookup(), np.arange(min(args.single, len(q)))
        ways = {"index": lambda ii: s._index.search(q[ii], 10),
                "count": lambda ii: s.count(),        # one SELECT COUNT(*): what a search no longer runs
                "store": lambda ii: s.search(q[ii[0]], 10, fingerprint=fp),
                "door": lambda ii: corpus.search(s, texts[ii[0]], 10, backend)}
        rounds = {k: [] for k in ways}
        for _ in range(3):      # interleaved, so a busy spell of the shared cores hits all three
            for name, fn in ways.items():
                rounds[name].append(single_latencies(fn, ids, budget_s=20))
        for name, runs in rounds.items():
            out[name] = {"p50_ms": float(np.median([r["p50_ms"] for r in runs])),
                         "cpu_p50_ms": float(np.median([r["cpu_p50_ms"] for r in runs]))}
        out["door_over_store"] = out["door"]["p50_ms"] / out["store"]["p50_ms"]
        out["door_over_index"] = out["door"]["p50_ms"] / out["index"]["p50_ms"]
        s.close()
        log(f"  door {n:,} ({index}): index p50 {out['index']['p50_ms']:.2f} ms, store "
            f"{out['store']['p50_ms']:.2f} ms, door {out['door']['p50_ms']:.2f} ms, one COUNT(*) "
            f"{out['count']['p50_ms']:.2f} ms "
            f"(door/store {out['door_over_store']:.2f}x, door/index {out['door_over_index']:.2f}x)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return out


def bench_ingest(args, log):
    """minilm on real sentences through VectorStore.add_stream, committed 256 at a time (the
    CLI's default) and 64 (the app's): rate against one plain embed() call of the same texts
    (the peer, same process), and the share of the time spent outside the model."""
    from app.gui.corpus_service import CHUNK as APP_CHUNK
    from core.encoder.backends import get_backend
    from index.base import ADD_BATCH
    from index.faiss.store import VectorStore
    texts = []
    for name in args.ingest_files:
        for line in (ROOT / name).read_text(encoding="utf-8").splitlines():
            for part in line.split("\t"):
                part = part.strip()
                if part and not part.lower().startswith(("sentence", "query", "text\t")):
                    texts.append(part)
    texts = list(dict.fromkeys(texts))[:args.ingest_max]
    b = get_backend("minilm")

    class Timed:
        def __init__(self, inner):
            self.inner, self.model_s = inner, 0.0
            self.model_name = inner.model_name

        def fingerprint(self, pooling="mean"):
            return self.inner.fingerprint(pooling=pooling)

        def embed(self, *a, **kw):
            t0 = time.perf_counter()
            try:
                return self.inner.embed(*a, **kw)
            finally:
                self.model_s += time.perf_counter() - t0

    def ingest(commit):
        folder = Path(tempfile.mkdtemp(prefix="es-ingest-", dir=args.tmp))
        try:
            tb = Timed(b)
            t0 = time.perf_counter()
            s = VectorStore.open(folder / "s", writable=True, create=True, fingerprint=b.fingerprint())
            s.add_stream(((t, {"source": "bench", "row": i}) for i, t in enumerate(texts)), tb,
                         batch_size=commit)
            s.close()
            return time.perf_counter() - t0, tb.model_s
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    b.embed(texts[:64])   # warm up
    best = {"model_only": float("inf"), ADD_BATCH: (float("inf"), 0), APP_CHUNK: (float("inf"), 0)}
    for _ in range(3):    # alternating rounds, best of each: the machine drifts
        t0 = time.perf_counter()
        b.embed(texts)
        best["model_only"] = min(best["model_only"], time.perf_counter() - t0)
        for commit in (ADD_BATCH, APP_CHUNK):
            best[commit] = min(best[commit], ingest(commit))
    total, model_s = best[ADD_BATCH]
    out = {"sentences": len(texts), "total_s": total, "model_s": model_s,
           "model_only_s": best["model_only"], "sentences_per_s": len(texts) / total,
           "non_model_share": (total - model_s) / total, "device": b.device_name,
           "app_chunk": APP_CHUNK, "app_total_s": best[APP_CHUNK][0],
           "vs_embed": best["model_only"] / total, "app_vs_embed": best["model_only"] / best[APP_CHUNK][0]}
    log(f"  ingest: {len(texts)} sentences in {total:.1f} s ({out['sentences_per_s']:.0f}/s, "
        f"{out['vs_embed']:.2f}x one embed() call), committed {APP_CHUNK} at a time "
        f"{out['app_vs_embed']:.2f}x; non-model share {out['non_model_share']:.1%}")
    return out


def report(r) -> str:
    L = []
    m = r["machine"]
    L.append(f"### {r['n']:,} x {r['dim']} ({r['mode']})\n")
    L.append(f"Machine: {m['cpu']}, {m['cores']} cores visible (shared), faiss {m['faiss']}, "
             f"numpy {m['numpy']}, FAISS threads {m['faiss_threads']}. Command: `{r['command']}`. "
             f"{len(r['queries_note'])and r['queries_note']}\n")
    L.append(f"Data generated in {r['gen_s']:.1f} s; ground truth by exact FAISS search "
             f"(checked equal to numpy on {r['gt_checked']} queries: {r['gt_agree']:.4f} agreement).\n")
    b = r["baseline"]
    L.append("| method | build s | memory MiB | recall@10 | single p50 ms | single p95 ms | "
             f"batched qps (b={r['main_batch']}) | vs numpy single | vs numpy batched | load (1 min) |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    L.append(f"| numpy brute force (baseline) | - | {b['memory_mib']:.0f} | 1.0000 | "
             f"{b['single']['p50_ms']:.2f} | {b['single']['p95_ms']:.2f} | {b['batched']['qps']:.0f} | 1.00x | 1.00x | "
             f"{b.get('load_avg', [float('nan')])[0]:.1f} |")
    for res in r["indexes"]:
        best_single = min(res["single"].values(), key=lambda s: s["p50_ms"])
        bq = max([v["qps"] for k, v in res["batched"].items() if k.startswith(f"b{r['main_batch']}_")],
                 default=float("nan"))
        L.append(f"| {res.get('label', res['kind'])} {res['params'] or ''} | {res['build_s']:.1f} | "
                 f"{res['memory_mib']:.0f} | "
                 f"{res['recall@10']:.4f} | {best_single['p50_ms']:.2f} | {best_single['p95_ms']:.2f} | "
                 f"{bq:.0f} | {b['single']['p50_ms'] / best_single['p50_ms']:.2f}x | "
                 f"{bq / b['batched']['qps']:.2f}x | {res['load_avg'][0]:.1f} |")
    L.append("")
    for res in r["indexes"]:
        own = res["single"].get("store_policy", {})
        L.append(f"- {res.get('label', res['kind'])}: {res.get('structure', '')}; single query "
                 f"through FaissIndex.search: p50 {own.get('p50_ms', float('nan')):.2f} ms wall, "
                 f"{own.get('cpu_p50_ms', float('nan')):.2f} ms CPU")
    L.append("")
    for res in r["indexes"]:
        if "nprobe_sweep" in res:
            L.append(f"ivf nprobe / k_factor sweep (single query, {res['params']}):\n")
            L.append("| nprobe / k_factor | recall@10 | p50 ms | p95 ms | CPU p50 ms |")
            L.append("|---|---|---|---|---|")
            for key, v in res["nprobe_sweep"].items():
                L.append(f"| {key} | {v['recall@10']:.4f} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} | "
                         f"{v['cpu_p50_ms']:.2f} |")
            L.append("")
    L.append("Settings (single: p50/p99 ms per query; batched: queries/s):\n")
    L.append("| method | setting | result |")
    L.append("|---|---|---|")
    for res in r["indexes"]:
        for k, v in res["single"].items():
            if k == "store_policy":
                L.append(f"| {res['kind']} | single, the store's policy (FaissIndex.search) | "
                         f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f} ms |")
                continue
            bl, th = k.split("_")
            L.append(f"| {res['kind']} | single, blas_threshold={bl[4:]}, threads={th[1:]} | "
                     f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f} ms |")
        for k, v in res["batched"].items():
            bs, bl, th = k.split("_")
            L.append(f"| {res['kind']} | batch {bs[1:]}, blas_threshold={bl[4:]}, threads={th[1:]} | "
                     f"{v['qps']:.0f} q/s |")
    for res in r.get("factory", []):
        L.append(f"\n{res['kind']}: built in {res['build_s']:.1f} s, +{res['memory_mib']:.0f} MiB, "
                 f"load {res['load_avg'][0]:.1f} (single queries, one thread, k_factor 4):\n")
        L.append("| setting | recall@10 | p50 ms | p95 ms |")
        L.append("|---|---|---|---|")
        for key, v in res["sweep"].items():
            L.append(f"| {key} | {v['recall@10']:.4f} | {v['p50_ms']:.2f} | {v['p95_ms']:.2f} |")
    hn = [res for res in r["indexes"] if res["kind"] == "hnsw"]
    if hn:
        L.append("\nHNSW efSearch sweep (single query):\n")
        L.append("| efSearch | recall@10 | p50 ms | p99 ms |")
        L.append("|---|---|---|---|")
        for ef, v in hn[0]["ef_search_sweep"].items():
            L.append(f"| {ef} | {v['recall@10']:.4f} | {v['p50_ms']:.2f} | {v['p99_ms']:.2f} |")
    if r.get("store"):
        s = r["store"]
        L.append(f"\nStore end to end ({s['n']:,} vectors, flat): add (SQLite + FAISS) {s['add_s']:.1f} s, "
                 f"save snapshot {s['save_s']:.1f} s, reopen (checksum + quick_check + load) "
                 f"{s['open_s']:.1f} s, {s['bytes_on_disk'] / 2**20:.0f} MiB on disk, search through the "
                 f"store p50 {s['search_single']['p50_ms']:.2f} ms / p99 {s['search_single']['p99_ms']:.2f} ms.")
    if r.get("ingest"):
        g = r["ingest"]
        L.append(f"\nIngest with minilm ({g['device']}): {g['sentences']} real sentences in "
                 f"{g['total_s']:.2f} s = {g['sentences_per_s']:.0f} sentences/s; time in the model "
                 f"{g['model_s']:.2f} s (one plain embed() call of all of them: {g['model_only_s']:.2f} s); "
                 f"share not spent in the model: **{g['non_model_share']:.1%}**. Against that one "
                 f"embed() call: committed 256 at a time **{g['vs_embed']:.2f}x** its rate, "
                 f"{g['app_chunk']} at a time (the app) **{g['app_vs_embed']:.2f}x**.")
    return "\n".join(L) + "\n"


def door_only(args) -> int:
    """--door: the search a user runs, at each size, as Markdown rows (and --json)."""
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for n in args.door or [100_000, 1_000_000]:
        log(f"generating {n:,} x {args.dim} clustered vectors ...")
        allx = clustered(n + args.queries, args.dim)
        rows.append(bench_door(allx[:n], np.ascontiguousarray(allx[n:]), args, log, index=args.door_index))
        allx = None
    print("| vectors | index alone p50 | Store.search p50 | corpus.search (the door) p50 | door / store "
          "| door / index | one COUNT(*) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['n']:,} x {args.dim} ({r['kind']}) | {r['index']['p50_ms']:.2f} ms | "
              f"{r['store']['p50_ms']:.2f} ms | {r['door']['p50_ms']:.2f} ms | {r['door_over_store']:.2f}x "
              f"| {r['door_over_index']:.2f}x | {r['count']['p50_ms']:.2f} ms |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="100k vectors (default)")
    g.add_argument("--full", action="store_true", help="1M vectors")
    p.add_argument("--n", type=int, help="override the number of vectors")
    p.add_argument("--dim", type=int, default=768)
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--single", type=int, default=200, help="queries timed one at a time")
    p.add_argument("--batches", type=int, nargs="+", default=[16, 256])
    p.add_argument("--kinds", default="flat,hnsw,sq8,ivf",
                   help="comma-separated FaissIndex kinds; 'rule' = what the store's auto rule "
                        "picks for this many vectors")
    p.add_argument("--factory", default="",
                   help="';'-separated faiss.index_factory strings to compare (PQ/SQ codes get "
                        "an exact re-rank), e.g. 'IVF2048_HNSW32,Flat;OPQ48,IVF2048_HNSW32,PQ48'")
    p.add_argument("--factory-ef-construction", type=int, default=40,
                   help="efConstruction of plain HNSW factory candidates")
    p.add_argument("--rule-only", action="store_true",
                   help="per kind: build, recall, single-query latency (and ivf's sweep) only")
    p.add_argument("--no-store", action="store_true")
    p.add_argument("--door-index", default="auto",
                   help="with --door: the store's index kind (default auto: flat at 100k, IVF at 1M)")
    p.add_argument("--door", type=int, nargs="*", metavar="N",
                   help="only the search through the door (index.corpus.search) beside the store's "
                        "and the index's own, at these sizes (default 100000 1000000), dim --dim")
    p.add_argument("--no-ingest", action="store_true")
    p.add_argument("--ingest-files", nargs="+", default=["assets/sample_corpus.txt",
                                                         "assets/paraphrase_pairs.tsv",
                                                         "assets/near_misses.tsv",
                                                         "assets/search_examples.tsv"])
    p.add_argument("--ingest-max", type=int, default=2000)
    p.add_argument("--no-milvus", action="store_true",
                   help="skip the Milvus Lite rows (run when the [milvus] extra is installed)")
    p.add_argument("--milvus-n", type=int, default=100_000,
                   help="vectors for the Milvus Lite vs FAISS store rows (default 100k, dim 384)")
    p.add_argument("--tmp", default=None, help="folder for temporary stores")
    p.add_argument("--json", help="write raw results here")
    p.add_argument("--md", help="append the Markdown report here")
    args = p.parse_args(argv)
    if args.door is not None:
        return door_only(args)
    n = args.n or (1_000_000 if args.full else 100_000)
    mode = "full" if args.full else "quick"
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731

    r = {"n": n, "dim": args.dim, "mode": mode, "command": "python bench/search.py " + " ".join(argv or sys.argv[1:]),
         "main_batch": max(args.batches),
         "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                     "faiss": faiss.__version__, "numpy": np.__version__,
                     "faiss_threads": faiss.omp_get_max_threads()}}
    try:
        with open("/proc/cpuinfo") as f:
            r["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        r["machine"]["load_avg"] = os.getloadavg()
    except OSError:
        pass
    r["queries_note"] = f"{args.queries} held-out queries, {args.single} timed one by one."
    log(f"generating {n:,} x {args.dim} clustered vectors ...")
    t0 = time.perf_counter()
    allx = clustered(n + args.queries, args.dim)
    x, q = allx[:n], np.ascontiguousarray(allx[n:])
    r["gen_s"] = time.perf_counter() - t0

    # Baseline: numpy brute force.
    log("numpy baseline ...")
    base = {"memory_mib": x.nbytes / 2**20}
    base["single"] = single_latencies(lambda qq: numpy_search(x, qq), q[:args.single])
    base["batched"] = batched_qps(lambda qq: numpy_search(x, qq), q, max(args.batches))
    base["load_avg"] = os.getloadavg()
    r["baseline"] = base

    # Ground truth: exact FAISS (BLAS), checked against numpy.
    exact = faiss.IndexFlatIP(args.dim)
    exact.add(x)
    with Settings(blas=1):
        _, gt = exact.search(q, 10)
    del exact
    chk = min(100, len(q))
    npi = numpy_search(x, q[:chk])
    r["gt_checked"], r["gt_agree"] = chk, recall_at(npi, gt[:chk])

    r["indexes"] = []
    for kind in args.kinds.split(","):
        label = kind
        if kind == "rule":
            kind = resolve_kind("auto", n)
            label = f"auto rule -> {kind}"
            log(f"the auto rule picks {kind} for {n:,} vectors")
        log(f"{kind} ...")
        r["indexes"].append({**bench_index(kind, x, q, gt, {}, args, log), "label": label})
    r["factory"] = []
    for spec in filter(None, args.factory.split(";")):
        log(f"{spec} ...")
        r["factory"].append(bench_factory(spec, x, q, gt, args, log))
    if not args.no_store:
        log("store end to end ...")
        m = min(n, 100_000)
        r["store"] = bench_store(x[:m], q, args, log)
    allx = x = None  # frees the vectors before the next size
    if not args.no_ingest:
        log("ingest with minilm ...")
        r["ingest"] = bench_ingest(args, log)
    milvus_md = ""
    if not args.no_milvus:
        try:
            import milvus_lite  # noqa: F401
        except ImportError:
            log("Milvus Lite rows skipped: pip install -e '.[milvus]'")
        else:
            from bench.milvus_search import markdown as milvus_markdown
            from bench.milvus_search import run as milvus_run
            log("Milvus Lite next to the FAISS store ...")
            r["milvus"] = milvus_run(n=args.milvus_n, d=384, workdir=None, log=log)
            milvus_md = ("\n\n### Milvus Lite next to the FAISS store (same Store API, "
                         f"{args.milvus_n:,} × 384)\n\n" + milvus_markdown(r["milvus"]))
    r["machine"]["load_avg_end"] = os.getloadavg()
    md = report(r) + milvus_md
    print(md)
    if args.md:
        with open(args.md, "a") as f:
            f.write(md + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(r, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
