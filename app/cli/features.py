"""`encoderscope features ...`: sparse-autoencoder features of a model's hidden states
(core/features, docs/features.md), and `ablate TEXT --sae DIR --feature F / --steer F=+A`.

    encoderscope features train --corpus FILE_OR_STORE --out DIR [--model M] [--site L3.resid]
                                [--width N] [--k K] [--tokens N] [--seed N] [--held-out F]
    encoderscope features quality DIR --corpus FILE_OR_STORE [--max-sentences N]
    encoderscope features show DIR [F ...] [--word W] [--sort density|max|id] [--corpus FILE_OR_STORE]
    encoderscope features ablate DIR TEXT --feature F [--steer F=+A] [--store S [-k K]]
    encoderscope features steer DIR TEXT --steer F=+A [--store S [-k K]]
    encoderscope features sweep DIR A B [--top N]

Every command takes --json. The model is the SAE's (its meta) unless --model names another, which
must be the same weights. No Qt here.
"""
from __future__ import annotations

import shlex
import sys

DIGITS = 6


def register(sub) -> None:
    p = sub.add_parser("features", help="sparse-autoencoder features: train, measure, browse, switch off, steer")
    fsub = p.add_subparsers(dest="features_command", required=True, metavar="ACTION")

    t = fsub.add_parser("train", help="train a TopK sparse autoencoder on a model's activations at one site")
    _corpus_option(t, required=True)
    t.add_argument("--out", required=True, metavar="DIR",
                   help="the SAE's folder (the same folder again continues a stopped run)")
    t.add_argument("--site", default=None, metavar="L3.resid",
                   help="the residual stream after layer L, as `patch --site` names it (default: the middle layer)")
    t.add_argument("--width", type=int, default=None, metavar="N", help="features (default: 8 x the model's width)")
    t.add_argument("--k", type=int, default=32, metavar="K", help="features active per token (default 32)")
    t.add_argument("--tokens", type=int, default=1_000_000, metavar="N",
                   help="training tokens in all, epochs over the corpus as needed (default 1,000,000)")
    t.add_argument("--seed", type=int, default=0, help="seed of everything random (default 0)")
    t.add_argument("--lr", type=float, default=None, help="learning rate (default: 2e-4 x sqrt(16384 / width))")
    t.add_argument("--batch", type=int, default=4096, metavar="N", help="tokens per step (default 4096)")
    t.add_argument("--held-out", type=float, default=0.1, metavar="F",
                   help="fraction of the sentences kept apart for `features quality` (default 0.1)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    _model_options(t, default_note="default: minilm")
    t.set_defaults(func=cmd_train)

    q = fsub.add_parser("quality", help="how good an SAE is on held-out sentences, with intervals and floors")
    q.add_argument("sae", metavar="DIR", help="the SAE's folder")
    _corpus_option(q, required=True)
    q.add_argument("--max-sentences", type=int, default=2000, metavar="N",
                   help="held-out sentences measured at most (default 2000)")
    _model_options(q)
    q.set_defaults(func=cmd_quality)

    s = fsub.add_parser("show", help="browse features: top tokens in their sentences, density, vocabulary, labels")
    s.add_argument("sae", metavar="DIR", help="the SAE's folder")
    s.add_argument("feature", nargs="*", type=int, metavar="F", help="features to show in full")
    s.add_argument("--word", metavar="W", help="the features whose top examples are this word")
    s.add_argument("--sort", choices=("density", "max", "id"), default="density",
                   help="order of the feature list (default density)")
    s.add_argument("--limit", type=int, default=20, metavar="N", help="features listed (default 20)")
    s.add_argument("--examples", type=int, default=5, metavar="N", help="top examples shown per feature (default 5)")
    _corpus_option(s, required=False,
                   extra=" to build (or rebuild) the feature index over; needed the first time")
    _model_options(s)
    s.set_defaults(func=cmd_show)

    for name, help_text in (("ablate", "switch features off at their site and show what changes"),
                            ("steer", "add features at their site and show what changes")):
        a = fsub.add_parser(name, help=help_text)
        a.add_argument("sae", metavar="DIR", help="the SAE's folder")
        a.add_argument("text", metavar="TEXT", help="the sentence (or query)")
        add_edit_options(a, with_sae=False)
        a.add_argument("--store", metavar="S", help="also search the store S with TEXT and show which hits move "
                                                    "(the stored vectors stay as they are)")
        a.add_argument("-k", type=int, default=10, help="with --store: the hits compared (default 10)")
        _model_options(a)
        a.set_defaults(func=cmd_edit)

    # `ablate TEXT --sae DIR --feature F`: the features' options on `ablate` (app/cli/intervene.py,
    # registered before this module), and its command handing feature edits over to cmd_edit
    ablate = sub.choices["ablate"]
    add_edit_options(ablate)
    parts = ablate.get_default("func")
    ablate.set_defaults(func=lambda args: cmd_ablate_features(args) if args.sae or args.feature or args.steer
                        else parts(args))

    w = fsub.add_parser("sweep", help="which of A's features, set to B's values, move A toward B")
    w.add_argument("sae", metavar="DIR", help="the SAE's folder")
    w.add_argument("a", metavar="A", help="the sentence that runs")
    w.add_argument("b", metavar="B", help="the sentence whose feature values are put in")
    w.add_argument("--top", type=int, default=10, metavar="N", help="features listed (default 10)")
    _model_options(w)
    w.set_defaults(func=cmd_sweep)


def add_edit_options(p, with_sae: bool = True) -> None:
    """--feature F / --steer F=+A (and --sae DIR for `ablate`)."""
    if with_sae:
        p.add_argument("--sae", metavar="DIR",
                       help="an SAE folder (encoderscope features train): --feature and --steer act on its features")
    p.add_argument("--feature", action="append", metavar="F",
                   help="SAE features switched off at the SAE's site (comma-separated or repeated)")
    p.add_argument("--steer", action="append", metavar="F=+A",
                   help="add A times feature F's direction at every token at the SAE's site (e.g. 12=+4); repeatable")


def _corpus_option(p, required: bool, extra: str = "") -> None:
    p.add_argument("--corpus", required=required, metavar="FILE_OR_STORE",
                   help="the sentences: a .txt/.csv/.jsonl file or a store" + (extra or ""))
    p.add_argument("--encoding", dest="corpus_encoding", metavar="NAME",
                   help="the corpus file's text encoding when it is not UTF-8")


def _model_options(p, default_note: str = "default: the SAE's") -> None:
    p.add_argument("--model", default=None, help=f"the model ({default_note})")
    p.add_argument("--device", default=None, help="auto, cpu, cuda or mps (default: $ENCODERSCOPE_DEVICE or auto)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16"), default=None,
                   help="the model's precision (default: $ENCODERSCOPE_PRECISION or auto)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _backend(args, model: str):
    from core.encoder.backends import get_backend
    return get_backend(model, "scratch", device=args.device, precision=args.precision)


def _sentences(args) -> list[str]:
    from index.corpus.door import read_training_corpus
    return read_training_corpus(args.corpus, encoding=args.corpus_encoding)


def _open_sae(args, folder):
    """(sae, meta, backend): the SAE in ``folder`` and its model (or --model, checked)."""
    from core.errors import InputError
    from core.features.saved import check_model, load_sae
    try:
        sae, meta = load_sae(folder)
    except InputError as e:
        if "train one" in str(e):
            out = shlex.quote(str(folder))
            raise InputError(f"{e} (encoderscope features train --corpus FILE --out {out})") from None
        raise
    backend = _backend(args, args.model or meta.model)
    check_model(meta, backend)
    return sae.to(backend.device), meta, backend


def _r(x):
    return None if x is None else round(float(x), DIGITS)


def cmd_train(args) -> int:
    import threading

    from app.cli.options import emit_json
    from core.features.train import TrainConfig, train_sae
    cfg = TrainConfig(site=args.site, width=args.width, k=args.k, tokens=args.tokens, seed=args.seed, lr=args.lr,
                      batch=args.batch, held_out_fraction=args.held_out)
    sentences = _sentences(args)
    backend = _backend(args, args.model or "minilm")
    stop = threading.Event()
    bar = None
    if not args.no_progress and not args.json:
        from tqdm import tqdm
        bar = tqdm(total=args.tokens, unit="tok", unit_scale=True, file=sys.stderr, dynamic_ncols=True, desc="SAE")

    def progress(done, total, note):
        if bar is not None:
            bar.update(done - bar.n)
            bar.set_postfix_str(note, refresh=False)
    try:
        result = _with_stop_signals(stop, lambda: train_sae(backend, sentences, cfg, args.out, progress, stop.is_set))
    finally:
        if bar is not None:
            bar.close()
    m = result.meta
    out = {"folder": str(result.folder), "site": m.site, "model": m.model, "width": m.width, "k": m.k,
           "tokens_trained": result.tokens_trained, "steps": result.steps, "train_normalised_mse": _r(result.train_fvu),
           "dead_fraction": _r(result.dead_fraction), "seconds": round(result.seconds, 1),
           "resumed": result.resumed, "finished": result.finished, "sentences": len(sentences)}
    if args.json:
        emit_json(out)
        return 0 if result.finished else 130
    folder, corpus = shlex.quote(str(result.folder)), shlex.quote(args.corpus)
    state = "trained" if result.finished else "stopped (run the same command again to continue)"
    print(f"SAE {state}: {m.width} features, k {m.k}, at {m.site} of {m.model}; {result.tokens_trained:,} tokens "
          f"in {result.steps:,} steps, {result.seconds:.0f} s; training normalised MSE {result.train_fvu:.3f}, "
          f"dead {result.dead_fraction:.1%}")
    print(f"next: encoderscope features quality {folder} --corpus {corpus}")
    print(f"      encoderscope features show {folder} --corpus {corpus}")
    return 0 if result.finished else 130


def _with_stop_signals(stop, run):
    """Ctrl-C (and SIGTERM) set ``stop``: the run saves and returns; a second Ctrl-C aborts."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return run()
    from core.files.platform_os import stop_signals

    def on_stop(signum, frame):
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("stopping after this step and saving (Ctrl-C again to abort without saving) ...", file=sys.stderr)
    previous = {sig: signal.signal(sig, on_stop) for sig in stop_signals()}
    try:
        return run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def cmd_quality(args) -> int:
    from app.cli.options import emit_json
    from core.features.quality import evaluate_sae
    sae, meta, backend = _open_sae(args, args.sae)
    report = evaluate_sae(backend, sae, meta, _sentences(args), max_sentences=args.max_sentences)
    if args.json:
        emit_json(report.to_dict())
        return 0
    print(f"SAE at {report.site}, measured on {report.n_sentences:,} {report.split} sentences "
          f"({report.n_tokens:,} tokens); 95% intervals from a bootstrap over sentences")
    print(f"  {'':<20} {'value':>8} {'95% interval':>19} {'site = mean':>12} {'site = 0':>10}  better")

    def f(x):
        return "-" if x is None else f"{x:.4f}"
    for row in report.rows:
        print(f"  {row.name:<20} {row.value:>8.4f} {interval_text(row):>19} {f(row.floors['mean']):>12} "
              f"{f(row.floors['zero']):>10}  {row.better}")
    dead, half = report.row("dead fraction"), report.row("dead at n/2 tokens")
    if dead.bound is not None:
        print(f"dead fraction: each feature silent on these {report.n_tokens:,} tokens fires on fewer than "
              f"{dead.bound:.2g} of such tokens (95%, the rule of three: 3/{report.n_tokens:,}); no bootstrap "
              "interval (a resample sees fewer distinct tokens, so more silent features)")
    print(f"dead at n/2 tokens: {half.meaning}")
    return 0


def interval_text(row) -> str:
    """A quality row's interval column: [lo, hi], the dead fraction's bound ("< b each"), or '-'."""
    if row.interval is not None:
        return f"[{row.interval[0]:.4f}, {row.interval[1]:.4f}]"
    return "-" if row.bound is None else f"< {row.bound:.2g} each"


def _index(args, sae, meta, backend):
    from core.errors import InputError
    from core.features.browse import FeatureIndex, build_feature_index
    if args.corpus:
        return build_feature_index(backend, sae, meta, _sentences(args), args.sae)
    try:
        return FeatureIndex.load(args.sae)
    except InputError as e:
        raise InputError(f"{e}; give the sentences to browse with "
                         f"`encoderscope features show {shlex.quote(args.sae)} --corpus FILE`") from None


def cmd_show(args) -> int:
    from app.cli.options import emit_json
    sae, meta, backend = _open_sae(args, args.sae)
    index = _index(args, sae, meta, backend)
    if args.word:
        found = index.find(args.word)
        if args.json:
            emit_json({"word": args.word, "features": [{"feature": f, "max_activation": _r(a),
                                                         "label": index.label(f)} for f, a in found]})
            return 0
        if not found:
            print(f"no feature has {args.word!r} among its top {len(index.example_tokens(0)) or 12} examples")
        for f, a in found:
            print(f"  feature {f:>5}  {a:8.3f}  {index.label(f)}")
        return 0
    if not args.feature:
        ids = index.features(sort=args.sort)[:args.limit]
        rows = [{"feature": f, "label": index.label(f), "density": _r(index.density(f)),
                 "max_activation": _r(index.summary(f).max_activation)} for f in ids]
        if args.json:
            emit_json({"site": meta.site, "width": meta.width, "live": len(index.features()), "features": rows})
            return 0
        print(f"{len(index.features()):,} of {meta.width:,} features fire on the corpus ({index.n_tokens:,} tokens); "
              f"by {args.sort}:")
        for r in rows:
            print(f"  feature {r['feature']:>5}  density {r['density']:.4f}  max {r['max_activation']:8.3f}  "
                  f"{r['label']}")
        return 0
    summaries = [index.summary(f) for f in args.feature]
    if args.json:
        emit_json({"features": [_summary_dict(s, args.examples) for s in summaries]})
        return 0
    for s in summaries:
        print(f"feature {s.feature}: {s.label}  (density {s.density:.4f}, max {s.max_activation:.3f})")
        for e in s.top_examples[:args.examples]:
            shown = " ".join(f"[[{t}]]" if i == e.position else t for i, t in enumerate(e.tokens[1:-1], 1))
            print(f"  {e.activation:8.3f}  {shown}")
        print("  aligned with: " + ", ".join(f"{t} {c:.2f}" for t, c in s.vocab_aligned))
        if s.promoted is not None:
            print("  promotes:     " + ", ".join(f"{t} {v:+.2f}" for t, v in s.promoted))
    return 0


def _summary_dict(s, examples: int) -> dict:
    edges, counts = s.histogram
    return {"feature": s.feature, "label": s.label, "density": _r(s.density), "max_activation": _r(s.max_activation),
            "top_examples": [{"sentence_id": e.sentence_id, "sentence": e.sentence, "tokens": e.tokens,
                              "position": e.position, "activation": _r(e.activation),
                              "token_activations": [_r(a) for a in e.token_activations]}
                             for e in s.top_examples[:examples]],
            "histogram": {"bin_edges": [_r(x) for x in edges], "counts": [int(c) for c in counts]},
            "vocab_aligned": [[t, _r(c)] for t, c in s.vocab_aligned],
            "promoted": None if s.promoted is None else [[t, _r(v)] for t, v in s.promoted]}


def parse_features(values) -> frozenset:
    from core.errors import InputError
    out = set()
    for v in values or []:
        for part in str(v).split(","):
            if part.strip():
                if not part.strip().isdigit():
                    raise InputError(f"--feature takes feature numbers (e.g. --feature 12,40), not {part.strip()!r}")
                out.add(int(part))
    return frozenset(out)


def parse_steer(values) -> dict:
    """["12=+4", "40=-1.5"] -> {12: 4.0, 40: -1.5}."""
    import math

    from core.errors import InputError
    out = {}
    for v in values or []:
        f, eq, a = str(v).partition("=")
        try:
            alpha = float(a)
            ok = eq and f.strip().isdigit() and math.isfinite(alpha)
        except ValueError:
            ok = False
        if not ok:
            raise InputError(f"--steer takes FEATURE=STRENGTH (e.g. --steer 12=+4), not {v!r}")
        out[int(f)] = alpha
    return out


def cmd_edit(args) -> int:
    """`features ablate|steer DIR TEXT` and `ablate TEXT --sae DIR`: the edit's effect on TEXT's
    sentence vector and its tokens' features, and with --store which hits move."""
    import numpy as np

    from app.cli.options import emit_json
    from core.errors import InputError
    from core.features.browse import token_features
    from core.features.edit import FeatureEdit, features_edited, sentence_vectors
    ablate, steer = parse_features(args.feature), parse_steer(args.steer)
    if not ablate and not steer:
        raise InputError("nothing to change: give --feature F (switch it off) or --steer F=+A "
                         f"(e.g. encoderscope features ablate {shlex.quote(args.sae)} TEXT --feature 12)")
    sae, meta, backend = _open_sae(args, args.sae)
    edit = FeatureEdit(sae, meta.site, ablate=ablate, steer=steer)
    before = sentence_vectors(backend, [args.text])[0]
    after = sentence_vectors(backend, [args.text], edit)[0]
    cosine = float(np.dot(before.astype(np.float64), after.astype(np.float64)))
    tokens = token_features(backend, sae, meta, args.text, top=3)
    fires = {f: [t for t, feats in tokens if any(g == f for g, _ in feats)] for f in ablate}
    ranking = None
    if args.store:
        from index.corpus.intervene_ranking import edited_ranking_changes
        ranking = edited_ranking_changes(args.store, backend, args.text, lambda: features_edited(backend, edit),
                                         edit.describe(), k=args.k)
    if args.json:
        out = {"edit": edit.describe(), "site": meta.site, "cosine": cosine,
               "vector_before": [_r(x) for x in before], "vector_after": [_r(x) for x in after],
               "tokens": [{"token": t, "features": [[f, _r(a)] for f, a in feats]} for t, feats in tokens]}
        if ranking is not None:
            out["ranking"] = {"store": args.store, **ranking.to_dict()}
        emit_json(out)
        return 0
    print(f"{edit.describe()}")
    for f in sorted(ablate):
        where = ", ".join(fires[f]) if fires[f] else "no token of TEXT among its top 3 (it may still fire weakly)"
        print(f"  feature {f} is among the top 3 features of: {where}")
    print(f"sentence vector: cosine with the original {cosine:.6f}")
    if ranking is not None:
        from app.cli.intervene import print_ranking
        print_ranking(ranking, args.store)
    return 0


def cmd_ablate_features(args) -> int:
    """`ablate TEXT --sae DIR --feature F / --steer F=+A`: cmd_edit, refusing parts of the
    encoder in the same call (one kind of edit at a time)."""
    from core.errors import InputError
    if not args.sae:
        raise InputError("--feature and --steer act on an SAE's features: give its folder with --sae DIR "
                         "(train one with encoderscope features train --corpus FILE --out DIR)")
    parts = [f"--{n.replace('_', '-')}" for n in ("heads", "ffn", "attn_off", "skip_layer", "cut", "mask_token")
             if getattr(args, n, None)]
    parts += [f"--{n.replace('_', '-')}" for n in ("no_positions", "shuffle_positions", "no_scale", "mean_ablation")
              if getattr(args, n, False)]
    if getattr(args, "temperature", 1.0) != 1.0:
        parts.append("--temperature")
    if parts:
        raise InputError(f"features and parts of the encoder are edited one kind at a time: leave out "
                         f"{', '.join(parts)}, or --sae/--feature/--steer")
    return cmd_edit(args)


def cmd_sweep(args) -> int:
    from app.cli.options import emit_json
    from core.features.edit import features_sweep
    sae, meta, backend = _open_sae(args, args.sae)
    sweep = features_sweep(backend, sae, meta, args.a, args.b)
    top = sweep.effects[:args.top]
    if args.json:
        emit_json({**sweep.to_dict(), "effects": [e.__dict__ for e in top]})
        return 0
    whole = "-" if sweep.all_features is None else f"{sweep.all_features:.1%}"
    print(f"A's features set to B's ({sweep.alignment}), one at a time, at {meta.site}; "
          f"all at once: {whole} of the way to B")
    print(f"  {'feature':>7} {'in A':>7} {'in B':>7} {'toward B':>9}")
    for e in top:
        toward = "-" if e.toward_b is None else f"{e.toward_b:.1%}"
        print(f"  {e.feature:>7} {e.value_a:>7.3f} {e.value_b:>7.3f} {toward:>9}")
    return 0
