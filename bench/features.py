"""Sparse-autoencoder features on minilm: activation collection against `embed` of the same model
in one run, SAE training time, and the feature browser's open time.

    python bench/features.py                       # all three, CPU, minilm at L3.resid
    python bench/features.py --only collect        # collect | train | browse | ksweep
    python bench/features.py --only ksweep --ksweep-tokens 200000      # normalised MSE against L0
    python bench/features.py --train-tokens 100000 --browse-n 20000

collect: tokens/second of core.features.collect.iter_activations at the site (the forward stops
    after the site's block) against tokens/second of Backend.embed (the whole model, its packed CPU
    path), the same texts, rounds alternated, best of each; the ratio collect / embed.
train:  a width-3,072, k-32 SAE (core.features.train.train_sae) on ``--train-tokens`` tokens of
    L3.resid: wall-clock seconds; scaled to 1M tokens it is named "extrapolated" (linear: the
    steps are alike and the activations stream).
browse: an SAE's (``--browse-sae DIR``, else one trained here) feature index over ``--browse-n``
    sentences (bench/encoder_throughput's mixed sentences: the sample corpus, plus its sentences
    joined in pairs and triples); the time to load
    the index (FeatureIndex.load) and to open one feature's summary (top examples, histogram,
    vocabulary), median over the 20 densest features.
ksweep: the comparison with Gao et al. 2024's normalised MSE against L0: the real corpus
    (bench/real_corpus.py, 20,000 sentences; ``--ksweep-corpus FILE`` reads the file it wrote), its
    sentences split as training splits them
    (core.features.train.held_out_mask, 10 %, seed 0); the training sentences' L3.resid activations
    collected once (the first ``--ksweep-tokens`` tokens of them, special tokens left out), and one
    SAE per k in ``--ks`` (width ``--ksweep-width``) trained on exactly those tokens, one epoch
    (core.features.train.train_on_activations: the same steps as `features train`); each measured on
    the held-out sentences' tokens (at most 30,000): normalised MSE sum||x - x_hat||^2 /
    sum||x - mean||^2, L0, the dead fraction, and the training normalised MSE at the end; and the
    least-squares slope of log(normalised MSE) against log(L0).
Prints JSON. State the machine and its load (`uptime`) beside the figures (docs/benchmarks.md).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from bench.encoder_throughput import mixed_sentences  # noqa: E402


def n_tokens(backend, texts) -> int:
    return sum(len(x) for x in backend.encode_ids(texts)[0])


def collect_vs_embed(backend, texts, site: str, rounds: int = 3) -> dict:
    from core.features.collect import iter_activations
    tokens = n_tokens(backend, texts)
    best_embed = best_collect = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        backend.embed(texts)
        best_embed = min(best_embed, time.perf_counter() - t)
        t = time.perf_counter()
        for _ in iter_activations(backend, texts, site, batch_size=64):
            pass
        best_collect = min(best_collect, time.perf_counter() - t)
    return {"sentences": len(texts), "tokens": tokens, "embed_tokens_per_s": round(tokens / best_embed),
            "collect_tokens_per_s": round(tokens / best_collect), "ratio": round(best_embed / best_collect, 3)}


def train_time(backend, texts, site: str, tokens: int, width: int = 3072, k: int = 32) -> dict:
    from core.features.train import TrainConfig, train_sae
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        result = train_sae(backend, texts, TrainConfig(site=site, width=width, k=k, tokens=tokens),
                           Path(tmp) / "sae")
        seconds = time.perf_counter() - t
    return {"width": width, "k": k, "tokens": result.tokens_trained, "steps": result.steps,
            "seconds": round(seconds, 1), "train_normalised_mse": round(result.train_fvu, 4),
            "dead_fraction": round(result.dead_fraction, 4),
            "seconds_per_1M_tokens": round(seconds * 1_000_000 / result.tokens_trained, 1),
            "note": "measured" if result.tokens_trained >= 1_000_000 else
                    f"extrapolated linearly from {result.tokens_trained:,} tokens"}


def browse_time(backend, texts, site: str, tokens: int, sae_folder: str | None = None) -> dict:
    import shutil

    from core.features.browse import FeatureIndex, build_feature_index
    from core.features.saved import load_sae
    from core.features.train import TrainConfig, train_sae
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "sae"
        if sae_folder:          # an SAE already trained (its index is built here, in a copy)
            folder.mkdir()
            for name in ("cfg.json", "sae_weights.safetensors", "encoderscope_sae.json"):
                shutil.copy(Path(sae_folder) / name, folder / name)
        else:
            train_sae(backend, texts, TrainConfig(site=site, width=3072, k=32, tokens=tokens), folder)
        sae, meta = load_sae(folder)
        t = time.perf_counter()
        build_feature_index(backend, sae, meta, texts, folder)
        build = time.perf_counter() - t
        t = time.perf_counter()
        index = FeatureIndex.load(folder)
        load = time.perf_counter() - t
        times = []
        for f in index.features(sort="density")[:20]:
            t = time.perf_counter()
            s = index.summary(f)
            times.append(time.perf_counter() - t)
            assert s.top_examples
        size = sum(p.stat().st_size for p in folder.glob("feature_index.*"))
    return {"sentences": len(texts), "index_build_s": round(build, 1), "index_mb": round(size / 1e6, 1),
            "load_ms": round(load * 1000, 1), "summary_ms_median": round(statistics.median(times) * 1000, 2),
            "open_ms": round((load + statistics.median(times)) * 1000, 1)}


def collect_tokens(backend, texts, site: str, limit: int) -> torch.Tensor:
    """The site's activations of ``texts`` (special tokens left out), the first ``limit`` tokens, float32."""
    from core.features.collect import iter_activations
    got, n = [], 0
    for batch in iter_activations(backend, texts, site, batch_size=64):
        got.append(batch.acts.float().cpu())
        n += len(batch.acts)
        if n >= limit:
            break
    return torch.cat(got)[:limit]


