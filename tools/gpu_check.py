"""One command that proves the GPU path: `make gpu-check` (or `python -m tools.gpu_check`).

Needs only what a CUDA box or a cloud notebook has (torch, transformers, tokenizers, safetensors,
numpy, plus faiss-cpu, platformdirs and the packaged minilm: docs/gpu.md); pytest for the tests;
sentence-transformers is measured when installed. No Qt, no Milvus. In one run, on one device:

1. embedding throughput on the same weights (minilm) and the same device: ours, transformers and
   sentence-transformers, fp32 and bf16, at batch 64 and at the device's best batch;
2. `ingest` sentences/s against our own embed sentences/s (the store's share of the cost), and
   the host path's own rows beside it (bench/ingest_host.py): a null encoder's ingest, tokenising alone;
3. training tokens/s against the same model built from nn.TransformerEncoderLayer;
4. the ``needs_cuda`` tests and the Qt-free suite with $ENCODERSCOPE_DEVICE set to the device
   (test files that need a module this Python lacks are left out, and named), cut off after
   ``--tests-budget`` seconds so that the whole fits a GPU session's few minutes.

It prints ONE markdown table with the device and the versions. `--device cpu` is the dry run;
`--quick --no-tests` is the short form the suite runs (tests/tools/test_gpu_check.py).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata as metadata
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

from core.device import bf16_native, bf16_refusal, describe_device, pick_device  # noqa: E402
from core.encoder.backends import get_backend  # noqa: E402

# bench/ is not a package: its scripts' measuring functions are shared, not copied
enc_bench = importlib.import_module("encoder_throughput")
train_bench = importlib.import_module("train_throughput")
ingest_bench = importlib.import_module("ingest_throughput")
ingest_host = importlib.import_module("ingest_host")

VERSIONED = ("torch", "transformers", "tokenizers", "safetensors", "numpy", "faiss-cpu", "sentence-transformers")
# Test files that need the desktop app, a Milvus server or UMAP are found by trying to import them
# (below); these are never run here whatever is installed: they start servers or take minutes.
NEVER = ("index.milvus.test_server", "index.milvus.test_server_faults", "index.milvus.test_reliability",
         "tools.test_gpu_check")


def versions() -> str:
    out = []
    for name in VERSIONED:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            if name == "faiss-cpu":
                try:
                    import faiss
                    out.append(f"faiss {faiss.__version__}")
                except ImportError:
                    out.append("faiss missing")
    cuda = f", CUDA {torch.version.cuda}" if torch.version.cuda else ""
    return f"Python {platform.python_version()}{cuda}, " + ", ".join(out)


# ---- 1. the tests ---------------------------------------------------------------------------------
PROBE = """
import importlib, json, sys
missing = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module("tests." + name)
    except ModuleNotFoundError as e:
        missing[name] = e.name
    except BaseException as e:  # noqa: BLE001
        if type(e).__name__ == "Skipped":   # pytest.importorskip at module level
            missing[name] = (str(e).split("'") + ["", "a skipped import"])[1]
        elif not isinstance(e, Exception):
            raise
        # any other error: pytest collects the file and reports it
