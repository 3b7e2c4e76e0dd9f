"""The search benchmark's Markdown report (bench/search.py): the index table against numpy,
the settings and sweeps, the store end to end and ingest."""
from __future__ import annotations


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
