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
Timing: bench/latency.py; the store, the door and ingest: bench/search_store.py; the report:
bench/search_report.py.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import faiss  # noqa: E402

from bench.latency import batched_qps, rss_mib, single_latencies  # noqa: E402
from bench.search_report import report  # noqa: E402
from bench.search_store import bench_ingest, bench_store, door_only  # noqa: E402
from bench.vectors import clustered  # noqa: E402  (shared with bench/milvus_search.py)
from index.faiss.faiss_index import FaissIndex, resolve_kind  # noqa: E402

FAISS_DEFAULT_BLAS_THRESHOLD = 128000   # faiss-cpu 1.15's own default, restored for baselines


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
                   help="only the search through the door (index.corpus.door.search) beside the store's "
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
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            r["machine"]["cpu"] = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        r["machine"]["load_avg"] = os.getloadavg()
    except (OSError, AttributeError):     # Windows has no load average
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