print(json.dumps(missing))
"""


def runnable_test_files(python: str, env: dict, pattern: str = "test_*.py") -> tuple[list[str], dict]:
    """The test files this Python can import, and {file: the module it lacks} for the rest."""
    import json
    tests = ROOT / "tests"
    # dotted names under tests/ ("core.test_cuda"): the suite's folders mirror the packages
    names = sorted({".".join(p.relative_to(tests).with_suffix("").parts)
                    for glob in pattern.split(",") for p in tests.rglob(glob.strip())} - set(NEVER))
    p = subprocess.run([python, "-c", PROBE, *names], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"error: could not import the tests to sort them:\n{p.stderr[-2000:]}")
    missing = json.loads(p.stdout.strip().splitlines()[-1])
    return [f"tests/{n.replace('.', '/')}.py" for n in names if n not in missing], missing


def pytest_run(args: list[str], env: dict, budget: float) -> dict:
    """One pytest run, cut off after ``budget`` seconds: its summary, the tests that failed (named
    as they happen, so a run cut short still names them), exit code and seconds."""
    cmd = [sys.executable, "-m", "pytest", *args, "-o", "addopts=", "-ra", "-p", "no:cacheprovider"]
    started = time.perf_counter()
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:
        p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
        try:
            rc, cut = p.wait(timeout=budget), False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rc, cut = p.wait(), True
        log.seek(0)
        text = log.read()
    sys.stderr.write(text[-15000:])
    failed = sorted({m for m in re.findall(r"(?:FAILED|ERROR) (tests/\S+::\S+)", text)})
    summary = next((line.strip("= ") for line in reversed(text.splitlines())
                    if re.search(r"\d+ (passed|failed|error|skipped|deselected)", line)), "")
    if cut:
        summary = f"cut off after {budget:.0f} s" + (f" ({summary})" if summary else "")
    if failed:
        summary += "; failed: " + ", ".join(f.split("/")[-1] for f in failed[:12])
    return {"summary": summary or "no summary", "rc": 1 if cut else rc, "seconds": time.perf_counter() - started}


def run_tests(device: str, workers: int, timeout: int, pattern: str = "test_*.py", budget: float = 300) -> list:
    """The needs_cuda tests, then the Qt-free files with $ENCODERSCOPE_DEVICE=device, within
    ``budget`` seconds in all: one table row each."""
    env = dict(os.environ, ENCODERSCOPE_DEVICE=device, QT_QPA_PLATFORM="offscreen",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    started = time.perf_counter()
    files, missing = runnable_test_files(sys.executable, env, pattern)
    print(f"tests: {len(files)} files on {device}; left out: "
          + (", ".join(f"{k} (needs {v})" for k, v in sorted(missing.items())) or "none"), file=sys.stderr, flush=True)
    have = {d.metadata["Name"].lower() for d in metadata.distributions()}
    extra = ["--timeout", str(timeout)] if "pytest-timeout" in have else []
    cuda = pytest_run(["tests/core/test_cuda.py", "-m", "needs_cuda", "-v", *extra], env, budget / 3)
    if workers > 1 and "pytest-xdist" in have:
        extra += ["-n", str(workers), "-v"]          # -v: each failure is named as it happens
    else:
        extra += ["-q"]
    rest = budget - (time.perf_counter() - started)
    suite = pytest_run([*files, "-m", "not slow and not needs_cuda", *extra], env, max(rest, 30))
    left_out = f"{len(missing)} left out" + (f": {', '.join(sorted(missing))}" if missing else "")
    return [("tests: needs_cuda", "tests/core/test_cuda.py", cuda),
            (f"tests: {len(files)} Qt-free files ({left_out})", f"ENCODERSCOPE_DEVICE={device}", suite)]


# ---- 2. embedding throughput ------------------------------------------------------------------------
def best_rate(runs: dict, n: int, rounds: int) -> dict:
    """Sentences/s of each callable: warmed up, then alternating rounds, best of each kept."""
    for run in runs.values():
        run()
    best = dict.fromkeys(runs, 0.0)
    for _ in range(rounds):
        for name, run in runs.items():
            best[name] = max(best[name], enc_bench.rate(run, n))
    return best


def sentence_transformers_model(folder: Path, device: torch.device):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    return SentenceTransformer(str(folder), device=str(device))


def st_embed(model, texts, batch_size, device, bf16):
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        return model.encode(texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True)


def best_batch(backend, texts, candidates) -> int:
    """The batch size at which our fp32 embed is fastest on this device (one pass each)."""
    rates = {bs: enc_bench.rate(lambda bs=bs: backend.embed(texts, batch_size=bs), len(texts)) for bs in candidates}
    return max(rates, key=rates.get)


def precisions_here(device: torch.device, what: str, against: str) -> tuple[list[str], list]:
    """fp32, and bf16 where its kernels run on ``device``; else a bf16 row that says why it was
    skipped (an AVX2-only CPU cannot pack bf16 weights) instead of one silently missing."""
    refused = bf16_refusal(device)
    if refused is None:
        return ["fp32", "bf16"], []
    return ["fp32"], [(what, against, "bf16", "-", None, None, f"skipped: {refused}")]


def embed_rows(device: torch.device, texts: list[str], rounds: int, quick: bool) -> tuple[list, int]:
    from transformers import AutoModel
    precisions, skipped = precisions_here(device, "embed, minilm", "vs transformers")
    ours = {p: get_backend("minilm", "scratch", device=str(device), precision=p) for p in precisions}
    folder = ours["fp32"].source.folder
    hf = AutoModel.from_pretrained(str(folder), attn_implementation="sdpa").eval().to(device)
    st = sentence_transformers_model(folder, device)
    candidates = [64] if quick else ([64, 128, 256, 512, 1024] if device.type == "cuda" else [16, 32, 64, 128])
    best = best_batch(ours["fp32"], texts, candidates)
    ref = ours["fp32"].embed(texts)
    rows = []
    for bs in sorted({64, best}):
        plan = enc_bench.our_plan(ours["fp32"], texts, bs)
        for p in precisions:
            bf16 = p == "bf16"
            runs = {"ours": lambda p=p, bs=bs: ours[p].embed(texts, batch_size=bs),
                    "transformers": lambda plan=plan, bf16=bf16: enc_bench.hf_embed(
                        hf, ours["fp32"].tokenizer, texts, plan, False, device=device, bf16=bf16)}
            if st is not None:
                runs["sentence-transformers"] = lambda bs=bs, bf16=bf16: st_embed(st, texts, bs, device, bf16)
            rate = best_rate(runs, len(texts), rounds)
            cos = float((ref * ours[p].embed(texts, batch_size=bs)).sum(1).min())
            label = f"{bs}" + (" (best)" if bs == best else "")
            for peer in [k for k in runs if k != "ours"]:
                rows.append(("embed, minilm", f"vs {peer}", p, label, rate["ours"], rate[peer],
                             f"{len(texts)} sentences; min cos vs our fp32 {cos:.6f}"))
            if st is None and p == precisions[-1] and bs == max({64, best}):
                rows.append(("embed, minilm", "vs sentence-transformers", "-", "-", None, None, "not installed"))
    return rows + skipped, best


# ---- 3. ingest against embed ------------------------------------------------------------------------
# add_stream at its defaults (windows sized to ~1 s of the encoder's rate, one commit each) and at
# a large fixed shape, so the GPU run shows whether larger windows still pay.
INGEST_SHAPES = ({}, {"window": 16384, "batch_size": 16384})


def host_rows(backend, distinct: list[str], embed_rate: float, precision: str) -> list:
    """bench/ingest_host.py's rows beside the real encoder's embed rate: the store path with a null
    encoder (random unit vectors, the model's identity) and the tokenizer alone, each against
    embed; what the host can take before the encoder's speed matters."""
    null = ingest_host.NullEncoder(backend)
    null_rate = ingest_host.ingest_rate(null, distinct)
    tok_rate = ingest_host.tokenise_rate(backend, distinct)
    n = len(distinct)
    return [("store path, null encoder (add_stream + save)", "vs our embed", precision, "-", null_rate, embed_rate,
             f"{n} distinct sentences, random unit vectors under minilm's identity"),
            ("tokenise alone", "vs our embed", precision, "-", tok_rate, embed_rate,
             f"{n} distinct sentences, windows of {ingest_host.WINDOW}, by {ingest_host.tokenising_path(backend)}")]


def ingest_rows(device: torch.device, texts: list[str], precision: str, rounds: int = 2) -> list:
    """ingest (add_stream into a new FAISS store, then save: tokenise, embed, write, pipelined)
    against embed alone, start-up outside the clock, at the defaults and at INGEST_SHAPES' larger
    one; the host path's own rows (host_rows); then the whole `encoderscope ingest` command,
    start-up and reading the file included."""
    from app.cli import main as cli
    backend = get_backend("minilm", "scratch", device=str(device), precision=precision)
    distinct = ingest_bench.unique_sentences(len(texts))
    rows = []
    for shape in INGEST_SHAPES:
        r = ingest_bench.compare(backend, distinct, rounds, **shape)
        label = (f"window {shape['window']}, commits of {shape['batch_size']}" if shape
                 else "the defaults: adaptive windows, a commit per window")
        rows.append(("ingest (FAISS store, add_stream)", "vs our embed", precision, "auto", r["ingest"], r["embed"],
                     f"{len(distinct)} distinct sentences; {label}; start-up outside the clock; "
                     f"median of the rounds' ratios {r['median_round_ratio']:.2f}"))
    embed_rate = ingest_bench.embed_rate(backend, distinct)
    rows += host_rows(backend, distinct, embed_rate, precision)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        corpus = Path(tmp) / "corpus.txt"
        corpus.write_text("\n".join(distinct) + "\n", encoding="utf-8")
        start = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):         # stdout holds the table alone
            rc = cli(["ingest", str(corpus), "--store", str(Path(tmp) / "store"), "--device", str(device),
                      "--precision", precision, "--quiet"])
        ingest_rate = len(distinct) / (time.perf_counter() - start)
    if rc != 0:
        raise SystemExit(f"error: ingest failed on {device} (exit {rc})")
    rows.append(("`encoderscope ingest` (the command)", "vs our embed", precision, "auto", ingest_rate, embed_rate,
                 f"{len(distinct)} distinct sentences; start-up (model, store) and reading the file included"))
    return rows


