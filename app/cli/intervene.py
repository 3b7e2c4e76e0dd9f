"""`encoderscope ablate`, `patch` and `importance`: switch parts of the encoder off, patch them
from another sentence, and measure what each part is worth (core/intervene, docs/interventions.md).

    encoderscope ablate TEXT [--heads 3.5,4.1] [--ffn L] [--attn-off L] [--skip-layer L]
                        [--sae DIR --feature F --steer F=+A] (app/cli/features.py)
                        [--no-positions | --shuffle-positions] [--no-scale | --temperature T]
                        [--mean-ablation] [--mask-token WORD] [--store S [-k K]] [--json]
    encoderscope patch A B --site L5.H3|L5.resid@TOKEN|L5.ffn [--site ...] [--json]
    (patch --sweep, patch --trace, ablate --cut and importance --gradient: app/cli/causal.py)
    encoderscope importance --metric spearman|mrr|recall|mlm [--store S [--sample N]] [--mean-ablation]
                            [--prune DROP [--all-counts]] [--seed N] [--json]

Layers and heads count from 1 (3.5 = layer 3, head 5). No Qt here.
"""
from __future__ import annotations

from contextlib import contextmanager

DIGITS = 6          # decimals of the vectors and attentions printed in --json


def register(sub) -> None:
    from app.cli.options import add_model_options
    from core.names import SWEEP_KINDS

    p = sub.add_parser("ablate", help="switch heads, attention, FFNs or positions off and show what changes")
    p.add_argument("text", metavar="TEXT", help="the sentence (with [MASK] for fill-mask effects)")
    p.add_argument("--heads", metavar="L.H,...", help="heads to ablate, layer.head from 1 (3.5 = layer 3, head 5)")
    p.add_argument("--ffn", metavar="L,...", help="layers whose FFN branch is removed")
    p.add_argument("--attn-off", metavar="L,...", help="layers whose attention branch is removed")
    p.add_argument("--skip-layer", metavar="L,...", help="layers passed through unchanged")
    pos = p.add_mutually_exclusive_group()
    pos.add_argument("--no-positions", action="store_true", help="drop the position embeddings")
    pos.add_argument("--shuffle-positions", action="store_true", help="give the tokens shuffled positions")
    p.add_argument("--seed", type=int, default=0, help="seed of --shuffle-positions (default 0)")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--no-scale", action="store_true", help="attention scores without the 1/sqrt(d_k)")
    scale.add_argument("--temperature", type=float, default=1.0, metavar="T",
                       help="divide the attention scores by T before the softmax (default 1)")
    p.add_argument("--mean-ablation", action="store_true",
                   help="replace ablated heads by their mean output over the sample corpus instead of zero")
    p.add_argument("--mask-token", metavar="WORD",
                   help="with [MASK] in TEXT: also the probability of WORD at the first mask")
    p.add_argument("--top", type=int, default=5, metavar="K", help="fill-mask guesses shown (default 5)")
    p.add_argument("--store", metavar="S",
                   help="also search the store S with TEXT as the query and show which hits move (the stored "
                        "vectors stay as they are; only the query is embedded with the parts off); the model "
                        "is then the store's unless --model is given")
    p.add_argument("-k", type=int, default=10, help="with --store: the hits compared (default 10)")
    p.add_argument("--cut", action="append", metavar="L[.H]:Q>K",
                   help="knock out an attention edge: in layer L (head H, else every head) token Q may not "
                        "look at token K (a word of TEXT or a position, 0 = [CLS]); e.g. 3:[MASK]>cat; repeatable")
    add_model_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_ablate, model=None)     # None: the store's with --store, else the default

    p = sub.add_parser("patch", help="run sentence A with one site's numbers taken from sentence B")
    p.add_argument("a", metavar="A", help="the sentence that runs")
    p.add_argument("b", metavar="B", nargs="?", help="the sentence the patched numbers come from")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--site", action="append", metavar="SITE",
                      help="L5.H3 (a head's output), L5.resid@TOKEN (the residual after layer 5 at one token: "
                           "a word or a position, 0 = [CLS]), L5.ffn (the FFN's output); repeatable")
    mode.add_argument("--sweep", choices=SWEEP_KINDS,
                      help="patch every site of one kind from B, one at a time: layer x token (resid), layer x "
                           "head (heads) or layer (ffn); each cell the fraction of the way to B")
    mode.add_argument("--trace", metavar="WORDS",
                      help="causal tracing of A: noise on these words' embeddings (with B: B's word embeddings at "
                           "the same positions instead), then each layer x token clean state restored in turn "
                           "(words or positions, comma-separated)")
    p.add_argument("--noise", type=float, default=3.0, metavar="S",
                   help="--trace: noise std as a multiple of the word embeddings' std (default 3, Meng et al.)")
    p.add_argument("--samples", type=int, default=10, metavar="N", help="--trace: noise samples averaged (default 10)")
    p.add_argument("--seed", type=int, default=0, help="--trace: seed of the noise (default 0)")
    p.add_argument("--mask-token", metavar="WORD",
                   help="--sweep/--trace with [MASK] in A: the word whose p at the mask is read (default: "
                        "B's top guess for --sweep, the clean top guess for --trace)")
    add_model_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_patch)
    _add_importance(sub)


