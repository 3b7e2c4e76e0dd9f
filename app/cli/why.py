"""`encoderscope why`: why a text is a hit for a query, split exactly over token pairs.

    encoderscope why QUERY TEXT [--model M] [--backend B] [--pooling P] [--store S]
                     [--hide-special] [--top K] [--json]

Prints the cosine score (the one `embed` vectors and `search` give; with --store, the
contributions are computed in the precision the stored vector was made with, and checked against
the search score), the largest token-pair
contributions in words and each token's total; --json prints {"score", "tokens_a", "tokens_b",
"contributions" (n x m), "special_tokens_a", "special_tokens_b", ...}. The maths: core/evaluate/why.py
and docs/why.md. No Qt here.
"""
from __future__ import annotations

import sys


def register(sub) -> None:
    from app.cli.options import add_model_options

    p = sub.add_parser("why", help="why TEXT matches QUERY: the score split over token pairs (exact)")
    p.add_argument("query", metavar="QUERY", help="the query (the matrix's rows)")
    p.add_argument("text", metavar="TEXT", help="the hit (the matrix's columns)")
    add_model_options(p)
    p.add_argument("--store", metavar="STORE", default=None,
                   help="take the model and pooling from this store (the ones its search uses), "
                        "unless --model / --pooling are given")
    p.add_argument("--hide-special", action="store_true",
                   help="leave out the pairs of special tokens ([CLS], [SEP]) and say what they held")
    p.add_argument("--top", type=int, default=8, metavar="K", help="how many top pairs to list (default 8)")
    p.add_argument("--json", action="store_true", help="print JSON")
    # None = minilm + mean, or the store's model and pooling with --store
    # backend None: the store's own encoder with --store, else the from-scratch one
    p.set_defaults(func=cmd_why, model=None, pooling=None, backend=None)


def _model_pooling_backend(args) -> tuple[str, str, str, str | None]:
    """(model, pooling, backend, a note on the encoder or None)."""
    if args.store is None:
        return args.model or "minilm", args.pooling, args.backend or "scratch", None
    from app.cli.options import store_backend
    from index.opening import open_store
    from index.store.location import parse_location
    with open_store(parse_location(args.store), writable=False) as store:
        backend, note = store_backend(args, store)
        return args.model or store.model_name, args.pooling or store.pooling, backend, note


SEARCH_DEPTH = 1000   # how deep `why --store` looks for the text among the query's hits


def _search_score(args, backend, pooling: str) -> float | None:
    """The score `search` gives TEXT for QUERY in --store (None without a store, or when TEXT is
    not among its first SEARCH_DEPTH hits): what the contributions must add up to."""
    if args.store is None:
        return None
    from index.corpus.door import search
    from index.opening import open_store
    from index.store.errors import ModelMismatch
    from index.store.location import parse_location
    with open_store(parse_location(args.store), writable=False) as store:
        try:
            hits, _ = search(store, args.query, min(SEARCH_DEPTH, max(1, store.count())), backend, pooling)
        except ModelMismatch:          # --model / --pooling other than the store's: no search score
            return None
        whitened = store.whitening is not None
    score = next((float(hit.score) for hit in hits if hit.text == args.text), None)
    if whitened and score is not None:
        from core.evaluate.why import WHITENED_NOTE
        print(f"note: {WHITENED_NOTE.format(score=score)}", file=sys.stderr)
        return None
    return score


def cmd_why(args) -> int:
    from app.cli.options import emit_json
    from core.encoder.backends import get_backend
    from core.errors import InputError
    from core.evaluate.why import SAME_SCORE, explain, format_pairs, format_sums, to_dict

    if args.top < 1:
        raise InputError("--top must be at least 1")
    model, pooling, backend_name, encoder_note = _model_pooling_backend(args)
    if encoder_note:
        print(f"note: {encoder_note}", file=sys.stderr)
    backend = get_backend(model, backend_name, device=args.device, precision=args.precision)
    pooling = backend.choose_pooling(pooling)
    search_score = _search_score(args, backend, pooling)
    why = explain(backend, args.query, args.text, pooling, search_score)
    _, cut = backend.encode_ids([args.query, args.text])
    for i in cut:
        print(f"note: the {('query', 'text')[i]} is longer than the {backend.max_length} tokens "
              f"{backend.model_name} reads: only its first {backend.max_length} tokens count "
              "(the rest was cut)", file=sys.stderr)
    if args.json:
        emit_json({"model": backend.model_name, "backend": backend.backend, "search_score": search_score,
                   "encoder_note": encoder_note,
                   **to_dict(why, hide_special=args.hide_special, top=args.top)})
        return 0
    view = why.view(args.hide_special)
    n, m = why.contributions.shape
    print(f"score {why.score:.4f}: cosine of the two {backend.model_name} vectors ({pooling} pooling), "
          f"the sum of {n} x {m} token-pair contributions ({why.describe_precision()})")
    if search_score is not None:
        same = "=" if abs(why.total - search_score) <= SAME_SCORE else "≠"
        apart = "" if same == "=" else f" (apart by {abs(why.total - search_score):.1e})"
        print(f"Σ {why.total:.6f} {same} the search score {search_score:.6f} in {args.store}{apart}")
    if view.hidden_pairs:
        print(view.describe_hidden())
    else:
        specials = why.view(hide_special=True)
        if specials.hidden_pairs:
            print(f"the {specials.hidden_pairs} pairs with a special token ([CLS], [SEP]) add "
                  f"{specials.hidden_sum:+.4f} ({specials.hidden_share:.0%} of the score); "
                  "--hide-special leaves them out")
        elif why.special_a.any() or why.special_b.any():
            print("one text is nothing but special tokens ([CLS], [SEP]): every pair is shown, "
                  "--hide-special included")
    print(f"top pairs: {format_pairs(view.top_pairs(args.top), digits=3) or '(none positive)'}")
    negative = view.top_pairs(min(args.top, 3), negative=True)
    if negative:
        print(f"most negative: {format_pairs(negative, digits=4)}")
    print(f"query tokens (row sums): {format_sums(view.tokens_a, view.row_sums)}")
    print(f"hit tokens (column sums): {format_sums(view.tokens_b, view.col_sums)}")
    return 0
