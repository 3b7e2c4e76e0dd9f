"""Sentences/second: our encoder vs transformers and onnxruntime on the same weights, in one run.

    python bench/encoder_throughput.py            # minilm + DistilBERT-size random weights
    python bench/encoder_throughput.py --quick    # fewer sentences, minilm only
    python bench/encoder_throughput.py --device cuda   # ours vs transformers on a GPU, fp32 and bf16
    python bench/encoder_throughput.py --auto-only     # the default vs our fp32 and bf16, transformers, onnxruntime
    ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 python bench/encoder_throughput.py --auto-only   # AVX2 only

Rows: model x batch size (1, 64) x attentions (off, on). Every contender runs the same batches,
the ones our embed() plans (core/encoder/batching.py: sorted by token count, at most 64 rows and, on a
CPU, at most token_budget(width) padded tokens). The transformers baseline ("hf sorted") uses
sdpa attention when attentions are off and eager when they are on; "hf input" is the naive
baseline: input order, 64 rows, no token cap. The onnxruntime peer ("ort") runs the same weights
exported to ONNX (torch.onnx, dynamo exporter, from our encoder: it matches transformers to
1e-5) with ORT_ENABLE_ALL and the same thread count (rows with attentions on have no ORT peer).
Ratios > 1 mean ours is faster.
Then precision "auto" (bf16 where native) at batch 64 and batch 1 against our explicit fp32 and bf16
(where its kernels run), transformers fp32 and onnxruntime fp32, with its min cosine against fp32;
"auto / best explicit" must not fall below 1. Under an AVX2 limit torch's and oneDNN's kernels
are held to AVX2, onnxruntime's are not (its MLAS kernels pick AVX-512 from the CPU, no switch):
ours / onnxruntime there is a lower bound of what a real AVX2-only CPU gives.
Needs the bench extra: pip install 'encoderscope[bench]' (onnx, onnxruntime, onnxscript).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from core.encoder.backends import get_backend  # noqa: E402
from core.encoder.batching import plan_batches, row_cap, token_budget  # noqa: E402
from core.encoder.pooling import l2_normalize, pool  # noqa: E402

ROUNDS = 3   # alternating rounds per row (ours, transformers, ours, ...), best of each kept


def mixed_sentences(n: int) -> list[str]:
    """n real sentences of mixed length: the sample corpus, plus pairs and triples joined."""
    corpus = [s for s in (ROOT / "assets" / "sample_corpus.txt").read_text(encoding="utf-8").splitlines() if s]
    rng = np.random.default_rng(0)
    out = list(corpus)
    while len(out) < n:
        k = int(rng.choice([2, 3, 5], p=[0.6, 0.3, 0.1]))
        out.append(" ".join(rng.choice(corpus, k, replace=False)))
    rng.shuffle(out)
    return out[:n]


def our_plan(backend, texts, batch_size, ids=None):
    """The batches backend.embed(texts, batch_size=...) runs, as lists of text indices (`ids`:
    the texts' token ids when already at hand)."""
    ids = backend.encode_ids(texts)[0] if ids is None else ids
    rows = row_cap(backend.device.type) if batch_size is None else batch_size
    return plan_batches([len(x) for x in ids], rows, token_budget(backend.dim, backend.device.type))


def input_order_plan(n, batch_size):
    return [list(range(s, min(n, s + batch_size))) for s in range(0, n, batch_size)]


def hf_embed(model, tok, texts, plan, attentions: bool, device=None, bf16=False):
    """transformers' embeddings (mean pooling + L2, as ours) of `texts` in the batches of `plan`;
    on `device` when given, under bf16 autocast when bf16 (the GPU rows)."""
    out = np.zeros((len(texts), model.config.hidden_size), np.float32)
    kind = device.type if device is not None else "cpu"
    with torch.inference_mode(), torch.autocast(kind, dtype=torch.bfloat16, enabled=bf16):
        for rows in plan:
            enc = tok([texts[i] for i in rows], padding=True, truncation=True, max_length=512, return_tensors="pt")
            ids, mask = (enc["input_ids"], enc["attention_mask"]) if device is None else \
                (enc["input_ids"].to(device), enc["attention_mask"].to(device))
            h = model(input_ids=ids, attention_mask=mask, output_attentions=attentions).last_hidden_state
            out[rows] = l2_normalize(pool(h.float(), mask, "mean")).cpu().numpy()   # .cpu(): waits for the GPU
    return out


def ours_embed(backend, texts, batch_size, attentions: bool):
    if not attentions:
        return backend.embed(texts, batch_size=batch_size)
    # The explicit attention path: what the inspector runs.
    ids, _ = backend.encode_ids(texts)
    with torch.inference_mode():
        for rows in our_plan(backend, texts, batch_size, ids):
            input_ids, mask = backend._batch([ids[i] for i in rows])
            backend._forward(input_ids, mask, None, attentions=True)


def rate(fn, n, repeats=1):
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best


def make_distilbert_folder(path: Path) -> Path:
    from transformers import DistilBertConfig, DistilBertModel
    if (path / "model.safetensors").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    DistilBertModel(DistilBertConfig(vocab_size=30522)).save_pretrained(str(path))
    # Its tokenizer: the bert-base-uncased WordPiece vocabulary that minilm ships.
    get_backend("minilm").tokenizer.save_pretrained(str(path))
    return path


def bench_model(name: str, folder: str, texts: list[str], n_bs1: int, rows: list):
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    ours = get_backend(folder, "scratch", precision="fp32")
    tok = ours.tokenizer
    folder = str(ours.source.folder)
    hf_sdpa = AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval()
    hf_eager = AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
    session = onnx_session(ours, torch.get_num_threads())
    for bs in (1, 64):
        sub = texts if bs > 1 else texts[:n_bs1]
        n = len(sub)
        plan = our_plan(ours, sub, bs)
        for attn in (False, True):
            hf = hf_eager if attn else hf_sdpa
            ours_embed(ours, sub[:64], bs, attn)          # warm-up
            hf_embed(hf, tok, sub, plan[:4], attn)
            if not attn and session is not None:
                ort_embed(session, ours, sub[:64], bs)
            # Alternate the contenders and keep each one's best round: on a shared machine a
            # single run of either can land in someone else's busy second.
            r_ours = r_sorted = r_ort = 0.0
            for _ in range(ROUNDS):
                r_ours = max(r_ours, rate(lambda: ours_embed(ours, sub, bs, attn), n))
                r_sorted = max(r_sorted, rate(lambda: hf_embed(hf, tok, sub, plan, attn), n))
                if not attn and session is not None:
                    r_ort = max(r_ort, rate(lambda: ort_embed(session, ours, sub, bs), n))
            r_input = rate(lambda: hf_embed(hf, tok, sub, input_order_plan(n, bs), attn), n) \
                if (bs > 1 and not attn) else None
            rows.append((name, bs, "on" if attn else "off", n, r_ours, r_sorted, r_input, r_ort or None))
            print_row(rows[-1])
    # Accuracy of the fast path against transformers on the same weights.
    a = ours.embed(texts[:256])
    b = hf_embed(hf_sdpa, tok, texts[:256], our_plan(ours, texts[:256], 64), False)
    ort = "" if session is None else \
        f", max |ort - transformers| = {np.abs(ort_embed(session, ours, texts[:256], 64) - b).max():.2e}"
    print(f"  {name}: max |ours - transformers| over 256 embeddings = {np.abs(a - b).max():.2e}{ort}")


def print_row(r):
    name, bs, attn, n, ours, srt, inp, ort = r
    inp_s = f"{inp:8.1f}" if inp else "       -"
    ort_s, ratio_ort = (f"{ort:8.1f}", f"{ours / ort:5.2f}") if ort else ("       -", "    -")
    print(f"| {name:<10} | {bs:>5} | {attn:>4} | {n:>5} | {ours:8.1f} | {srt:9.1f} | {inp_s} | {ort_s} | "
          f"{ours / srt:5.2f} | {ratio_ort} |", flush=True)


def onnx_session(backend, threads: int):
    """An onnxruntime session over the backend's weights, exported once and cached by weights;
    None without the bench extra (onnxruntime, onnx, onnxscript): the rows then have no ORT peer."""
    try:
        import onnx  # noqa: F401 - the exporter needs it
        import onnxruntime as ort
    except ImportError:
        return None

    from core.encoder.weights import load_folder
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"encoderscope-bench-{backend.weights_sha256[:16]}.onnx"
    if not path.exists():
        import logging
        import warnings
        print(f"  exporting {backend.model_name} to ONNX once ({path}) ...", flush=True)
        logging.getLogger("torch.onnx").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module="torch.onnx")
        model, _, _ = load_folder(backend.source.folder)          # fresh, unpacked: exportable
        enc = (model.distilbert if hasattr(model, "head") else model).eval()

        class LastHidden(torch.nn.Module):
            def __init__(self, m):
                super().__init__()
                self.m = m

            def forward(self, ids, mask):
                return self.m(ids, mask).last_hidden_state
        b, t = torch.export.Dim("b", min=1, max=4096), torch.export.Dim("t", min=2, max=backend.max_length)
        ids = torch.ones(2, 16, dtype=torch.long)
        torch.onnx.export(LastHidden(enc).eval(), (ids, torch.ones_like(ids)), str(path), dynamo=True, optimize=True,
                          input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                          dynamic_shapes={"ids": {0: b, 1: t}, "mask": {0: b, 1: t}}, verbose=False)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def ort_embed(session, backend, texts, batch_size):
    """Tokenise as ours does, our batches (core/encoder/batching.py), mean pooling + L2 in NumPy."""
    ids, _ = backend.encode_ids(texts)
    out = np.zeros((len(texts), backend.dim), np.float32)
    for rows in our_plan(backend, texts, batch_size, ids):
        T = max(len(ids[i]) for i in rows)
        x = np.zeros((len(rows), T), np.int64)
        m = np.zeros((len(rows), T), np.int64)
        for r, i in enumerate(rows):
            x[r, :len(ids[i])] = ids[i]
            m[r, :len(ids[i])] = 1
        h = session.run(None, {"input_ids": x, "attention_mask": m})[0]
        v = (h * m[..., None]).sum(1) / m.sum(1, keepdims=True)
        out[rows] = v / np.linalg.norm(v, axis=1, keepdims=True)
    return out