def held_out_fvu(sae, x: torch.Tensor) -> dict:
    """Normalised MSE (against the held-out tokens' own mean), L0 and the dead fraction on ``x``."""
    with torch.inference_mode():
        x_hat, codes = sae(x)
        err = (x - x_hat).double().pow(2).sum()
        var = (x - x.mean(0)).double().pow(2).sum()
        return {"normalised_mse": round(float(err / var), 4), "l0": round(float((codes > 0).sum(1).float().mean()), 2),
                "dead_fraction": round(float(((codes > 0).sum(0) == 0).float().mean()), 4)}


def k_sweep(backend, site: str, ks, width: int, tokens: int, seed: int = 0, corpus: str | None = None) -> dict:
    import math

    import numpy as np

    from bench.real_corpus import build, versions
    from core.features.train import TrainConfig, held_out_mask, train_on_activations
    if corpus:              # the file bench/real_corpus.py wrote (the same sentences, no rebuild)
        texts = [t for t in Path(corpus).read_text(encoding="utf-8").splitlines() if t.strip()]
        available = None
    else:
        texts, available = build()
    held = held_out_mask(len(texts), 0.1, seed)
    t = time.perf_counter()
    x_train = collect_tokens(backend, [s for s, h in zip(texts, held) if not h], site, tokens)
    x_held = collect_tokens(backend, [s for s, h in zip(texts, held) if h], site, 30_000)
    collect_s = time.perf_counter() - t
    rows = []
    for k in ks:
        sae, result = train_on_activations(x_train, TrainConfig(site=site, width=width, k=k, tokens=len(x_train),
                                                                seed=seed))
        row = {"k": k, **held_out_fvu(sae, x_held), "train_normalised_mse": round(result.train_fvu, 4),
               "steps": result.steps, "seconds": round(result.seconds, 1)}
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)
    logs = np.array([[math.log(r["l0"]), math.log(r["normalised_mse"])] for r in rows])
    slope = float(np.polyfit(logs[:, 0], logs[:, 1], 1)[0]) if len(rows) > 1 else None
    return {"corpus": {"sentences": len(texts), "available": available, "versions": versions()},
            "site": site, "width": width, "train_tokens": len(x_train), "held_out_tokens": len(x_held),
            "collect_s": round(collect_s, 1), "rows": rows,
            "log_log_slope": None if slope is None else round(slope, 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="minilm")
    p.add_argument("--site", default="L3.resid")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default=None)
    p.add_argument("--only", choices=("collect", "train", "browse", "ksweep"))
    p.add_argument("--collect-n", type=int, default=2000)
    p.add_argument("--train-tokens", type=int, default=100_000)
    p.add_argument("--browse-n", type=int, default=20_000)
    p.add_argument("--browse-train-tokens", type=int, default=50_000)
    p.add_argument("--browse-sae", metavar="DIR", help="browse: an SAE folder of this model and site (else one is "
                                                       "trained on --browse-train-tokens tokens first)")
    p.add_argument("--ks", default="8,16,32,64,128", help="ksweep: the k values (comma-separated)")
    p.add_argument("--ksweep-width", type=int, default=3072)
    p.add_argument("--ksweep-tokens", type=int, default=200_000)
    p.add_argument("--ksweep-corpus", metavar="FILE", help="ksweep: the file bench/real_corpus.py wrote (default: "
                                                         "build the corpus again)")
    args = p.parse_args(argv)

    from core.encoder.backends import get_backend
    backend = get_backend(args.model, "scratch", device=args.device, precision=args.precision)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    out = {"model": args.model, "site": args.site, "device": backend.device_name, "precision": backend.precision,
           "torch_threads": torch.get_num_threads(), "load_average": load}
    if args.only in (None, "collect"):
        out["collect"] = collect_vs_embed(backend, mixed_sentences(args.collect_n), args.site)
        print(json.dumps(out["collect"]), file=sys.stderr)
    if args.only in (None, "train"):
        out["train"] = train_time(backend, mixed_sentences(20_000), args.site, args.train_tokens)
        print(json.dumps(out["train"]), file=sys.stderr)
    if args.only in (None, "browse"):
        out["browse"] = browse_time(backend, mixed_sentences(args.browse_n), args.site, args.browse_train_tokens,
                                    args.browse_sae)
    if args.only == "ksweep":          # minutes: only when asked
        out["ksweep"] = k_sweep(backend, args.site, [int(k) for k in args.ks.split(",")], args.ksweep_width,
                                args.ksweep_tokens, corpus=args.ksweep_corpus)
    out["load_average_after"] = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