# ---- 4. training ------------------------------------------------------------------------------------
def train_rows(device: torch.device, steps: int, rounds: int, quick: bool) -> list:
    from transformers import AutoTokenizer

    from core.encoder.model import EncoderConfig
    from core.encoder.sources import resolve
    tok = AutoTokenizer.from_pretrained(str(resolve("minilm").folder))
    warmup = 10 if device.type == "cuda" else 1 if quick else 2
    data = train_bench.batches(tok, steps + warmup, 32, 128)
    precisions, skipped = precisions_here(device, "train MLM step", "vs nn.TransformerEncoderLayer")
    # minilm-size steps take seconds each on a CPU: the dry run times the small model only
    small = quick or device.type != "cuda"
    sizes = dict(list(train_bench.SIZES.items())[:1]) if small else train_bench.SIZES
    rows = []
    for name, (L, D, H, FF) in sizes.items():
        cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=128, dim=D, n_layers=L, n_heads=H,
                            hidden_dim=FF, norm="pre")
        built = {k: train_bench.build(k, cfg, device) for k in ("ours", "torch")}
        for p in precisions:
            best = {"ours": 0.0, "torch": 0.0}
            for _ in range(rounds):
                for k in best:
                    best[k] = max(best[k], train_bench.time_steps(built[k], data, device, p, warmup))
            rows.append((f"train MLM step, {name}", "vs nn.TransformerEncoderLayer", p, "32", best["ours"],
                         best["torch"], f"{steps} steps, tokens/s"))
    return rows + skipped