def bench_auto(texts, n_bs1: int, rounds: int = ROUNDS, bs1: bool = True):
    """The default precision ("auto": bf16 where native) against our explicit fp32 and bf16 (where
    its kernels run), transformers fp32 and onnxruntime fp32, all in our batches (at most 64 rows,
    token-capped) and single sentences, rounds alternating; plus transformers in plain
    length-sorted batches of 64 (no token cap). "best explicit" is the faster of our fp32 and
    bf16: the default must be no slower than it. Also run where auto is fp32 (an AVX2-only CPU),
    where the default must match explicit fp32."""
    from transformers import AutoModel

    from core.device import bf16_refusal
    ours = get_backend("minilm", "scratch", precision="fp32")
    auto = get_backend("minilm", "scratch", precision="auto")
    refused = bf16_refusal(ours.device)
    bf16 = None if refused else get_backend("minilm", "scratch", precision="bf16")
    if auto is ours:
        print("auto is the fp32 model itself (the same object): any gap between their rows is the machine's noise")
    print(f"precision auto on this machine: {auto.precision} ({auto.precision_note}); "
          f"explicit bf16: {'runs' if bf16 else 'refused: ' + refused}; "
          f"aten {torch.backends.cpu.get_cpu_capability()}, ONEDNN_MAX_CPU_ISA="
          f"{os.environ.get('ONEDNN_MAX_CPU_ISA', '-')}")
    hf = AutoModel.from_pretrained(str(ours.source.folder), attn_implementation="sdpa").eval()
    session = onnx_session(ours, torch.get_num_threads())
    for bs, sub in ((64, texts), (1, texts[:n_bs1])) if bs1 else ((64, texts),):
        plan = our_plan(ours, sub, bs)
        uncapped = plan_batches([len(x) for x in ours.encode_ids(sub)[0]], bs)
        contenders = {"auto": lambda: auto.embed(sub, batch_size=bs),
                      "fp32": lambda: ours.embed(sub, batch_size=bs),
                      "bf16": lambda: bf16.embed(sub, batch_size=bs),
                      "hf": lambda: hf_embed(hf, ours.tokenizer, sub, plan, False),
                      "ort": lambda: ort_embed(session, ours, sub, bs)}
        if session is None:
            del contenders["ort"]
        if bf16 is None:
            del contenders["bf16"]
        if bs > 1:
            contenders["hf64"] = lambda: hf_embed(hf, ours.tokenizer, sub, uncapped, False)
        warm = sub[:128]
        for run in (lambda: auto.embed(warm, batch_size=bs), lambda: ours.embed(warm, batch_size=bs),
                    lambda: ort_embed(session, ours, warm, bs) if session else None,
                    lambda: bf16.embed(warm, batch_size=bs) if bf16 else None,
                    lambda: hf_embed(hf, ours.tokenizer, warm, our_plan(ours, warm, bs), False)):
            run()                             # warm-up
        best = dict.fromkeys(contenders, 0.0)
        for _ in range(rounds):
            for name, run in contenders.items():
                best[name] = max(best[name], rate(run, len(sub)))
        best.setdefault("ort", float("nan"))          # no bench extra: no onnxruntime peer
        explicit = max(best["fp32"], best.get("bf16", 0.0))
        cos = (ours.embed(sub) * auto.embed(sub)).sum(1)
        bf16_s = f"{best['bf16']:.1f}" if "bf16" in best else "refused"
        print(f"auto={auto.precision} (minilm, batch {bs}, {len(sub)} sentences): {best['auto']:.1f} sent/s; "
              f"our fp32 {best['fp32']:.1f}, our bf16 {bf16_s}; auto / best explicit "
              f"x{best['auto'] / explicit:.2f}; transformers fp32 sorted {best['hf']:.1f} "
              f"(x{best['auto'] / best['hf']:.2f}); onnxruntime fp32 {best['ort']:.1f} "
              f"(auto x{best['auto'] / best['ort']:.2f}, fp32 x{best['fp32'] / best['ort']:.2f}); "
              f"min cosine vs fp32 {cos.min():.6f}", flush=True)
        if bs > 1:
            print(f"  transformers fp32 in uncapped sorted batches of 64: {best['hf64']:.1f} "
                  f"(auto x{best['auto'] / best['hf64']:.2f})", flush=True)


