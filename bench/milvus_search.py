"""Milvus Lite and a Milvus server next to the FAISS store: ingest rate, flush, reopen,
single-query latency, recall.

    .venv/bin/python bench/milvus_search.py                 # 100k x 384, 100 Lite queries
    .venv/bin/python bench/milvus_search.py --n 20000 --queries 50 --json out.json
    .venv/bin/python bench/milvus_search.py --uri http://127.0.0.1:19530 --n 20000 --no-lite

With --uri the server store is measured too (a collection of its own, dropped afterwards), and
beside it the same searches as bare pymilvus calls on the same collection (same limit, fields
and search params, the collection's default consistency): the store's overhead as a ratio.

Both stores are driven through the same Store API (index.opening.open_store) with the same
precomputed clustered unit vectors (no model in the loop): rows are added in batches of
--batch, then saved (FAISS: index snapshot; Milvus: flush), reopened, and searched one query at
a time. Recall@10 is against the FAISS exact (flat) store. Also measured on Milvus Lite: one
search with the rows still unflushed (in its memtable) against the same search after a flush.

From bench/search.py:  from bench.milvus_search import run, markdown
                       rows = run(n=100_000, d=384, queries=100); print(markdown(rows))
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
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.vectors import clustered  # noqa: E402  (the same vectors as the FAISS benchmark)


def _pct(a, q):
    return float(np.percentile(np.asarray(a) * 1e3, q))


def _fingerprint(d):
    from core.encoder.fingerprint import Fingerprint
    return Fingerprint("bench-vectors", "b" * 64, "mean", d, True)


def _bench_store(label, location, x, q, batch, fp, log, **open_kw):
    from index.opening import open_store
    n = len(x)
    row = {"store": label, "n": n, "dim": x.shape[1]}
    t0 = time.perf_counter()
    s = open_store(location, create=True, fingerprint=fp, **open_kw)
    row["create_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        s.add([f"sentence {j}" for j in range(i, min(n, i + batch))], x[i:i + batch])
    add_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    s.save()
    row["save_s"] = time.perf_counter() - t0
    row["ingest_per_s"] = n / (add_s + row["save_s"])
    info = s.info()
    row["index"] = info["index"]
    s.close()
    log(f"  {label}: ingest {row['ingest_per_s']:,.0f}/s (add {add_s:.1f} s + save "
        f"{row['save_s']:.1f} s)")
    t0 = time.perf_counter()
    s = open_store(location, writable=False)
    s.search(q[:1], k=10)
    row["reopen_s"] = time.perf_counter() - t0
    lat, ids = [], []
    for i in range(len(q)):
        t = time.perf_counter()
        hits = s.search(q[i:i + 1], k=10)[0]
        lat.append(time.perf_counter() - t)
        ids.append([h.id for h in hits])
    row["p50_ms"], row["p99_ms"] = _pct(lat, 50), _pct(lat, 99)
    row["mean_ms"] = float(np.mean(lat) * 1e3)
    row["bytes"] = info["bytes"]
    s.close()
    log(f"  {label}: reopen + first query {row['reopen_s']:.2f} s, single query p50 "
        f"{row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms")
    return row, ids


def _unflushed(d, n, workdir, log, queries=5):
    """Milvus Lite search latency with n rows in its memtable vs after flush (raw client)."""
    from pymilvus import DataType, MilvusClient
    x = clustered(n + queries, d, seed=3)
    c = MilvusClient(str(Path(workdir) / "unflushed.db"))
    schema = MilvusClient.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=d)
    schema.add_field("text", DataType.VARCHAR, max_length=100)
    ip = c.prepare_index_params()
    ip.add_index("vector", index_type="FLAT", metric_type="COSINE")
    c.create_collection("u", schema=schema, index_params=ip)
    for i in range(0, n, 1000):
        c.insert("u", [{"id": j, "vector": x[j], "text": f"s{j}"} for j in range(i, min(n, i + 1000))])

    def timed():
        t = []
        for i in range(queries):
            t0 = time.perf_counter()
            c.search("u", data=[x[n + i]], limit=10, output_fields=["text"])
            t.append(time.perf_counter() - t0)
        return float(np.median(t) * 1e3)
    before = timed()
    t0 = time.perf_counter()
    c.flush("u")
    flush_s = time.perf_counter() - t0
    after = timed()
    c.close()
    log(f"  milvus-lite, {n:,} rows: search {before:.0f} ms unflushed, {after:.0f} ms after "
        f"flush ({flush_s:.1f} s)")
    return {"rows": n, "unflushed_ms": before, "flushed_ms": after, "flush_s": flush_s,
            "ratio": before / after if after else float("nan")}


def _bare_server_search(uri: str, collection: str, q, log) -> dict:
    """The same single searches as plain pymilvus calls on the store's collection."""
    from pymilvus import MilvusClient

    from index.milvus.schema import FIELDS
    from index.store.location import TOKEN_ENV
    c = MilvusClient(uri=uri, token=os.environ.get(TOKEN_ENV, ""))
    desc = c.describe_collection(collection)
    spec = json.loads(desc["properties"]["encoderscope.index"])
    params = {"metric_type": "COSINE", "params": dict(spec.get("search", {}))}
    if "ef" in params["params"]:
        params["params"]["ef"] = max(int(params["params"]["ef"]), 10)
    c.search(collection, data=[q[0]], limit=10, output_fields=FIELDS, search_params=params,
             anns_field="vector")
    lat = []
    for v in q:
        t = time.perf_counter()
        c.search(collection, data=[v], limit=10, output_fields=FIELDS, search_params=params,
                 anns_field="vector")
        lat.append(time.perf_counter() - t)
    version = c.get_server_version()
    c.close()
    row = {"p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
           "consistency": desc.get("consistency_level_name"), "server_version": version}
    log(f"  bare pymilvus search on the same collection ({row['consistency']}): p50 "
        f"{row['p50_ms']:.1f} ms, p99 {row['p99_ms']:.1f} ms")
    return row


