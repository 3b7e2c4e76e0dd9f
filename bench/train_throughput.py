"""Training tokens/second: our encoder's MLM step vs the same model built from torch.nn.TransformerEncoderLayer.

    python bench/train_throughput.py                 # small + minilm-size, fp32 and bf16, this machine
    python bench/train_throughput.py --quick         # small model only, fewer steps
    python bench/train_throughput.py --device cuda   # on a GPU (bf16 autocast)
    python bench/train_throughput.py --watch-only    # only: the cost of watching a run (core/train/watch.py)

Both models get the same batches (real sentences of the sample corpus, minilm's WordPiece
tokenizer, BERT masking) and run the same step: forward, MLM head on the masked positions,
cross-entropy, backward, gradient clipping, AdamW. The reference model has the same shapes:
token + learned position embeddings, LayerNorm, nn.TransformerEncoder (norm_first for pre-norm,
GELU, batch_first, padding mask) and the same tied MLM head. tokens/s counts non-padding tokens.
Prints a markdown table (paste it into docs/benchmarks/training.md) and, with --json, JSON.

--watch / --watch-only: the real Trainer at its default settings (2x128, batch 32, log every 10
steps, probes auto) on the sample corpus, watched and not, alternated in rounds (best of each):
seconds per step from the first logged step to the last event before the final checkpoint,
and their ratio (watching must stay within 1.10), in wall-clock and in process CPU time (less
disturbed by other work on a shared machine); and, inside each watched run, the share of its
loop spent in the watching code (robust to the machine's drift between runs; on a GPU it also
counts the wait for queued work at the one host transfer per log step). No held-out part, so
both time training only.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from core.device import bf16_refusal, describe_device, pick_device  # noqa: E402
from core.encoder.model import EncoderConfig, EncoderForMaskedLM  # noqa: E402
from core.train.data import collate, encode  # noqa: E402
from core.train.masking import IGNORE, mask_tokens, special_mask  # noqa: E402

SIZES = {
    # name: (layers, dim, heads, ffn)
    "small (2x128)": (2, 128, 4, 512),
    "minilm-size (6x384)": (6, 384, 12, 1536),
}


class TorchReference(nn.Module):
    """The same encoder from torch's own building blocks, with the same MLM head."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=cfg.pad_token_id)
        self.pos = nn.Embedding(cfg.max_position_embeddings, cfg.dim)
        self.ln = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.drop = nn.Dropout(cfg.dropout)
        layer = nn.TransformerEncoderLayer(cfg.dim, cfg.n_heads, cfg.hidden_dim, cfg.dropout, activation="gelu",
                                           layer_norm_eps=cfg.layer_norm_eps, batch_first=True,
                                           norm_first=cfg.norm == "pre")
        self.encoder = nn.TransformerEncoder(layer, cfg.n_layers, enable_nested_tensor=False)
        self.final_ln = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps) if cfg.norm == "pre" else nn.Identity()
        self.transform = nn.Linear(cfg.dim, cfg.dim)
        self.head_ln = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def hidden(self, ids, attn):
        T = ids.shape[1]
        x = self.drop(self.ln(self.word(ids) + self.pos(torch.arange(T, device=ids.device))[None]))
        return self.final_ln(self.encoder(x, src_key_padding_mask=attn == 0))

    def head(self, h):
        return F.linear(self.head_ln(F.gelu(self.transform(h))), self.word.weight, self.bias)


def batches(tokenizer, n_batches: int, batch_size: int, max_length: int, seed: int = 0):
    text = (ROOT / "assets" / "sample_corpus.txt").read_text(encoding="utf-8").splitlines()
    seqs = encode(tokenizer, [t for t in text if t.strip()], max_length)
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    specials = sorted(set(tokenizer.all_special_ids))
    out = []
    for _ in range(n_batches):
        ids, attn = collate([seqs[i] for i in rng.choice(len(seqs), batch_size, replace=False)],
                            tokenizer.pad_token_id)
        inputs, labels = mask_tokens(ids, special_mask(ids, specials), tokenizer.mask_token_id,
                                     len(tokenizer), 0.15, gen)
        out.append((inputs, attn, labels))
    return out