def bench_latency(lengths=(8, 16, 32, 64, 128), reps: int = 30):
    """One sentence of T tokens, the forward pass alone (no tokenising, no pooling): the median
    of `reps` calls, best of ROUNDS blocks, ours fp32 and auto against onnxruntime fp32. Shows
    how much of a single sentence's time is a fixed cost per call rather than arithmetic."""
    ours = get_backend("minilm", "scratch", precision="fp32")
    auto = get_backend("minilm", "scratch", precision="auto")
    session = onnx_session(ours, torch.get_num_threads())
    from core.device import autocast

    def ours_call(b, ids):
        with torch.inference_mode(), autocast(b.device, b.precision):
            b._forward(ids, torch.ones_like(ids), None)

    print(f"single-sentence forward latency (median of {reps}, best of {ROUNDS} blocks, ms): tokens | ours fp32 | "
          f"ours auto ({auto.precision}) | onnxruntime fp32 | fp32 / ort | auto / ort")
    for T in lengths:
        ids = torch.randint(1000, 20000, (1, T))
        feed = {"input_ids": ids.numpy(), "attention_mask": np.ones((1, T), np.int64)}
        runs = {"fp32": lambda: ours_call(ours, ids), "auto": lambda: ours_call(auto, ids),
                "ort": lambda: session.run(None, feed)}
        if session is None:
            del runs["ort"]
        # Blocks of one contender at a time: onnxruntime's idle threads spin for a while after
        # each run, and so do torch's, so call-by-call alternation slows whoever runs next.
        med = dict.fromkeys(runs, float("inf"))
        for _ in range(ROUNDS):
            for name, run in runs.items():
                for _ in range(3):
                    run()
                times = []
                for _ in range(reps):
                    t = time.perf_counter()
                    run()
                    times.append(time.perf_counter() - t)
                med[name] = min(med[name], float(np.median(times)) * 1e3)
        med.setdefault("ort", float("nan"))
        print(f"  {T:>4} | {med['fp32']:6.2f} | {med['auto']:6.2f} | {med['ort']:6.2f} | "
              f"{med['ort'] / med['fp32']:4.2f} | {med['ort'] / med['auto']:4.2f}", flush=True)


