"""`encoderscope experiment`: one of the lab's experiments — a queue of training runs that differ
in one setting only — run one after another and compared.

    encoderscope experiment norm --corpus assets/sample_corpus.txt --out lab/norm --steps 300
    encoderscope experiment layers --corpus notes.txt --out lab/depth --json

Each run writes OUT/<its label>; the runs share the data, seed, steps and every option given
here, and differ only in the experiment's setting (and what it implies). When all are done the
comparison is printed (`encoderscope runs compare` of the runs), with what to look at. Ctrl-C
stops the run in progress (it saves a checkpoint) and starts no other (exit code 130).
"""
from __future__ import annotations

import signal
import sys
import threading

EXIT_INTERRUPTED = 130
# The TrainConfig settings this command passes on (flag -> setting); the rest keep their defaults.
SHARED_OPTIONS = {"steps": int, "batch_size": int, "lr": float, "seed": int, "layers": int, "dim": int,
                  "heads": int, "ffn": int, "max_length": int, "max_sentences": int, "eval_every": int,
                  "log_every": int, "threads": int, "device": str}


def register(sub) -> None:
    from core.train.experiments import EXPERIMENTS, runnable_experiments

    names = runnable_experiments()
    p = sub.add_parser(
        "experiment", help="run one of the lab's experiments (runs that differ in one setting) and compare them",
        description="Run a queue of training runs that differ in one setting only, then compare them. "
                    "Experiments: " + "; ".join(f"{n}: {EXPERIMENTS[n].title}" for n in names) + ".")
    p.add_argument("name", metavar="NAME", help=", ".join(names))
    p.add_argument("--corpus", required=True, metavar="FILE_OR_STORE", help="training text, shared by every run")
    p.add_argument("--out", required=True, metavar="DIR", help="each run is written to DIR/<its label>")
    for name, kind in SHARED_OPTIONS.items():
        p.add_argument("--" + name.replace("_", "-"), type=kind, dest=name,
                       help="as for `encoderscope train` (the same for every run)")
    p.add_argument("--overwrite", action="store_true", help="replace runs already in DIR")
    p.add_argument("--json", action="store_true", help="print the result and comparison as JSON")
    p.set_defaults(func=cmd_experiment)


def base_config(args, exp):
    from core.errors import InputError
    from core.train.config import TrainConfig

    given = {k: getattr(args, k) for k in SHARED_OPTIONS if getattr(args, k) is not None}
    clash = sorted(set(given) & set(exp.varies))
    if clash:
        raise InputError(f"the {exp.name} experiment sets {', '.join(clash)} itself: leave out "
                         + ", ".join("--" + c.replace("_", "-") for c in clash))
    return TrainConfig(corpus=args.corpus, out=args.out, overwrite=args.overwrite, **given)


def refuse_used_folders(exp, base) -> None:
    """Before the first run: a run folder that already holds something is an error (without
    --overwrite), rather than a failure minutes later, after the runs before it."""
    from pathlib import Path

    from core.errors import InputError
    from core.train.experiments import experiment_configs

    if base.overwrite:
        return
    for _, cfg in experiment_configs(exp, base):
        out = Path(cfg.out).expanduser()
        if out.is_dir() and any(out.iterdir()):
            raise InputError(f"{out} already holds a run: choose another --out, or add --overwrite to replace "
                             "the experiment's runs")


def cmd_experiment(args) -> int:
    from core.files.folder_lock import OutputFolderLock
    from core.train.experiments import get_experiment

    exp = get_experiment(args.name)
    base = base_config(args, exp)
    with OutputFolderLock(base.out, "experiment"):   # before looking at its runs' folders
        refuse_used_folders(exp, base)
        return _run(args, exp, base)


def _run(args, exp, base) -> int:
    from app.cli.options import emit_json
    from app.cli.runs import print_comparison
    from core.assets import paraphrase_pairs
    from core.train.experiments import run_experiment
    from index.corpus.door import read_training_corpus

    cancel = threading.Event()

    def progress(ev):
        if ev["kind"] == "experiment":
            print(f"run {ev['index'] + 1}/{ev['count']}: {ev['label']} -> {ev['out']}", file=sys.stderr, flush=True)
        elif ev["kind"] == "done":
            loss = ev.get("train_loss")
            print(f"  {'cancelled' if ev['cancelled'] else 'done'} at step {ev['steps']}"
                  + (f", loss {loss:.3f}" if loss is not None else "") + f" ({ev['seconds']:.0f} s)",
                  file=sys.stderr, flush=True)

    previous = _stop_on_signals(cancel)
    try:
        result = run_experiment(exp, base, pairs=str(paraphrase_pairs()), progress=progress, cancel=cancel,
                                read_corpus=read_training_corpus)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    from app.cli.output import result_follows
    result_follows("the experiment's result", done=f"{len(result['completed'])} of {len(result['planned'])} "
                   f"runs saved under {args.out}")
    if args.json:
        emit_json(result)
    else:
        print(f"{result['title']}: {len(result['completed'])} of {len(result['planned'])} runs"
              + (" (cancelled)" if result["cancelled"] else ""))
        if result["comparison"] is not None:
            print_comparison(result["comparison"])
        print(f"look at: {result['look_at']}")
    return EXIT_INTERRUPTED if result["cancelled"] else 0


def _stop_on_signals(cancel: threading.Event) -> dict:
    """Ctrl-C / SIGTERM: stop after the current step (the run saves), a second one aborts."""
    previous = {}
    if threading.current_thread() is not threading.main_thread():
        return previous

    def on_stop(signum, frame):
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()
        print("stopping after this step and saving the run (again to abort) ...", file=sys.stderr, flush=True)
    from core.files.platform_os import stop_signals
    for sig in stop_signals():
        previous[sig] = signal.signal(sig, on_stop)
    return previous