def _add_importance(sub) -> None:
    from app.cli.options import add_model_options

    p = sub.add_parser("importance", help="what each head, attention and FFN is worth to a metric")
    # core.intervene.measure's METRICS and DEFAULT_METRIC (not imported here: it loads torch)
    p.add_argument("--metric", choices=("spearman", "mrr", "recall", "mlm"), default="spearman",
                   help="spearman: shipped eval pairs; mrr: mean reciprocal rank of each shipped query's labelled "
                        "sentence among the sample corpus (graded: the retrieval metric to read); recall: recall@10 "
                        "of the same queries (at its ceiling on clean minilm); mlm: masked-token log-probability "
                        "on the sample corpus (default spearman)")
    p.add_argument("--store", metavar="S",
                   help="measure over a seeded sample of the store's texts instead of the shipped data: mrr and "
                        "recall become how much of the clean model's own top hits the ablated model still finds "
                        "(a store has no relevance labels); the model is then the store's unless --model is given")
    p.add_argument("--sample", type=int, default=600, metavar="N",
                   help="with --store: the texts sampled, the first 50 of them the queries (default 600)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the mlm metric's masks, --store's sample, the bootstrap and --prune's split "
                        "(default 0)")
    p.add_argument("--mean-ablation", action="store_true",
                   help="replace each head by its mean output over the sample corpus instead of zeroing it")
    p.add_argument("--prune", type=float, metavar="DROP",
                   help="then remove heads cumulatively, least important first, and say how many go before the "
                        "metric falls by DROP (e.g. 0.05): the order is chosen on one seeded half of the items and "
                        "the curve drawn on the other")
    p.add_argument("--all-counts", action="store_true",
                   help="with --prune: measure every count up to all heads, not only until the first fall")
    p.add_argument("--gradient", action="store_true",
                   help="also Michel et al.'s gradient head importance I_h = E|dL/d gate_h| (one backward pass; "
                        "spearman and mlm metrics) beside the measured drop, and their rank agreement")
    p.add_argument("--no-cache", action="store_true", help="compute afresh, ignoring a cached map")
    add_model_options(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_importance, model=None)     # None: the store's with --store, else the default


def spec_from_args(args):
    from core.intervene.spec import Intervention, parse_heads, parse_layers
    return Intervention(
        heads=parse_heads(args.heads) if args.heads else frozenset(),
        head_mode="mean" if args.mean_ablation else "zero",
        attention_off=parse_layers(args.attn_off, "--attn-off") if args.attn_off else frozenset(),
        ffn_off=parse_layers(args.ffn, "--ffn") if args.ffn else frozenset(),
        skip=parse_layers(args.skip_layer, "--skip-layer") if args.skip_layer else frozenset(),
        positions="off" if args.no_positions else "shuffle" if args.shuffle_positions else "keep",
        shuffle_seed=args.seed, no_scale=args.no_scale, temperature=args.temperature)