# ---- the table ----------------------------------------------------------------------------------------
def table(device: torch.device, rows: list, tests: list | None) -> str:
    lines = [f"**{describe_device(device)}**; {versions()}", "",
             "| what | against | precision | batch | ours /s | peer /s | ours / peer | note |",
             "|---|---|---|---|---:|---:|---:|---|"]
    for what, against, run in tests or ():
        lines.append(f"| {what} | {against} | fp32 | - | - | - | - | {run['summary']} ({run['seconds']:.0f} s) |")
    for what, against, p, bs, ours, peer, note in rows:
        if ours is None:
            lines.append(f"| {what} | {against} | {p} | {bs} | - | - | - | {note} |")
        else:
            lines.append(f"| {what} | {against} | {p} | {bs} | {ours:,.0f} | {peer:,.0f} | {ours / peer:.2f} | "
                         f"{note} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a dry run")
    ap.add_argument("--sentences", type=int, default=0, help="sentences to embed (default 4096 GPU, 512 CPU)")
    ap.add_argument("--quick", action="store_true", help="one round, batch 64 only, the small training model")
    ap.add_argument("--no-tests", action="store_true", help="only the measurements")
    ap.add_argument("--tests", default="test_*.py",
                    help="test files: globs matched in every folder of tests/, comma-separated")
    ap.add_argument("--workers", type=int, default=min(15, os.cpu_count() or 1), help="pytest-xdist workers")
    ap.add_argument("--test-timeout", type=int, default=150, help="seconds per test (pytest-timeout)")
    ap.add_argument("--tests-budget", type=float, default=300, help="seconds for all the tests; then cut off")
    args = ap.parse_args(argv)
    device = pick_device(args.device)
    gpu = device.type == "cuda"
    started = time.perf_counter()
    texts = enc_bench.mixed_sentences(args.sentences or (4096 if gpu else 512))
    rounds = 1 if args.quick else 3
    print(f"measuring on {describe_device(device)} ...", file=sys.stderr, flush=True)
    rows, _ = embed_rows(device, texts, rounds, args.quick)
    rows += ingest_rows(device, texts, "bf16" if bf16_native(device) else "fp32",   # what auto picks
                        rounds=1 if args.quick else 2)
    rows += train_rows(device, steps=(50 if gpu else 2) if args.quick else (100 if gpu else 12),
                       rounds=1 if args.quick else 2, quick=args.quick)
    # the tests last, within their budget: a run cut short still prints the measurements
    tests = None if args.no_tests else run_tests(str(device), args.workers, args.test_timeout, args.tests,
                                                 args.tests_budget)
    print(table(device, rows, tests))
    print(f"\n({time.perf_counter() - started:.0f} s in all; bench/encoder_throughput.py and "
          f"bench/train_throughput.py measure the same way)")
    return 0 if all(run["rc"] == 0 for _, _, run in tests or ()) else 1


if __name__ == "__main__":
    sys.exit(main())
