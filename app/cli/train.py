"""`encoderscope train`: train the from-scratch encoder from the command line.

    encoderscope train --corpus assets/sample_corpus.txt --out runs/tiny --steps 500
    encoderscope train --corpus notes.txt --out runs/minilm-mlm --init minilm --steps 300
    encoderscope train --resume runs/tiny --steps 1000          # go on to step 1000
    encoderscope train --corpus notes.txt --out runs/clm --objective clm   # next token, causal mask
    encoderscope train --corpus notes.txt --out runs/ap --objective simcse --pooling attention

A tqdm bar on stderr while it runs; evaluations as lines above the bar; the last line on stdout
is a JSON summary. With --json, every event the trainer emits (core/train/trainer.py, EVENT KINDS: status,
start, step, grads, eval, probe, checkpoint, done) is one JSON line on stdout instead, and no bar;
the last line is the "done" event, which is the summary. The same events are in OUT/metrics.jsonl.
Ctrl-C stops at the next step and saves a checkpoint first (exit code 130);
a second Ctrl-C aborts at once.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from core.errors import EncoderscopeError

EXIT_INTERRUPTED = 130


def register(subparsers) -> argparse.ArgumentParser:
    from core.names import ATTENTIONS, POOLINGS
    from core.train.config import OBJECTIVES, TrainConfig

    d = TrainConfig()
    p = subparsers.add_parser(
        "train", help="train the from-scratch encoder (masked-LM, next-token and/or contrastive)",
        description="Train the from-scratch encoder on a corpus. The output folder is a model "
                    "folder: use it with --model OUT in every command. Options left out take "
                    "their defaults, or with --resume the values the checkpoint was trained with.")
    g = p.add_argument_group("data and output")
    g.add_argument("--corpus", metavar="FILE_OR_STORE",
                   help="a .txt (one sentence per line, or prose), .csv/.tsv (a 'text' column), "
                        ".jsonl ('text' field) file, or a store folder")
    g.add_argument("--encoding", dest="corpus_encoding", metavar="NAME",
                   help="the corpus file's text encoding when it is not UTF-8, e.g. latin-1, cp1252, "
                        "utf-16 (default: UTF-8, or what a byte-order mark says)")
    g.add_argument("--out", metavar="DIR", help="output folder: checkpoints are written here")
    g.add_argument("--resume", metavar="DIR", help="continue the run saved in this checkpoint folder "
                                                   "(--out defaults to it)")
    g.add_argument("--heldout", type=float, help=f"share held out for evaluation (default {d.heldout})")
    g.add_argument("--eval-pairs", metavar="TSV",
                   help="scored pairs (two sentence columns and a 0-5 score, as `encoderscope eval --pairs` "
                        "reads; e.g. the shipped assets/eval_pairs.tsv): Spearman at each evaluation")
    g.add_argument("--pairs", metavar="TSV", help="paraphrase pairs (columns a, b, topic) to score at "
                                                  "each evaluation: cosine of pairs vs unrelated pairs")
    g.add_argument("--max-sentences", type=int, help="read at most this many sentences")
    g.add_argument("--overwrite", action="store_true", default=None,
                   help="replace a checkpoint already in --out")
    g = p.add_argument_group("what to train")
    g.add_argument("--objective", choices=OBJECTIVES,
                   help="masked-LM, contrastive (SimCSE), MLM then SimCSE, or next-token prediction "
                        f"(clm: needs --attention causal, its default there) (default {d.objective})")
    g.add_argument("--pooling", choices=POOLINGS,
                   help="the sentence vector SimCSE trains and the model embeds with by default; "
                        "attention: a learned query vector weighs the tokens (SimCSE objectives) "
                        f"(default {d.pooling})")
    g.add_argument("--attention", choices=ATTENTIONS,
                   help="which tokens each token attends to: all of them, or (causal) itself and the "
                        f"ones before it (default {d.attention}; causal for --objective clm)")
    g.add_argument("--init", metavar="fresh|minilm|FOLDER",
                   help="random weights, the packaged minilm (a fresh LM head is added for MLM and clm), "
                        f"or a model folder (default {d.init})")
    g.add_argument("--tokenizer", choices=("word", "wordpiece"),
                   help="fresh only: word-level vocabulary built from the corpus, or minilm's "
                        f"WordPiece (default {d.tokenizer})")
    g.add_argument("--vocab-size", type=int, help=f"word tokenizer: most words kept (default {d.vocab_size})")
    g.add_argument("--min-frequency", type=int,
                   help=f"word tokenizer: rarer words become [UNK] (default {d.min_frequency})")
    g = p.add_argument_group("architecture (fresh only)")
    g.add_argument("--layers", type=int, help=f"encoder blocks (default {d.layers})")
    g.add_argument("--dim", type=int, help=f"model width (default {d.dim})")
    g.add_argument("--heads", type=int, help=f"attention heads (default {d.heads})")
    g.add_argument("--ffn", type=int, help=f"feed-forward inner width (default {d.ffn})")
    g.add_argument("--positions", choices=("learned", "sinusoidal"), help=f"(default {d.positions})")
    g.add_argument("--norm", choices=("pre", "post"), help=f"LayerNorm placement (default {d.norm})")
    g.add_argument("--dropout", type=float, help=f"(default {d.dropout})")
    g.add_argument("--max-length", type=int, help=f"tokens per training sentence (default {d.max_length})")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", type=int, help=f"optimizer steps in all (default {d.steps})")
    g.add_argument("--batch-size", type=int, help=f"sentences per step (default {d.batch_size})")
    g.add_argument("--lr", type=float,
                   help="peak learning rate (default: 5e-4 fresh, 5e-5 imported, 2e-4 imported + a new MLM head)")
    g.add_argument("--warmup", type=float,
                   help=f"warm-up: share of steps, or a step count if >= 1 (default {d.warmup})")
    g.add_argument("--weight-decay", type=float, help=f"(default {d.weight_decay})")
    g.add_argument("--grad-clip", type=float, help=f"max gradient norm, 0 = off (default {d.grad_clip})")
    g.add_argument("--mask-prob", type=float, help=f"MLM: share of tokens picked (default {d.mask_prob})")
    g.add_argument("--temperature", type=float, help=f"SimCSE softmax temperature (default {d.temperature})")
    g.add_argument("--mlm-fraction", type=float, help=f"mlm+simcse: share of steps for MLM (default {d.mlm_fraction})")
    g.add_argument("--seed", type=int, help=f"(default {d.seed})")
    g = p.add_argument_group("running")
    g.add_argument("--device", help="auto, cpu, cuda (default auto: CUDA when present)")
    g.add_argument("--precision", choices=("auto", "fp32", "bf16"),
                   help="auto: bf16 autocast where the device supports it, else fp32 (default auto)")
    g.add_argument("--threads", type=int, help="CPU threads (default: torch's; 1 is fastest for tiny models)")
    g.add_argument("--eval-every", type=int, help="evaluate every N steps (default: steps/20)")
    g.add_argument("--eval-sentences", type=int, help=f"held-out sentences evaluated (default {d.eval_sentences})")
    g.add_argument("--checkpoint-every", type=int, help="save every N steps (default: at the end only)")
    g.add_argument("--log-every", type=int, help=f"(default {d.log_every})")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("--json", action="store_true",
                   help="every event as one JSON line on stdout (kinds: status, start, step, grads, eval, "
                        "probe, checkpoint, done; fields in core/train/trainer.py's EVENT KINDS), no progress bar; "
                        "the last line is the done event (the summary)")
    g = p.add_argument_group("watching the run (OUT/metrics.jsonl and OUT/snapshots/)")
    g.add_argument("--no-watch", dest="watch", action="store_false", default=None,
                   help="no gradient-flow or probe events (watching costs under 10%% of a step)")
    g.add_argument("--probe-every", type=int,
                   help="probe the model every N steps (default 0 = auto: about 30 probes per run, "
                        "at least 25 steps apart)")
    g.add_argument("--probe-sentence", metavar="TEXT",
                   help="sentence whose attention (every layer x head) is kept at each probe "
                        "(default: the first held-out sentence with no [UNK])")
    g.add_argument("--probe-set", metavar="FILE",
                   help="sentences whose pairwise cosines are kept at each probe: one per line (.txt) or "
                        "a pairs file (.tsv/.csv, columns a, b) (default: a few of the shipped paraphrase pairs)")
    p.set_defaults(func=cmd_train)
    return p


def config_from_args(args):
    from dataclasses import fields, replace

    from core.train.config import TrainConfig

    names = {f.name for f in fields(TrainConfig)} - {"resume"}
    given = {k: v for k, v in vars(args).items() if k in names and v is not None}
    if getattr(args, "probe_set", None):
        from core.train.watch import read_probe_set
        given["probe_set"] = tuple(read_probe_set(args.probe_set))
    if given.get("objective") == "clm" and "attention" not in given:
        given["attention"] = "causal"        # next-token prediction is only honest under the causal mask
    if args.resume:
        return TrainConfig.from_checkpoint(args.resume, **given)
    missing = [f"--{n}" for n in ("corpus", "out") if not given.get(n)]
    if missing:
        raise EncoderscopeError(f"train needs {' and '.join(missing)} (or --resume DIR)")
    return replace(TrainConfig(), **given)


def cmd_train(args) -> int:
    from core.train.evaluation import describe_eval
    from core.train.trainer import Trainer
    from index.corpus.door import read_training_corpus

    cfg = config_from_args(args)
    cancel = threading.Event()
    bar = None
    as_json = getattr(args, "json", False)
    show = not args.no_progress and not as_json

    def progress(ev):
        nonlocal bar
        kind = ev["kind"]
        if as_json:
            print(json.dumps(ev), flush=True)
            return
        if kind == "status":
            _note(bar, ev["message"])
        elif kind == "start":
            _note(bar, f"training {ev['params']:,} parameters (vocabulary {ev['vocab_size']:,}) on "
                       f"{ev['train_sentences']:,} sentences, {ev['heldout_sentences']:,} held out; "
                       f"device {ev['device']}, precision {ev['precision']}")
            if show:
                from tqdm import tqdm
                bar = tqdm(total=ev["total"], initial=ev["step"], unit="step", file=sys.stderr,
                           dynamic_ncols=True, desc=cfg.objective)
        elif kind == "step" and bar is not None:
            bar.update(ev["step"] - bar.n)
            bar.set_postfix(loss=f"{ev['loss']:.3f}", lr=f"{ev['lr']:.1e}",
                            tok_s=f"{ev['tokens_per_s']:,.0f}", refresh=False)
        elif kind == "eval":
            _note(bar, describe_eval(ev))
        elif kind == "checkpoint":
            _note(bar, f"checkpoint at step {ev['step']}: {ev['path']}")

    previous = {}
    if threading.current_thread() is threading.main_thread():
        def on_stop(signum, frame):
            # SIGTERM (kill, a shutdown, a job scheduler) saves as Ctrl-C does
            if cancel.is_set():
                raise KeyboardInterrupt
            cancel.set()
            what = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            _note(bar, f"{what}: stopping after this step and saving a checkpoint (Ctrl-C "
                       "again to abort without saving) ...")
        from core.files.platform_os import stop_signals
        for sig in stop_signals():
            previous[sig] = signal.signal(sig, on_stop)
    try:
        summary = Trainer(cfg, read_corpus=read_training_corpus).run(progress=progress, cancel=cancel)
    finally:
        if bar is not None:
            bar.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not as_json:               # with --json the "done" event was the last line
        print(json.dumps(summary), flush=True)
    return EXIT_INTERRUPTED if summary["cancelled"] else 0


def _note(bar, message: str) -> None:
    if bar is not None:
        bar.write(message, file=sys.stderr)
    else:
        print(message, file=sys.stderr, flush=True)