def _bench_server(uri, x, q, batch, fp, log, faiss_ids) -> dict:
    import uuid

    from pymilvus import MilvusClient

    from index.store.location import TOKEN_ENV
    name = "bench_" + uuid.uuid4().hex[:8]
    try:
        row, ids = _bench_store("milvus server HNSW (MilvusStore)", f"{uri}?collection={name}",
                                x, q, batch, fp, log)
        row["recall_at_10"] = float(np.mean([len(set(a) & set(b)) / 10
                                             for a, b in zip(ids, faiss_ids)]))
        bare = _bare_server_search(uri, name, q, log)
        row["server_version"] = bare["server_version"]
        row["bare_p50_ms"], row["bare_p99_ms"] = bare["p50_ms"], bare["p99_ms"]
        row["bare_consistency"] = bare["consistency"]
        row["p50_vs_bare"] = row["p50_ms"] / bare["p50_ms"]
        log(f"  server store p50 / bare pymilvus p50: {row['p50_vs_bare']:.2f}x")
        return row
    finally:
        c = MilvusClient(uri=uri, token=os.environ.get(TOKEN_ENV, ""))
        c.drop_collection(name)
        c.close()


def run(n: int = 100_000, d: int = 384, queries: int = 100, faiss_queries: int = 500,
        batch: int = 1000, unflushed_rows: int = 20_000, workdir=None, log=print,
        uri: str | None = None, lite: bool = True) -> dict:
    """Measure both stores on the same vectors; returns {"rows": [...], "unflushed": {...},
    "machine": ...}. Safe to call from bench/search.py."""
    own = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix="milvus-bench-"))
    try:
        allx = clustered(n + max(queries, faiss_queries), d, seed=0)
        x, q = allx[:n], allx[n:]
        fp = _fingerprint(d)
        log(f"{n:,} x {d} clustered unit vectors, batches of {batch}")
        faiss_row, faiss_ids = _bench_store("faiss exact (VectorStore)", workdir / "faiss",
                                            x, q[:faiss_queries], batch, fp, log)
        faiss_row["recall_at_10"] = 1.0
        out = {"rows": [faiss_row]}
        if lite:
            lite_row, lite_ids = _bench_store("milvus-lite FLAT (MilvusStore)",
                                              f"milvus-lite:{workdir / 'lite'}", x, q[:queries],
                                              batch, fp, log)
            rec = [len(set(a) & set(b)) / 10 for a, b in zip(lite_ids, faiss_ids)]
            lite_row["recall_at_10"] = float(np.mean(rec))
            out["rows"].append(lite_row)
        if uri:
            out["rows"].append(_bench_server(uri, x, q[:queries], batch, fp, log,
                                             faiss_ids[:queries]))
        if lite and unflushed_rows:
            out["unflushed"] = _unflushed(d, min(unflushed_rows, n), workdir, log)
        out["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "platform": platform.platform()}
        try:
            import milvus_lite
            import pymilvus
            out["machine"]["pymilvus"] = pymilvus.__version__
            out["machine"]["milvus_lite"] = milvus_lite.__version__
        except Exception:
            pass
        return out
    finally:
        if own:
            shutil.rmtree(workdir, ignore_errors=True)


def markdown(result: dict) -> str:
    lines = ["| store | n × dim | index | ingest (sentences/s) | save/flush | reopen + 1st query "
             "| p50 | p99 | recall@10 | on disk |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['store']} | {r['n']:,} × {r['dim']} | {r['index']} | "
                     f"{r['ingest_per_s']:,.0f} | {r['save_s']:.1f} s | {r['reopen_s']:.2f} s | "
                     f"{r['p50_ms']:.1f} ms | {r['p99_ms']:.1f} ms | {r['recall_at_10']:.3f} | "
                     f"{r['bytes'] / 2**20:.0f} MiB |")
    for r in result["rows"]:
        if "bare_p50_ms" in r:
            lines.append("")
            lines.append(f"Milvus server {r['server_version']}: the store's single search p50 "
                         f"{r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms; bare pymilvus on the "
                         f"same collection ({r['bare_consistency']}) p50 {r['bare_p50_ms']:.1f} "
                         f"ms, p99 {r['bare_p99_ms']:.1f} ms: {r['p50_vs_bare']:.2f}× the bare "
                         "call.")
    u = result.get("unflushed")
    if u:
        lines.append("")
        lines.append(f"Milvus Lite with {u['rows']:,} rows: a search takes {u['unflushed_ms']:.0f} "
                     f"ms while they are unflushed, {u['flushed_ms']:.0f} ms after `flush` "
                     f"({u['ratio']:.0f}×; the flush took {u['flush_s']:.1f} s).")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--queries", type=int, default=100, help="single queries on Milvus Lite")
    ap.add_argument("--faiss-queries", type=int, default=500)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--unflushed-rows", type=int, default=20_000)
    ap.add_argument("--uri", help="a Milvus server (http://HOST:PORT) to measure too; token "
                                  "from $ENCODERSCOPE_MILVUS_TOKEN")
    ap.add_argument("--no-lite", action="store_true", help="leave Milvus Lite out")
    ap.add_argument("--json", help="write the raw numbers here")
    args = ap.parse_args(argv)
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    res = run(args.n, args.dim, args.queries, args.faiss_queries, args.batch,
              args.unflushed_rows, log=log, uri=args.uri, lite=not args.no_lite)
    print(markdown(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