def _vector(v) -> list:
    return [round(float(x), DIGITS) for x in v]


def cmd_ablate(args) -> int:
    import numpy as np

    from app.cli.options import emit_json
    from core.encoder.backends import get_backend
    from core.errors import InputError, NoMLMHead
    from core.intervene import effects
    from core.paths import data_dir

    spec = spec_from_args(args)
    if spec.is_empty and not args.cut:
        raise InputError("nothing to switch off: give --heads, --ffn, --attn-off, --skip-layer, --no-positions, "
                         "--shuffle-positions, --no-scale, --temperature or --cut, or an SAE's features "
                         "with --sae DIR --feature F (e.g. encoderscope ablate TEXT --heads 3.5)")
    if args.k < 1:
        raise InputError("-k must be at least 1")
    backend = get_backend(_model_for(args), args.backend, device=args.device, precision=args.precision)
    if args.cut:
        from dataclasses import replace

        from app.cli.causal import cuts_for
        spec = replace(spec, cuts=cuts_for(backend, args.text, args.cut))
    if args.mean_ablation and not spec.heads:
        raise InputError("--mean-ablation replaces ablated heads: give them with --heads (e.g. --heads 3.5)")
    spec.check(backend.n_layers, backend.n_heads)
    with truncation_said_once(backend, {"the text": args.text}):
        means = _cached_means(backend, data_dir() / "cache" / "importance") if args.mean_ablation else None
        ranking = None
        if args.store:
            from index.corpus.intervene_ranking import ranking_changes
            if args.pooling and args.pooling != _store_pooling(args.store):
                raise InputError(f"the store at {args.store} holds {_store_pooling(args.store)}-pooled vectors: "
                                 "leave out --pooling to compare rankings with them")
            ranking = ranking_changes(args.store, backend, args.text, spec, k=args.k, means=means)
        pooling = _store_pooling(args.store) if args.store else backend.choose_pooling(args.pooling)
        vec = effects.compare_vector(backend, args.text, spec, pooling, means)
        att = effects.compare_attentions(backend, args.text, spec, means)
        mask = backend.tokenizer.mask_token
        fill = None
        if mask and mask in args.text or args.mask_token:
            if not backend.has_mlm:
                raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so fill-mask effects cannot be shown: "
                                "leave out [MASK] and --mask-token, or use a model with one (encoderscope train "
                                "--init minilm --objective mlm --corpus FILE --out DIR, then --model DIR)")
            fill = effects.compare_fill_mask(backend, args.text, spec, args.top, args.mask_token, means)
    changed = np.abs(att.difference).max(axis=(2, 3))          # (L, H)
    if args.json:
        out = {"model": backend.model_name, "intervention": spec.describe(), "pooling": pooling,
               "precision": backend.precision, "tokens": att.tokens,
               "vector_before": _vector(vec.before), "vector_after": _vector(vec.after), "cosine": vec.cosine,
               "attentions_after": np.round(att.after, DIGITS).tolist(),
               "attention_max_change": np.round(changed, DIGITS).tolist()}
        if ranking is not None:
            out["ranking"] = {"store": args.store, **ranking.to_dict()}
        if fill is not None:
            out["fill_mask"] = {"before": fill.before.to_dict(), "after": fill.after.to_dict(),
                                "target": fill.target, "target_before": fill.target_before,
                                "target_after": fill.target_after}
        emit_json(out)
        return 0
    print(f"{backend.model_name}: {spec.describe()}")
    print(f"tokens: {' '.join(att.tokens)}")
    print(f"sentence vector ({pooling}): cosine with the original {vec.cosine:.6f}")
    l, h = np.unravel_index(int(np.argmax(changed)), changed.shape)
    print(f"attention: largest change {changed[l, h]:.4f} in head {l + 1}.{h + 1}")
    if fill is not None:
        for m_before, m_after in zip(fill.before.masks, fill.after.masks):
            show = lambda preds: ", ".join(f"{p['token']} {p['score']:.3f}" for p in preds)  # noqa: E731
            print(f"mask at {m_before['position']}: before {show(m_before['predictions'])}")
            print(f"{'':>{len(str(m_before['position'])) + 9}}after  {show(m_after['predictions'])}")
        if fill.target:
            print(f"p({fill.target}) at the first mask: {fill.target_before:.4f} -> {fill.target_after:.4f}")
    if ranking is not None:
        print_ranking(ranking, args.store)
    return 0