DEVICE_BATCHES = (1, 64, 256, None)   # None: embed's own plan for the device (its token budget)


def flops_per_token(cfg) -> int:
    """Multiply-adds x 2 of the encoder's matrix products per token: Q, K, V and output (4 D x D)
    and the FFN (2 D x F) in each layer; attention's T-long products left out (minilm: 21 MFLOP)."""
    return 2 * cfg.n_layers * (4 * cfg.dim * cfg.dim + 2 * cfg.dim * cfg.hidden_dim)


def st_model(folder: str, device):
    """sentence-transformers over the same folder (mean pooling, as ours), or None when it is
    not installed."""
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None
    return SentenceTransformer(folder, device=str(device))


def st_embed(model, texts, batch_size: int, bf16: bool, device):
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
        return model.encode(texts, batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True)


def measure_device(texts, device: str, n_bs1: int = 500, batches=DEVICE_BATCHES, rounds: int = ROUNDS) -> list[dict]:
    """Ours against transformers (sdpa) and sentence-transformers (when installed) on one device,
    fp32 and bf16 (ours: weights cast once; the peers: autocast), at each batch size: rows of
    sentences/s, our TFLOP/s and the min cosine of our vectors with our fp32 ones. Rounds
    alternate the contenders, best of each; a time includes copying the vectors back, which
    waits for the device."""
    from transformers import AutoModel

    from core.device import bf16_refusal
    from core.encoder.batching import row_cap
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("error: no CUDA device here (torch.cuda.is_available() is False): "
                         "run `--device cuda` on a machine with an NVIDIA GPU and a CUDA build of torch")
    dev = torch.device(device)
    refused = bf16_refusal(dev)           # an AVX2-only CPU cannot pack bf16 weights: a row says so
    precisions = ["fp32"] + ([] if refused else ["bf16"])
    ours = {p: get_backend("minilm", "scratch", device=device, precision=p) for p in precisions}
    folder = str(ours["fp32"].source.folder)
    hf = AutoModel.from_pretrained(folder, attn_implementation="sdpa").eval().to(dev)
    st = st_model(folder, dev)
    tok = ours["fp32"].tokenizer
    per_token = flops_per_token(ours["fp32"].config)
    rows = []
    for bs in batches:
        sub = texts if bs != 1 else texts[:n_bs1]
        tokens = sum(len(x) for x in ours["fp32"].encode_ids(sub)[0])
        rows_cap = row_cap(dev.type) if bs is None else bs
        ref = ours["fp32"].embed(sub, batch_size=bs)
        plan = our_plan(ours["fp32"], sub, rows_cap)
        for p in precisions:
            runs = {"ours": lambda: ours[p].embed(sub, batch_size=bs),
                    "hf": lambda: hf_embed(hf, tok, sub, plan, False, device=dev, bf16=p == "bf16")}
            if st is not None:
                runs["st"] = lambda: st_embed(st, sub, rows_cap, p == "bf16", dev)
            for run in runs.values():               # warm-up (CUDA kernels, cuBLAS handles)
                run()
            best = dict.fromkeys(runs, 0.0)
            for _ in range(rounds):
                for name, run in runs.items():
                    best[name] = max(best[name], rate(run, len(sub)))
            cos = float((ref * ours[p].embed(sub, batch_size=bs)).sum(1).min())
            rows.append({"batch": "plan" if bs is None else bs, "precision": p, "n": len(sub),
                         "ours": best["ours"], "hf": best["hf"], "st": best.get("st"),
                         "tflops": best["ours"] * tokens / len(sub) * per_token / 1e12, "min_cos": cos})
    if refused:
        rows.append({"precision": "bf16", "skipped": refused})
    return rows


