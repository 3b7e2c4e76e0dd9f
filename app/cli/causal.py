"""`encoderscope attribute`, and the causal modes of `patch` (--sweep, --trace) and `ablate --cut`
(core/intervene/patch_sweep.py, trace.py, attribute.py, edges.py; docs/causal.md).

    encoderscope patch A B --sweep resid|heads|ffn [--mask-token WORD] [--json]
    encoderscope patch A [B] --trace WORDS [--noise S] [--samples N] [--seed N] [--mask-token WORD] [--json]
        (with B: the words' embeddings resampled from B at the same positions instead of noise)
    encoderscope attribute TEXT (--to OTHER | --mask-token WORD) --method ig|grad-x-input [--steps N]
                           [--baseline pad|zero] [--json]
    encoderscope ablate TEXT --cut 'L[.H]:Q>K' [--cut ...]    (quoted: the shell reads > as a redirection)

Layers and heads count from 1. No Qt here.
"""
from __future__ import annotations

import sys


def register(sub) -> None:
    from app.cli.options import add_model_options
    from core.names import ATTRIBUTION_METHODS as METHODS
    from core.names import IG_BASELINES as BASELINES
    from core.names import IG_STEPS as STEPS

    p = sub.add_parser("attribute", help="how much each input token drives a similarity or a masked word "
                                         "(integrated gradients, grad x input)")
    p.add_argument("text", metavar="TEXT", help="the sentence whose tokens are scored")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--to", metavar="OTHER", help="score the cosine of TEXT's vector with OTHER's")
    what.add_argument("--mask-token", metavar="WORD", help="score p(WORD) at TEXT's [MASK]")
    p.add_argument("--method", choices=METHODS, default="ig",
                   help="ig: integrated gradients from the baseline; grad-x-input: gradient times the "
                        "word embedding (default ig)")
    p.add_argument("--steps", type=int, default=STEPS, metavar="N",
                   help=f"integrated gradients: Gauss-Legendre nodes of the path integral (default {STEPS})")
    p.add_argument("--baseline", choices=BASELINES, default="pad",
                   help="integrated gradients: start from the [PAD] embedding (default) or zero vectors at "
                        "every token but [CLS], [SEP] and [MASK], which are kept ([UNK], a word of TEXT, is not)")
    add_model_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_attribute)


# Off a terminal (a log, a pipe) a long run says where it is at most this often, one line each.
OFF_TERMINAL_SECONDS = 10.0


def _progress(args, unit: str):
    """progress(done, total): redrawn in place on a terminal; off one, a line at most every
    OFF_TERMINAL_SECONDS (a 600-token sweep runs minutes). Quiet with --json."""
    import time
    last = [time.monotonic()]

    def show(done, total):
        if args.json:
            return
        if sys.stderr.isatty():
            print(f"\r{done}/{total} {unit}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif done < total and time.monotonic() - last[0] >= OFF_TERMINAL_SECONDS:
            last[0] = time.monotonic()
            print(f"{done}/{total} {unit}", file=sys.stderr, flush=True)
    return show


def cmd_attribute(args) -> int:
    from app.cli.options import emit_json
    from app.cli.truncation import truncation_said_once
    from core.encoder.backends import get_backend
    from core.errors import NoMLMHead
    from core.intervene.attribute import attribute

    backend = get_backend(args.model, args.backend, device=args.device, precision=args.precision)
    if args.mask_token is not None and not backend.has_mlm:
        raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so p({args.mask_token}) at a mask cannot be "
                        "attributed: attribute the similarity to another sentence instead (--to OTHER), or use "
                        "a model with one", fix={"kind": "train_mlm", "init": "minilm"})
    with truncation_said_once(backend, {"TEXT": args.text, "OTHER": args.to}):
        result = attribute(backend, args.text, args.method, other=args.to, word=args.mask_token,
                           steps=args.steps, baseline=args.baseline, pooling=args.pooling,
                           progress=_progress(args, "steps"))
    if args.json:
        emit_json({"model": backend.model_name, **result.to_dict()})
        return 0
    print(f"{backend.model_name}: {result.method} of {result.target} = {result.target_value:.6f}")
    scale = max(abs(result.attributions).max(), 1e-12)
    for token, a in zip(result.tokens, result.attributions):
        bar = "#" * round(20 * abs(a) / scale)
        print(f"  {token:>14} {a:+.6f} {'-' if a < 0 else '+'}{bar}")
    if result.baseline_value is not None:
        print(f"baseline ({result.baseline} at every token but the specials): f = {result.baseline_value:.6f}; "
              f"sum of attributions {result.attributions.sum():+.6f} vs f(x) - f(baseline) "
              f"{result.target_value - result.baseline_value:+.6f}: completeness gap {result.completeness_gap:.2e} "
              f"({result.relative_gap:.2%}, {result.steps} steps)")
    return 0


def cmd_patch_sweep(args, backend, pooling) -> int:
    from app.cli.options import emit_json
    from core.errors import InputError
    from core.intervene.patch_sweep import patch_sweep

    if args.b is None:
        raise InputError("a sweep patches from sentence B: encoderscope patch A B --sweep resid")
    if args.mask_token is not None:
        _need_mlm_for_target(backend)
    r = patch_sweep(backend, args.a, args.b, args.sweep, pooling, target=args.mask_token,
                    progress=_progress(args, "layers"))
    _vector_side_only(backend, args.a, args.json)
    if args.json:
        emit_json({"model": backend.model_name, "sweep": r.to_dict()})
        return 0
    print(f"A: {' '.join(r.tokens_a)}")
    print(f"B: {' '.join(r.tokens_b)}")
    print(f"cosine(A, B) {r.cosine_a_b:.4f}; each cell: the fraction of the way to B when that {r.site} "
          "site alone is patched from B")
    _grid(r.rows, r.cols, r.values)
    if r.delta_p is not None:
        print(f"change of p({r.target}) at the mask (A {r.p_a:.4f}, B {r.p_b:.4f}):")
        _grid(r.rows, r.cols, r.delta_p, signed=True)
    return 0


