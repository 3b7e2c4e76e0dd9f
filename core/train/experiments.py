"""The teaching notebook's exercises as experiments: each a queue of training runs that differ in
one setting only (same data, seed and steps), run one after another and then compared.

    exp = EXPERIMENTS["norm"]
    result = run_experiment(exp, TrainConfig(corpus="assets/sample_corpus.txt", out="lab", steps=300))
    result["comparison"]["differs"]          # ["norm", "warmup"]: the grid's two settings

The experiments are data (``EXPERIMENTS``); ``experiment_configs`` turns one into the runs'
TrainConfigs and proves, by diffing them, that they differ in nothing but the named setting and
the settings it implies (``IMPLIED_SETTINGS``: next-token prediction needs a causal mask).
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import InputError
from core.files.folder_lock import OutputFolderLock
from core.train.runs import compare_runs, differing_settings

# A setting's value that forces others: a run set to the key's value also gets these settings.
IMPLIED_SETTINGS: dict[tuple[str, object], dict] = {
    ("objective", "clm"): {"attention": "causal"},   # next-token prediction must not see the next token
}


@dataclass(frozen=True)
class Variant:
    label: str          # how the run is named in the lab and in its folder name
    settings: dict      # the values of the experiment's varied settings for this run


@dataclass(frozen=True)
class Experiment:
    name: str                      # the CLI's NAME (`encoderscope experiment NAME`)
    title: str                     # what it compares, in the lab's list
    varies: tuple[str, ...]        # the setting(s) its runs differ in (two for a grid)
    variants: tuple[Variant, ...]  # one run each, in this order
    look_at: str                   # the one sentence telling the learner what to look at
    base: dict = field(default_factory=dict)   # settings every run of it shares, over the user's
    grid: bool = False             # variants form a grid over `varies`: neighbours differ in one
    page: str = ""                 # not a training queue: the lab page that does it instead
    compare: str = "eval.heldout_loss"   # the evaluation series its comparison shows first (core.train.runs.curves)

    @property
    def runnable(self) -> bool:
        return not self.page


def _one(name: str, values, labels=None) -> tuple[Variant, ...]:
    labels = labels or [f"{name} {v}" for v in values]
    return tuple(Variant(label, {name: v}) for label, v in zip(labels, values))


def _grid(name_a: str, values_a, name_b: str, values_b, label: Callable) -> tuple[Variant, ...]:
    return tuple(Variant(label(a, b), {name_a: a, name_b: b})
                 for a, b in itertools.product(values_a, values_b))


EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment(
        "norm", "Pre-norm vs post-norm, each with and without warm-up (a 2 × 2 grid)",
        ("norm", "warmup"),
        _grid("norm", ("pre", "post"), "warmup", (0.06, 0.0),
              lambda n, w: f"{n}-norm, {'warm-up' if w else 'no warm-up'}"),
        "Training stability: compare the first steps' loss and gradient norms — post-norm (the "
        "original BERT) is the one said to need warm-up, more so the deeper the model.",
        grid=True),
    Experiment(
        "positions", "Learned vs sinusoidal positions", ("positions",),
        _one("positions", ("learned", "sinusoidal"), ["learned positions", "sinusoidal positions"]),
        "Word order: compare the held-out loss — the fixed sinusoidal table needs no training, "
        "the learned one must learn each position from the data."),
    Experiment(
        "objective", "Masked-LM (denoising) vs next-token (causal) vs SimCSE", ("objective",),
        _one("objective", ("mlm", "clm", "simcse"),
             ["masked-LM", "next-token (causal)", "SimCSE"]),
        "Embedding quality: compare the Spearman on the shipped scored pairs, pair_cosine with "
        "unrelated_cosine (paraphrases close, unrelated sentences apart) and the anisotropy — the "
        "losses are not comparable across objectives.",
        base={"pairs": "<paraphrase pairs>", "eval_pairs": "<scored pairs>"}, compare="eval.spearman"),
    Experiment(
        "pooling", "Pooling: [CLS] / mean / max / attention (a learned query)", ("pooling",),
        _one("pooling", ("cls", "mean", "max", "attention")),
        "Sentence vectors: all four train contrastively and are scored on the same paraphrase and scored "
        "pairs — compare the Spearman, and pair_cosine against unrelated_cosine.",
        base={"objective": "simcse", "pairs": "<paraphrase pairs>", "eval_pairs": "<scored pairs>"},
        compare="eval.spearman"),
    Experiment(
        "width", "Model width (dim)", ("dim",), _one("dim", (32, 64, 128)),
        "Capacity: compare the held-out loss — wider models fit more, and cost more per step."),
    Experiment(
        "heads", "Attention heads", ("heads",), _one("heads", (1, 2, 4, 8)),
        "Same width split over more heads: compare the held-out loss (and in the Run page, "
        "how the heads' attention differs)."),
    Experiment(
        "layers", "Depth (encoder blocks)", ("layers",), _one("layers", (1, 2, 4)),
        "Depth: compare the held-out loss and the gradient norms of the first layers."),
    Experiment(
        "whitening", "Whitening and anisotropy (BERT-whitening of any model's vectors)", (),
        (), "Anisotropy before and after whitening, and its effect on evaluation.",
        page="Evaluate"),
)}

PAIRS_PLACEHOLDER = "<paraphrase pairs>"
SCORED_PAIRS_PLACEHOLDER = "<scored pairs>"   # the shipped evaluation set: Spearman at each evaluation


def runnable_experiments() -> list[str]:
    return [name for name, e in EXPERIMENTS.items() if e.runnable]


def get_experiment(name: str) -> Experiment:
    exp = EXPERIMENTS.get(name)
    if exp is None:
        raise InputError(f"no experiment {name!r}: choose one of {', '.join(runnable_experiments())}")
    if not exp.runnable:
        raise InputError(f"{exp.title} is not a queue of training runs: it is the lab's {exp.page} page")
    return exp


def implied_by(settings: dict) -> dict:
    """The settings ``settings`` force (IMPLIED_SETTINGS), e.g. attention causal for objective clm."""
    implied: dict = {}
    for key, value in settings.items():
        implied.update(IMPLIED_SETTINGS.get((key, value), {}))
    return implied


def allowed_differences(exp: Experiment) -> set[str]:
    """The settings the runs of ``exp`` may differ in: the varied ones and those they imply."""
    allowed = set(exp.varies)
    for v in exp.variants:
        allowed |= set(implied_by(v.settings))
    return allowed


def _folder_name(label: str) -> str:
    keep = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in label.lower())
    return "-".join(part for part in keep.split("-") if part)


def experiment_settings(exp: Experiment, base: dict, pairs: str = "") -> list[tuple[str, dict]]:
    """(label, settings) of each run of ``exp``: ``base`` (a TrainConfig as a dict: the user's
    data, seed, steps and model) with the experiment's shared settings, then each variant's
    settings and what they imply; each run writes ``base["out"]/<label>``. Raises when the runs
    differ in anything else (the proof that the comparison is fair)."""
    if not exp.runnable:
        raise InputError(f"{exp.title} is not a queue of training runs: it is the lab's {exp.page} page")
    shared = {k: (pairs if v == PAIRS_PLACEHOLDER else v) for k, v in exp.base.items()}
    if shared.get("eval_pairs") == SCORED_PAIRS_PLACEHOLDER:
        from core.assets import eval_pairs
        shared["eval_pairs"] = str(eval_pairs())
    clash = sorted(set(shared) & set(exp.varies))
    if clash:
        raise ValueError(f"experiment {exp.name} both shares and varies {clash}")
    runs = []
    for v in exp.variants:
        settings = {**base, **shared, **v.settings, **implied_by(v.settings),
                    "out": str(Path(base.get("out", "")) / _folder_name(v.label))}
        runs.append((v.label, settings))
    check_single_setting(exp, [s for _, s in runs])
    return runs


def experiment_configs(exp: Experiment, base, pairs: str = "") -> list[tuple[str, object]]:
    """experiment_settings as TrainConfigs; a setting this build's TrainConfig does not have is
    an error (dropping it would train identical runs under different names)."""
    from dataclasses import fields

    known = {f.name for f in fields(type(base))}
    runs = []
    for label, settings in experiment_settings(exp, base.to_dict(), pairs):
        missing = sorted(set(settings) - known)
        if missing:
            raise InputError(f"the {exp.name} experiment needs the training setting(s) "
                             f"{', '.join(missing)}, which this version of encoderscope does not have")
        runs.append((label, type(base)(**settings)))
    return runs


def check_single_setting(exp: Experiment, configs: list[dict]) -> list[str]:
    """The settings ``configs`` differ in; raises ValueError if any is outside the experiment's
    varied and implied settings, or if two runs differ in no varied setting or (outside a grid)
    in more than one."""
    differs = differing_settings(configs)
    extra = sorted(set(differs) - allowed_differences(exp))
    if extra:
        raise ValueError(f"the runs of {exp.name} differ in {extra} beyond {sorted(exp.varies)}")
    for a, b in itertools.combinations(range(len(configs)), 2):
        varied = set(differing_settings([configs[a], configs[b]])) & set(exp.varies)
        if not varied:
            raise ValueError(f"runs {a + 1} and {b + 1} of {exp.name} do not differ in {list(exp.varies)}")
        if not exp.grid and len(varied) != 1:
            raise ValueError(f"runs {a + 1} and {b + 1} of {exp.name} differ in {sorted(varied)}")
    return differs


def run_experiment(exp: Experiment, base, pairs: str = "", progress: Callable[[dict], None] | None = None,
                   cancel=None, read_corpus: Callable | None = None) -> dict:
    """Train the runs of ``exp`` one after another, then compare them.

    ``progress`` gets ``{"kind": "experiment", "index", "count", "label", "out"}`` as each run
    begins, and every trainer event with ``"run"`` (its index) added. Setting ``cancel`` stops the
    run in progress (it saves its checkpoint) and starts no other. Returns ``{"experiment",
    "look_at", "cancelled", "completed": [labels], "comparison"}`` (comparison: compare_runs of
    the finished runs, None with fewer than two).
    """
    with OutputFolderLock(base.out, "experiment"):
        return _run_all(exp, base, pairs, progress, cancel, read_corpus)


def _run_all(exp: Experiment, base, pairs, progress, cancel, read_corpus) -> dict:
    from core.train.trainer import Trainer, cancel_check

    emit = progress or (lambda ev: None)
    is_cancelled = cancel_check(cancel)
    runs = experiment_configs(exp, base, pairs)
    finished: list[tuple[str, str]] = []
    cancelled = False
    for i, (label, cfg) in enumerate(runs):
        if is_cancelled():
            cancelled = True
            break
        emit({"kind": "experiment", "index": i, "count": len(runs), "label": label, "out": cfg.out})
        trainer = Trainer(cfg, read_corpus=read_corpus) if read_corpus else Trainer(cfg)
        summary = trainer.run(progress=lambda ev, i=i: emit({**ev, "run": i}), cancel=is_cancelled)
        if summary["cancelled"]:
            cancelled = True
            break
        finished.append((label, cfg.out))
    comparison = compare_runs([out for _, out in finished]) if len(finished) >= 2 else None
    if comparison is not None:
        for run, (label, _) in zip(comparison["runs"], finished):
            run["label"] = label
    return {"experiment": exp.name, "title": exp.title, "look_at": exp.look_at, "compare": exp.compare,
            "cancelled": cancelled,
            "completed": [label for label, _ in finished], "planned": [label for label, _ in runs],
            "comparison": comparison}
