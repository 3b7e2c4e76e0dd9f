"""`encoderscope eval`: how good a model's sentence vectors are, on a file.

    eval --pairs [FILE]  graded sentence pairs: Spearman and Pearson of the pairs' cosines with
                         the scores, and the anisotropy of the sentences' vectors (--whiten: also
                         after BERT-whitening fitted on a corpus); the shipped set when no FILE
    eval --queries [FILE] --store S -k 10
                         queries with their relevant text, searched with the store's own search:
                         recall@k and MRR; the shipped queries (about the sample corpus) when no FILE
"""
from __future__ import annotations

import shlex

from app.cli.options import add_model_options, add_store_option, emit_json
from core.encoder.sources import DEFAULT_MODEL
from core.errors import InputError

SHIPPED = "shipped"    # the value --pairs / --queries take when given without a FILE


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate a model on scored sentence pairs, or a store on queries",
        description="Evaluate sentence vectors. --pairs: Spearman and Pearson correlation of "
                    "the pairs' cosines with their similarity scores, and the anisotropy (mean "
                    "cosine of random sentence pairs). --queries: recall@k and MRR of a store's "
                    "search (the relevant text's rank among the top k).")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--pairs", nargs="?", const=SHIPPED, metavar="FILE",
                      help=".tsv/.csv with two sentence columns and a score column (found by "
                           "header: a/b, sentence1/sentence2, ... and score/similarity/...; or "
                           "--columns). Without FILE: the shipped evaluation set")
    what.add_argument("--queries", nargs="?", const=SHIPPED, metavar="FILE",
                      help=".tsv/.csv with a query column and a relevant-text column (query, "
                           "relevant/expected; or --columns). Without FILE: the shipped queries, "
                           "whose relevant texts are in the sample corpus")
    p.add_argument("--columns", metavar="NAMES",
                   help="the columns by name, comma-separated: A,B,SCORE for --pairs, "
                        "QUERY,RELEVANT for --queries")
    p.add_argument("--encoding", metavar="NAME", default=None,
                   help="the file's text encoding when it is not UTF-8")
    add_model_options(p)
    p.set_defaults(model=None, pooling=None)     # --pairs: minilm, mean; --queries: the store's
    p.add_argument("--whiten", action="store_true",
                   help="--pairs: also score the vectors after BERT-whitening (Su et al., 2021) "
                        "fitted on --whiten-corpus")
    p.add_argument("--whiten-dims", type=int, metavar="K", default=None,
                   help="keep the first K whitened dimensions (default: all)")
    p.add_argument("--whiten-corpus", metavar="FILE", default=None,
                   help="the sentences the whitening is fitted on (.txt/.csv/.jsonl; default: the "
                        "sample corpus, 576 sentences)")
    add_store_option(p)
    p.add_argument("-k", type=int, default=10, help="--queries: hits looked at per query (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_eval)


def cmd_eval(args) -> int:
    if args.pairs is not None:
        return _pairs(args)
    return _queries(args)


def _backend(args, model):
    from core.encoder.backends import get_backend
    return get_backend(model, args.backend, device=args.device, precision=args.precision)


# ---- pairs ------------------------------------------------------------------------------------
def _pairs(args) -> int:
    from core import assets
    from core.evaluate.pairs import evaluate_pairs, read_scored_pairs
    if args.store is not None:
        raise InputError("--store goes with --queries; --pairs evaluates a model (--model)")
    if (args.whiten_dims is not None or args.whiten_corpus) and not args.whiten:
        raise InputError("--whiten-dims and --whiten-corpus go with --whiten")
    path = assets.eval_pairs() if args.pairs == SHIPPED else args.pairs
    pairs = read_scored_pairs(path, args.columns, args.encoding)
    corpus = _whiten_corpus(args) if args.whiten else None
    model = args.model or DEFAULT_MODEL
    backend = _backend(args, model)
    pooling = args.pooling or "mean"
    report = evaluate_pairs(backend, pairs, pooling, whiten_corpus=corpus, whiten_dims=args.whiten_dims)
    if args.json:
        emit_json(_pairs_json(report, path, model, pooling))
    else:
        _print_pairs(report, path, model, pooling)
    return 0


def _whiten_corpus(args) -> list[str]:
    from core import assets
    from core.train.data import read_corpus
    return read_corpus(args.whiten_corpus or assets.sample_corpus(), encoding=args.encoding)


def _pairs_json(report, path, model, pooling) -> dict:
    main = report.whitened or report.plain
    out = {**main.to_dict(), "file": str(path), "model": model, "pooling": pooling}
    if report.whitened is not None:
        out["whitening"] = report.whitening
        out["unwhitened"] = report.plain.to_dict()
    return out


def _print_pairs(report, path, model, pooling) -> None:
    plain, white = report.plain, report.whitened
    print(f"pairs       {plain.n} ({path})")
    print(f"model       {model} ({pooling} pooling)")
    rows = (("spearman", "spearman"), ("pearson", "pearson"))
    if white is None:
        for label, key in rows:
            print(f"{label:<11} {getattr(plain, key):.4f}")
        print(f"anisotropy  {plain.anisotropy.value:.4f}")
    else:
        w = report.whitening
        print(f"{'':<11} {'plain':>8} {'whitened':>9}   (whitened: {w['dims']} of {w['input_dim']} "
              f"dimensions, fitted on {w['fitted_on']} sentences)")
        for label, key in rows:
            print(f"{label:<11} {getattr(plain, key):>8.4f} {getattr(white, key):>9.4f}")
        print(f"{'anisotropy':<11} {plain.anisotropy.value:>8.4f} {white.anisotropy.value:>9.4f}")
    a = plain.anisotropy
    print(f"(anisotropy: the mean cosine of {a.pairs} random pairs of the file's {a.vectors} "
          f"distinct sentences, seed {a.seed})")


# ---- queries ----------------------------------------------------------------------------------
def _queries(args) -> int:
    from core import assets
    from core.evaluate.pairs import read_queries
    from index.corpus.evaluation import evaluate_queries
    from index.opening import open_store
    from index.store.location import parse_location
    if args.whiten or args.whiten_dims is not None or args.whiten_corpus:
        raise InputError("--whiten goes with --pairs; a store is whitened when it is created "
                         "(encoderscope ingest --whiten)")
    if args.k < 1:
        raise InputError("-k must be at least 1")
    path = assets.eval_queries() if args.queries == SHIPPED else args.queries
    queries = read_queries(path, args.columns, args.encoding)
    loc = parse_location(args.store)
    store = open_store(loc, writable=False)
    try:
        model = args.model or store.model_name
        if args.pooling is not None and args.pooling != store.pooling:
            raise InputError(f"{loc.describe()} holds {store.pooling}-pooled vectors; its queries "
                             "are pooled the same way (leave out --pooling)")
        if store.count() == 0:
            raise InputError(f"{loc.describe()} holds no sentences yet: nothing to search; add "
                             f"some with `encoderscope ingest --sample-corpus --store {shlex.quote(str(loc))}`")
        scores = evaluate_queries(store, queries, args.k, _backend(args, model))
    finally:
        store.close()
    if args.json:
        emit_json({**scores, "file": str(path), "store": str(loc), "model": model})
        return 0
    print(f"queries     {scores['n']} ({path})")
    print(f"store       {loc.describe()} ({model})")
    print(f"recall@{scores['k']:<4} {scores['recall_at_k']:.4f}")
    print(f"mrr@{scores['k']:<7} {scores['mrr']:.4f}")
    if scores["not_in_store"]:
        print(f"note: {scores['not_in_store']} relevant text(s) are not in the store; they count as misses")
    return 0