def _model_for(args) -> str:
    """--model, else with --store the store's model, else the default."""
    from core.encoder.sources import DEFAULT_MODEL
    if args.model:
        return args.model
    if args.store:
        from index.corpus.door import open_corpus
        store = open_corpus(args.store)
        if store is not None:
            try:
                return store.model_name
            finally:
                store.close()
    return DEFAULT_MODEL


def _store_pooling(location) -> str:
    from index.corpus.door import open_corpus
    store = open_corpus(location)
    if store is None:
        return "mean"          # ranking_changes refuses the missing store with its fix
    try:
        return store.pooling
    finally:
        store.close()


def print_ranking(r, store) -> None:
    """The top k after the intervention, each with its place before, and what left the top k."""
    def place(rank):
        return f">{r.depth}" if rank is None else str(rank)

    def moved(h):
        if h.moved is None:
            return "new" if h.rank_before is None else "out"
        return "=" if h.moved == 0 else f"{h.moved:+d}"

    print(f"search of {store} (top {r.k}; the stored vectors are the clean model's, only the query is "
          f"embedded with the parts off; query cosine {r.cosine:.6f}):")
    if r.unchanged:
        print(f"  the top {r.k} is unchanged")
    print(f"  {'after':>5} {'before':>6} {'moved':>5} {'score':>7}  text")
    for h in r.hits:
        print(f"  {h.rank_after:>5} {place(h.rank_before):>6} {moved(h):>5} {h.score_after:>7.4f}  {h.text}")
    if r.left:
        print(f"  left the top {r.k}:")
        for h in r.left:
            print(f"  {place(h.rank_after):>5} {h.rank_before:>6} {moved(h):>5} "
                  f"{'' if h.score_after is None else f'{h.score_after:.4f}':>7}  {h.text}")