def cmd_patch_trace(args, backend, pooling) -> int:
    from app.cli.options import emit_json
    from core.errors import InputError
    from core.intervene.trace import causal_trace

    words = [w for w in args.trace.replace(",", " ").split() if w]
    if not words:
        raise InputError("--trace names the words to corrupt, e.g. --trace cat")
    if args.mask_token is not None:
        _need_mlm_for_target(backend)
    r = causal_trace(backend, args.a, words, noise=args.noise, samples=args.samples, seed=args.seed,
                     target=args.mask_token, pooling=pooling, progress=_progress(args, "batches"),
                     resample=args.b)
    _vector_side_only(backend, args.a, args.json)
    if args.json:
        emit_json({"model": backend.model_name, "trace": r.to_dict()})
        return 0
    print(f"tokens: {' '.join(r.tokens)}")
    corrupted = ", ".join(r.tokens[p] for p in r.corrupted)
    if r.resampled_from is not None:
        print(f"corrupted: {corrupted} (their word embeddings taken from {r.resampled_from!r} at the same positions)")
    else:
        print(f"corrupted: {corrupted} (Gaussian noise std {r.noise_std:.4f} = {r.noise_multiple:g} x the word "
              f"embeddings' std, {r.samples} samples, seed {r.seed})")
    print(f"cosine(corrupted, clean) {r.cosine_corrupted:.4f}; each cell: the share of the clean vector "
          "recovered when that hidden state alone is restored")
    _grid(r.rows, r.cols, r.recovered)
    _spread(r.recovered_se, r)
    if r.p_restored is not None:
        print(f"p({r.target}) at the mask: clean {r.p_clean:.4f}, corrupted {r.p_corrupted:.4f}; share recovered:")
        if r.p_recovered is None:
            print("  (none: the corruption leaves p as it was)")
        else:
            _grid(r.rows, r.cols, r.p_recovered)
            _spread(r.p_recovered_se, r)
    return 0


def _spread(se, r) -> None:
    """The standard error of each cell over the noise samples (what another --seed moves)."""
    if se is not None:
        print(f"+/- standard error over the {r.samples} noise samples (another --seed moves a cell by about this):")
        _grid(r.rows, r.cols, se)


def _need_mlm_for_target(backend) -> None:
    """--mask-token asks for p(WORD): refused, worded with the way out, without an MLM head."""
    from core.errors import NoMLMHead
    if not backend.has_mlm:
        raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so p(WORD) at the mask cannot be read: "
                        "leave out --mask-token (the sentence vector is still measured), or use a model with "
                        "one", fix={"kind": "train_mlm", "init": "minilm"})


def _vector_side_only(backend, text: str, quiet: bool) -> None:
    """A [MASK] on a model without a masked-LM head: the vector side ran; say what did not."""
    mask = backend.tokenizer.mask_token
    if not backend.has_mlm and mask and mask in text and not quiet:
        print(f"note: {backend.model_name} has no masked-LM head: the sentence vector was measured; p(token) "
              "at the [MASK] needs a model with one", file=sys.stderr)


def _grid(rows, cols, values, signed: bool = False) -> None:
    width = max(7, *(len(c) + 1 for c in cols))
    print(" " * 5 + "".join(f"{c[:width - 1]:>{width}}" for c in cols))
    for name, row in zip(rows, values):
        print(f"{name:>5}" + "".join(f"{v:>+{width}.3f}" if signed else f"{v:>{width}.3f}" for v in row))


def cuts_for(backend, text: str, cuts: list[str]):
    """The --cut options resolved against TEXT's tokens: a frozenset of edges.Cut."""
    from core.intervene.edges import parse_cut
    ids = backend.encode_ids([text])[0][0]
    tokens = backend.tokenizer.convert_ids_to_tokens(ids)
    return frozenset(parse_cut(c, tokens) for c in cuts)


def gradient_beside(args, backend, m) -> dict:
    """Michel's I_h for the importance map's metric (the shipped data: cmd_importance refused
    --store and recall first), and its Spearman with the measured drop."""
    import numpy as np

    from core.intervene.head_gradient import LOSSES, agreement, head_gradient_importance
    grads = head_gradient_importance(backend, args.metric, seed=args.seed)
    L, H = grads.shape
    return {"loss": LOSSES[args.metric], "is": "I_h = mean over examples of |dL/d gate_h|",
            "heads": {f"{l + 1}.{h + 1}": float(grads[l, h]) for l in range(L) for h in range(H)},
            "spearman_with_drop": agreement(grads, m.heads),
            "spearman_with_abs_drop": agreement(grads, np.abs(m.heads)), "values": np.round(grads, 8).tolist()}


def print_gradient(g: dict, m) -> None:
    import numpy as np
    grads = np.array(g["values"])
    order = np.argsort(-grads, axis=None, kind="stable")[:10]
    print(f"gradient head importance (Michel et al.; loss {g['loss']}): top heads, with their measured drop")
    for k in order:
        l, h = np.unravel_index(k, grads.shape)
        print(f"  head {l + 1}.{h + 1}: I_h {grads[l, h]:.5f}   drop {m.heads[l, h]:+.4f}")
    print(f"Spearman of I_h with the measured drop over all {grads.size} heads: {g['spearman_with_drop']:+.3f} "
          f"(with |drop|: {g['spearman_with_abs_drop']:+.3f}; I_h has no sign)")
