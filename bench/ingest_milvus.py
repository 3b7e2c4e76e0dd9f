"""Ingest into Milvus Lite and a Milvus server next to the FAISS store, in one run: the store path
with a null encoder (and optionally a simulated one), as sentences/s and as a ratio to FAISS.

    python bench/ingest_milvus.py --n 20000                              # FAISS and Milvus Lite
    python bench/ingest_milvus.py --n 20000 --uri http://127.0.0.1:19530 # and a server
    python bench/ingest_milvus.py --n 20000 --before /tmp/old-tree       # and another tree's code

A local server for it: python tests/support/milvus_server.py FOLDER (Milvus 2.3 from PyPI's
`milvus` package, loopback only; it prints its address).

Each row is add_stream of --n distinct mixed sentences (bench/ingest_host.py's) into a new store
(FAISS: flat; Lite: a new folder; server: a new collection, dropped afterwards), then save()
(FAISS: its snapshot; Milvus: the flush), start-up outside the clock. Rows run in turn, --rounds
times, each the best of its rounds; "/ faiss" divides by the FAISS row of the same tree.
--before TREE runs the same rows on TREE's code, both trees in child processes taking turns,
and prints new / before per row.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path


def _tree_from_argv() -> Path:
    argv = sys.argv
    if "--tree" in argv[:-1]:
        return Path(argv[argv.index("--tree") + 1]).resolve()
    return Path(__file__).resolve().parents[1]


if __name__ == "__main__":
    sys.path.insert(0, str(_tree_from_argv()))
    sys.path.insert(0, str(_tree_from_argv() / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")


def ingest(encoder, texts, engine: str, uri: str | None = None) -> float:
    """Sentences/s of add_stream(texts) into a new store of `engine`, then save()."""
    from index.opening import open_store
    folder = Path(tempfile.mkdtemp(prefix="encoderscope-ingest-milvus-"))
    collection = f"bench_ingest_{uuid.uuid4().hex[:12]}"
    location = {"faiss": str(folder / "store"), "lite": f"milvus-lite:{folder / 'store'}",
                "server": f"{uri}?collection={collection}"}[engine]
    try:
        store = open_store(location, writable=True, create=True, fingerprint=encoder.fingerprint())
        try:
            t = time.perf_counter()
            result = store.add_stream(texts, encoder)
            store.save()
            seconds = time.perf_counter() - t
        finally:
            store.close()
        if result.added != len(texts):
            raise RuntimeError(f"{engine}: stored {result.added} of {len(texts)} sentences")
        return len(texts) / seconds
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if engine == "server":
            from pymilvus import MilvusClient
            client = MilvusClient(uri=uri)
            for name in (collection, collection + "__writer"):
                if client.has_collection(name):
                    client.drop_collection(name)
            client.close()


def measure(n: int, rounds: int, uri: str | None, rate: int) -> dict:
    from ingest_host import NullEncoder, SimulatedEncoder, cpu_name, load_average, mixed_unique

    from core.encoder.backends import get_backend
    real = get_backend("minilm", "scratch", device="cpu", precision="fp32")
    texts = mixed_unique(n)
    real.model_tokenizer.encode(texts[:256])       # warm-up
    engines = ["faiss", "lite"] + (["server"] if uri else [])
    encoders = {"null": NullEncoder(real)}
    if rate:
        encoders[f"simulated {rate:,}/s"] = SimulatedEncoder(real, rate)
    out = {"n": n, "cpu": cpu_name(), "cores": os.cpu_count(), "load": [load_average()], "rows": {}}
    for _ in range(rounds):
        for enc_name, enc in encoders.items():
            for engine in engines:
                key = f"{engine}|{enc_name}"
                out["rows"][key] = max(out["rows"].get(key, 0.0), ingest(enc, texts, engine, uri))
        out["load"].append(load_average())
    return out


def report(r: dict, before: dict | None = None) -> str:
    loads = [float(x) for x in r["load"] + (before or {}).get("load", []) if x != "?"]
    lines = [f"{r['n']:,} mixed sentences, minilm's identity, {r['cpu']} ({r['cores']} cores), "
             f"load {min(loads):.1f}-{max(loads):.1f}" if loads else ""]
    for key, got in r["rows"].items():
        engine, enc = key.split("|")
        faiss = r["rows"][f"faiss|{enc}"]
        line = f"  {engine:<7} {enc:<20} {got:>9,.0f} s/s   / faiss {got / faiss:5.3f}"
        old = (before or {}).get("rows", {}).get(key)
        if old:
            line += f"   before {old:>9,.0f} s/s   new / before {got / old:5.2f}"
        lines.append(line)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--uri", default=None, help="a Milvus server (http://HOST:PORT): its rows too")
    ap.add_argument("--rate", type=int, default=0, help="also a simulated encoder of this many sentences/s")
    ap.add_argument("--before", default=None, help="another tree: the same rows on its code, same run")
    ap.add_argument("--tree", default=None, help="measure this tree's code (what --before runs)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.before:
        r, before = measure(args.n, args.rounds, args.uri, args.rate), None
    else:
        runs = {"new": [], "before": []}
        for _ in range(max(1, args.rounds)):
            for name, tree in (("new", str(_tree_from_argv())), ("before", args.before)):
                cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", tree, "--json",
                       "--n", str(args.n), "--rounds", "1", "--rate", str(args.rate)]
                cmd += ["--uri", args.uri] if args.uri else []
                child = subprocess.run(cmd, capture_output=True, text=True, check=True)
                runs[name].append(json.loads(child.stdout.strip().splitlines()[-1]))
        r, before = ({**runs[k][0], "load": [x for run in runs[k] for x in run["load"]],
                      "rows": {key: max(run["rows"][key] for run in runs[k]) for key in runs[k][0]["rows"]}}
                     for k in ("new", "before"))
    print(json.dumps({**r, "before": before}) if args.json else report(r, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