def cmd_patch(args) -> int:
    import numpy as np

    from app.cli.options import emit_json
    from core.encoder.backends import get_backend
    from core.encoder.scoped_hooks import modules_path
    from core.intervene.apply import intervene
    from core.intervene.patching import patched_run
    from core.intervene.spec import parse_site
    from core.intervene.way_to_b import cosine as cos
    from core.intervene.way_to_b import moved_toward_b

    backend = get_backend(args.model, args.backend, device=args.device, precision=args.precision)
    pooling = backend.choose_pooling(args.pooling)
    if args.sweep or args.trace:
        from app.cli import causal
        return (causal.cmd_patch_sweep if args.sweep else causal.cmd_patch_trace)(args, backend, pooling)
    if args.b is None:
        from core.errors import InputError
        raise InputError("patching takes numbers from sentence B: encoderscope patch A B --site L5.H3")
    sites = [parse_site(s) for s in args.site]
    with truncation_said_once(backend, {"A": args.a, "B": args.b}):
        spec, source, alignment, _ = patched_run(backend, args.a, args.b, sites)
        with modules_path():        # A and B through the same modules and kernels as the patched run
            before_a = backend.embed([args.a], pooling=pooling)[0]
            run_b = backend.embed([args.b], pooling=pooling)[0]
        with intervene(backend, spec, patch_source=source):
            after = backend.embed([args.a], pooling=pooling)[0]
    same = bool(np.array_equal(before_a, run_b))
    moved = moved_toward_b(before_a, after, run_b)     # 0 = A unchanged, 1 = B's vector, None: A is B
    out = {"model": backend.model_name, "sites": [s.describe() for s in spec.patch], "pooling": pooling,
           "precision": backend.precision, "alignment": alignment.to_dict(), "cosine_a_b": cos(before_a, run_b),
           "cosine_patched_a": cos(after, before_a), "cosine_patched_b": cos(after, run_b),
           "same_vector_a_b": same, "patched_equals_a": bool(np.array_equal(after, before_a)),
           "patched_equals_b": bool(np.array_equal(after, run_b)),
           "moved_toward_b": moved, "vector_a": _vector(before_a), "vector_patched": _vector(after)}
    if args.json:
        emit_json(out)
        return 0
    print(f"A: {' '.join(alignment.tokens_a)}")
    print(f"B: {' '.join(alignment.tokens_b)}")
    for site, pairs in alignment.pairs.items():
        shown = ", ".join(f"{alignment.tokens_a[a]}<-{alignment.tokens_b[b]}" for a, b in list(pairs.items())[:8])
        print(f"{site.describe()}: {shown}{' ...' if len(pairs) > 8 else ''}")
    if same:
        exact = "unchanged, bit for bit" if out["patched_equals_a"] else f"cosine with A {out['cosine_patched_a']:.6f}"
        print(f"A and B have the same vector ({backend.precision}), so there is no way to B to measure; "
              f"patched A: {exact}")
        return 0
    if moved is None:
        print(f"cosine(A, B) {out['cosine_a_b']:.6f}: A and B point the same way, so there is no way to B to "
              f"measure; patched A: cosine with A {out['cosine_patched_a']:.6f}")
        return 0
    print(f"cosine(A, B) {out['cosine_a_b']:.4f}; patched A: cosine with A {out['cosine_patched_a']:.4f}, "
          f"with B {out['cosine_patched_b']:.4f} ({moved:.0%} of the way to B"
          + ("; B's vector, bit for bit" if out["patched_equals_b"] else "") + ")")
    return 0


def check_importance_args(args) -> None:
    """Refuse --prune and --sample values that cannot work, before any model is loaded."""
    import math

    from core.errors import InputError
    from core.intervene.measure import MIN_OWN_TEXTS
    if args.prune is not None and not (math.isfinite(args.prune) and args.prune > 0):
        raise InputError(f"--prune is the fall of the metric to stop at, a number above 0 (e.g. --prune 0.05), "
                         f"not {args.prune:g}")
    if args.all_counts and args.prune is None:
        raise InputError("--all-counts goes with --prune (e.g. --prune 0.05 --all-counts)")
    if args.store:
        if args.metric == "spearman":
            raise InputError("the spearman metric reads the shipped scored pairs: with --store choose "
                             "--metric mrr, recall or mlm")
        least = MIN_OWN_TEXTS if args.metric in ("mrr", "recall") else 2 if args.prune is not None else 1
        if args.sample < least:
            raise InputError(f"--sample must be at least {least} for --metric {args.metric} over a store "
                             f"(not {args.sample}): e.g. --sample 600")
    elif args.sample != 600:
        raise InputError("--sample goes with --store: the shipped data are read whole")