def build(kind: str, cfg: EncoderConfig, device):
    torch.manual_seed(0)
    if kind == "ours":
        model = EncoderForMaskedLM(cfg).to(device).train()
        body = lambda ids, attn: model.distilbert(ids, attn).last_hidden_state  # noqa: E731
    else:
        model = TorchReference(cfg).to(device).train()
        body = model.hidden
    return model, body, torch.optim.AdamW(model.parameters(), lr=1e-4)


def time_steps(built, data, device, precision: str, warmup: int) -> float:
    """tokens/s of the training step over ``data`` (the first ``warmup`` batches untimed)."""
    model, body, opt = built
    ctx = (lambda: torch.autocast(device.type, dtype=torch.bfloat16)) if precision == "bf16" else \
        (lambda: torch.autocast(device.type, enabled=False))
    tokens, start = 0, None
    for i, (ids, attn, labels) in enumerate(data):
        if i == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            start, tokens = time.perf_counter(), 0
        ids, attn, labels = ids.to(device), attn.to(device), labels.to(device)
        with ctx():
            h = body(ids, attn)
            sel = labels != IGNORE
            loss = F.cross_entropy(model.head(h[sel]).float(), labels[sel])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        tokens += int(attn.sum())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - start)


def watch_overhead(device, steps: int, rounds: int, threads: int, out_root: Path) -> dict:
    """Seconds per training step of the Trainer with and without watching, and their ratio."""
    from core.train.config import TrainConfig
    from core.train.trainer import Trainer
    from core.train.watch import probe_every

    shares = []

    def per_step(watch: bool, k: int) -> tuple[float, float]:
        """(wall seconds, process CPU seconds) per step of one run."""
        times = []

        def progress(ev):
            times.append((time.perf_counter(), time.process_time(), ev))
        cfg = TrainConfig(corpus=str(ROOT / "assets" / "sample_corpus.txt"), out=str(out_root / f"{watch}-{k}"),
                          steps=steps, heldout=0.0, device=str(device), threads=threads, watch=watch)
        trainer = Trainer(cfg)
        trainer.run(progress=progress)
        first = next(i for i, t in enumerate(times) if t[2]["kind"] == "step")
        last = max(i for i, t in enumerate(times) if t[2]["kind"] == "checkpoint") - 1
        if watch:
            # the same run's own accounting: time inside the watching code / the training loop
            start = next(t[0] for t in times if t[2]["kind"] == "start")
            shares.append((trainer.grad_flow.seconds + trainer.probe.seconds) / (times[last][0] - start))
        n = times[last][2]["step"] - times[first][2]["step"]
        return (times[last][0] - times[first][0]) / n, (times[last][1] - times[first][1]) / n

    best = {(w, clock): float("inf") for w in (True, False) for clock in (0, 1)}
    for k in range(rounds):
        for watch in (False, True):
            for clock, v in enumerate(per_step(watch, k)):
                best[watch, clock] = min(best[watch, clock], v)
            print(f"  round {k + 1}, watch={watch}: {1000 * best[watch, 0]:.1f} ms/step wall, "
                  f"{1000 * best[watch, 1]:.1f} ms/step CPU time (best so far)", file=sys.stderr, flush=True)
    cfg = TrainConfig(steps=steps)
    return {"steps": steps, "probe_every": probe_every(cfg), "log_every": cfg.log_every,
            "plain_ms_per_step": round(1000 * best[False, 0], 2), "watched_ms_per_step": round(1000 * best[True, 0], 2),
            "ratio": round(best[True, 0] / best[False, 0], 3),
            "cpu_time_ratio": round(best[True, 1] / best[False, 1], 3),
            "watch_share_in_run": round(min(shares), 4)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", help="cpu | cuda | auto")
    ap.add_argument("--quick", action="store_true", help="small model only, fewer steps")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: torch's default)")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=0, help="timed steps per cell (default: 20 CPU, 100 GPU)")
    ap.add_argument("--norm", choices=("pre", "post"), default="pre")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each is kept")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--watch", action="store_true", help="also measure the cost of watching a run")
    ap.add_argument("--watch-only", action="store_true", help="only measure the cost of watching a run")
    ap.add_argument("--watch-steps", type=int, default=0, help="steps per watched/unwatched run "
                                                                "(default: 200 CPU, 1000 GPU)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(None if args.device == "auto" else args.device)
    watch = None
    if args.watch or args.watch_only:
        import tempfile
        with tempfile.TemporaryDirectory(prefix="watch-bench-") as tmp:
            watch = watch_overhead(device, args.watch_steps or (1000 if device.type == "cuda" else 200),
                                   args.rounds, args.threads, Path(tmp))
        where = f"{describe_device(device)}, torch {torch.__version__}, Trainer defaults, sample corpus"
        line = (f"watching: {watch['watched_ms_per_step']} ms/step vs {watch['plain_ms_per_step']} ms/step "
                f"unwatched = {watch['ratio']:.3f} (process CPU time: {watch['cpu_time_ratio']:.3f}); "
                f"inside the watched run, watching took "
                f"{100 * watch['watch_share_in_run']:.1f}% of the loop ({watch['steps']} steps, "
                f"grads every {watch['log_every']}, probes every {watch['probe_every']}; {where})")
        if args.watch_only:
            print(json.dumps({"where": where, "watch": watch}) if args.json else line)
            return 0
        print(line, file=sys.stderr)
    from transformers import AutoTokenizer

    from core.encoder.sources import resolve
    tok = AutoTokenizer.from_pretrained(str(resolve("minilm").folder))
    steps = args.steps or (100 if device.type == "cuda" else (8 if args.quick else 12))
    warmup = 2 if device.type == "cpu" else 10
    data = batches(tok, steps + warmup, args.batch_size, 128)
    refused = bf16_refusal(device)        # an AVX2-only CPU cannot run bf16 kernels: a row says so
    precisions = ["fp32"] + ([] if refused else ["bf16"])
    skipped = [{"model": "-", "precision": "bf16", "skipped": refused}] if refused else []
    sizes = dict(list(SIZES.items())[:1]) if args.quick else SIZES
    rows = []
    for name, (L, D, H, FF) in sizes.items():
        cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=128, dim=D, n_layers=L, n_heads=H,
                            hidden_dim=FF, norm=args.norm)
        built = {k: build(k, cfg, device) for k in ("ours", "torch")}
        for precision in precisions:
            # Alternate the two in rounds and keep each one's best: on a shared machine the
            # best round is the least disturbed one.
            best = {"ours": 0.0, "torch": 0.0}
            for _ in range(args.rounds):
                for k in ("ours", "torch"):
                    best[k] = max(best[k], time_steps(built[k], data, device, precision, warmup))
            ours, ref = best["ours"], best["torch"]
            rows.append({"model": name, "precision": precision, "ours_tokens_per_s": round(ours),
                         "torch_layer_tokens_per_s": round(ref), "ratio": round(ours / ref, 2)})
            print(f"  {name} {precision}: ours {ours:,.0f} tok/s, nn.TransformerEncoderLayer {ref:,.0f} tok/s",
                  file=sys.stderr, flush=True)
    rows += skipped
    mean_tokens = np.mean([int(a.sum()) / len(a) for _, a, _ in data])
    where = f"{describe_device(device)}, torch {torch.__version__}, batch {args.batch_size}, {args.norm}-norm, " \
            f"sample corpus (WordPiece, mean {mean_tokens:.1f} tokens/sentence)"
    if args.json:
        print(json.dumps({"where": where, "rows": rows, **({"watch": watch} if watch else {})}))
    else:
        print(f"\n{where}\n")
        print("| model | precision | ours (tokens/s) | nn.TransformerEncoderLayer (tokens/s) | ours / torch |")
        print("|---|---|---:|---:|---:|")
        for r in rows:
            if "skipped" in r:
                print(f"| {r['model']} | {r['precision']} | - | - | skipped: {r['skipped']} |")
                continue
            print(f"| {r['model']} | {r['precision']} | {r['ours_tokens_per_s']:,} | "
                  f"{r['torch_layer_tokens_per_s']:,} | {r['ratio']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