def print_device_rows(device: str, rows: list[dict]) -> None:
    from core.device import describe_device
    print(f"\n{describe_device(torch.device(device))}: minilm, sentences/second, ours against transformers "
          f"(sdpa) and sentence-transformers; bf16: ours with weights cast once, the peers under autocast")
    print("| batch | precision | n | ours | transformers | sentence-transformers | ours / transformers | "
          "ours TFLOP/s | min cosine vs our fp32 |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "skipped" in r:
            print(f"| - | {r['precision']} | - | - | - | - | - | - | skipped: {r['skipped']} |", flush=True)
            continue
        st = f"{r['st']:.1f}" if r["st"] else "-"
        print(f"| {r['batch']} | {r['precision']} | {r['n']} | {r['ours']:.1f} | {r['hf']:.1f} | {st} | "
              f"{r['ours'] / r['hf']:.2f} | {r['tflops']:.3f} | {r['min_cos']:.6f} |", flush=True)


def bench_device(texts, device: str, n_bs1: int):
    print_device_rows(device, measure_device(texts, device, n_bs1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="500 sentences, minilm only")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--minilm-only", action="store_true", help="2,000 sentences, minilm only (no DistilBERT size)")
    ap.add_argument("--auto-only", action="store_true",
                    help="only the default precision against our fp32 and bf16, transformers and onnxruntime, "
                         "batch 64 (--rounds rounds); with --quick, batch 1 too")
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="alternating rounds (--auto-only)")
    ap.add_argument("--n", type=int, default=None, help="sentences (--auto-only; default 2,000)")
    ap.add_argument("--device", default=None,
                    help="only ours vs transformers on this device, fp32 and bf16 (e.g. cuda; cpu runs the same rows)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n = 500 if args.quick else 2000
    texts = mixed_sentences(n)
    if args.device:
        bench_device(texts, args.device, 100 if args.quick else 500)
        return
    if args.auto_only:
        n = args.n or 2000
        print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {n} sentences")
        bench_auto(mixed_sentences(n), 300, rounds=args.rounds, bs1=args.quick)
        return
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, {n} sentences "
          f"(mean {np.mean([len(t.split()) for t in texts]):.1f} words)")
    print("| model      | batch | attn |     n | ours s/s | hf sorted | hf input |      ort | /hf   | /ort  |")
    print("|------------|-------|------|-------|----------|-----------|----------|----------|-------|-------|")
    rows = []
    bench_model("minilm", "minilm", texts, 300 if args.quick else 500, rows)
    if not (args.quick or args.minilm_only):
        folder = make_distilbert_folder(Path(os.environ.get("TMPDIR", "/tmp")) / "encoderscope-bench-distilbert")
        bench_model("distilbert", str(folder), texts[:500], 100, rows)
    bench_auto(texts, 300 if args.quick else 500)
    bench_latency()


if __name__ == "__main__":
    main()