def cmd_importance(args) -> int:
    import sys

    from app.cli.intervene_report import print_map, print_removal
    from app.cli.options import emit_json
    from core.encoder.backends import get_backend
    from core.errors import InputError
    from core.paths import data_dir

    check_importance_args(args)
    texts = None
    if args.gradient and args.metric not in ("spearman", "mlm"):
        raise InputError(f"--gradient needs a loss to differentiate: choose --metric spearman or mlm "
                         f"({args.metric} has no loss)")
    if args.gradient and args.store:
        raise InputError("--gradient measures the shipped data (its loss needs the shipped pairs or masks): "
                         "leave out --store")
    if args.store:
        from index.corpus.intervene_ranking import store_sample
        texts = store_sample(args.store, args.sample, args.seed)
    backend = get_backend(_model_for(args), args.backend, device=args.device, precision=args.precision)
    cache = None if args.no_cache else data_dir() / "cache" / "importance"

    progress_shown = [False]

    def progress(done, total):
        if not args.json and sys.stderr.isatty():
            progress_shown[0] = True
            print(f"\r{done}/{total} parts", end="", file=sys.stderr, flush=True)

    mode = "mean" if args.mean_ablation else "zero"
    means = _cached_means(backend, cache) if args.mean_ablation else None
    from core.intervene.importance import importance_map
    m = importance_map(backend, args.metric, seed=args.seed, progress=progress, cache_dir=cache, texts=texts,
                       head_mode=mode, means=means)
    removal = _prune(args, backend, texts, cache, progress, mode, means) if args.prune is not None else None
    gradient = None
    if args.gradient:
        from app.cli.causal import gradient_beside
        gradient = gradient_beside(args, backend, m)
    if progress_shown[0]:
        print(file=sys.stderr)
    if args.json:
        emit_json({**m.to_dict(), "model": backend.model_name, "weights_sha256": m.model,
                   **({"store": args.store} if args.store else {}),
                   **({"removal": removal.to_dict(args.prune)} if removal else {}),
                   **({"gradient_importance": gradient} if gradient else {})})
        return 0
    print_map(backend, m)
    if gradient is not None:
        from app.cli.causal import print_gradient
        print_gradient(gradient, m)
    if removal is not None:
        print_removal(removal, args.metric, args.prune)
    return 0


def _cached_means(backend, cache):
    from core.intervene import effects
    from core.intervene.map_cache import cached_means
    from core.intervene.means import mean_head_outputs
    texts = effects.sample_corpus()
    return cached_means(backend, texts, cache, lambda: mean_head_outputs(backend, texts))


def _prune(args, backend, texts, cache, progress, mode, means):
    """Order chosen on one seeded half of the items (its own map), curve drawn on the other."""
    from core.intervene.importance import importance_map
    from core.intervene.measure import Measure
    from core.intervene.pruning import cumulative_removal, held_out_halves, least_important_first
    n_items = Measure(backend, args.metric, args.seed, texts=texts).n_all
    choose, curve = held_out_halves(n_items, args.seed)
    chosen = importance_map(backend, args.metric, seed=args.seed, cache_dir=cache, texts=texts, items=choose,
                            head_mode=mode, means=means)
    tie = None
    if args.metric != "spearman" and texts is None:
        # ties (many on a coarse metric) by the Spearman map: scored pairs, none of the curve's queries
        tie = importance_map(backend, "spearman", seed=args.seed, cache_dir=cache).heads
    order = least_important_first(chosen.heads, tie)
    return cumulative_removal(backend, order, args.metric, seed=args.seed, texts=texts, progress=progress,
                              stop_drop=None if args.all_counts else args.prune, items=curve, chosen_on=choose)


@contextmanager
def truncation_said_once(backend, texts: dict):
    """A note on stderr for each of `texts` ({name: text}) longer than the model reads, said
    once here: the command runs the text several times (before, after, patched), and the
    model's own warning would come with every run."""
    import logging
    import sys
    _, cut = backend.encode_ids(list(texts.values()))
    for i in cut:
        name = list(texts)[i]
        print(f"note: {name} is longer than the {backend.max_length} tokens {backend.model_name} reads: "
              f"only its first {backend.max_length} tokens were used", file=sys.stderr)
    log = logging.getLogger("core.encoder.backends.base")
    said = _DropTruncationWarnings()
    log.addFilter(said)
    try:
        yield
    finally:
        log.removeFilter(said)


class _DropTruncationWarnings:
    def filter(self, record) -> bool:
        return not str(record.msg).startswith("%d of %d texts were longer than")
