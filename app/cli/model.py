"""The commands that run a model on texts: embed, inspect, fill-mask, and models (what is available)."""
from __future__ import annotations

import sys

from app.cli.options import add_model_options, backend_from_args, emit_json, read_texts


def register(sub) -> None:
    p = sub.add_parser("embed", help="sentence vectors (L2-normalised) for texts")
    p.add_argument("text", nargs="*", help="texts to embed")
    p.add_argument("--file", help="a file with one text per non-blank line")
    p.add_argument("--encoding", metavar="NAME", help="the --file's text encoding when it is not UTF-8, "
                                                      "e.g. latin-1, cp1252, utf-16 (default: UTF-8)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="texts per encoder batch (default: planned for the device by padded tokens)")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_model_options(p)
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("inspect", help="tokens and attention weights of every layer and head")
    p.add_argument("text")
    p.add_argument("--json", action="store_true", help="print JSON (attentions: layers x heads x T x T)")
    add_model_options(p, pooling=False)
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("fill-mask", help="predict the words hidden by [MASK]")
    p.add_argument("text", help="a sentence with one or more [MASK]")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--targets", help="comma-separated candidate words to score instead of the top-k")
    p.add_argument("--per-layer", action="store_true", help="also show each layer's guesses")
    p.add_argument("--json", action="store_true", help="print JSON")
    add_model_options(p, pooling=False)
    p.set_defaults(func=cmd_fill_mask)

    p = sub.add_parser("models", help="known models and whether they are available offline")
    p.add_argument("--folder", action="append", help="also describe this model folder (repeatable)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_models)


def cmd_embed(args) -> int:
    from core.encoder.backends import EmbedStats
    b = backend_from_args(args)
    stats = EmbedStats()
    pooling = b.choose_pooling(args.pooling)
    vecs = b.embed(read_texts(args), pooling=pooling, batch_size=args.batch_size, stats=stats)
    if stats.truncated:
        print(f"note: {stats.truncated} text(s) were longer than {b.max_length} tokens and were truncated "
              f"(texts {', '.join(str(i + 1) for i in stats.truncated_indices[:10])})", file=sys.stderr)
    if args.json:
        emit_json({"model": b.model_name, "backend": b.backend, "device": b.device_name,
                   "precision": b.precision, "precision_note": b.precision_note, "dim": b.dim,
                   "pooling": pooling, "truncated": stats.truncated,
                   "vectors": [[round(float(x), 7) for x in v] for v in vecs]})
    else:
        print(f"# {len(vecs)} vectors, {b.dim}-d, {b.model_name} ({b.backend}) on {b.device_name}, "
              f"{b.precision}")
        for v in vecs:
            print(" ".join(f"{x:.6f}" for x in v))
    return 0


def cmd_inspect(args) -> int:
    b = backend_from_args(args)
    ins = b.inspect(args.text)
    if args.json:
        emit_json({"model": b.model_name, "backend": b.backend, "device": ins.device,
                   "tokens": ins.tokens, "truncated_tokens": ins.truncated,
                   "attentions": ins.attentions.round(6).tolist()})
    else:
        L, H, T, _ = ins.attentions.shape
        print(f"{b.model_name} ({b.backend}) on {ins.device}: {T} tokens, {L} layers x {H} heads")
        if ins.truncated:
            print(f"note: the text is {T + ins.truncated} tokens long and {b.model_name} reads at most "
                  f"{b.max_length}: the last {ins.truncated} tokens were cut", file=sys.stderr)
        print("tokens:", " ".join(ins.tokens))
        for layer in range(L):
            mean = ins.attentions[layer].mean(0)          # (T, T) averaged over heads
            focus = [ins.tokens[j] for j in mean.argmax(-1)]
            print(f"layer {layer}: each token attends most to -> {' '.join(focus)}")
    return 0


def cmd_fill_mask(args) -> int:
    b = backend_from_args(args)
    res = b.fill_mask(args.text, top_k=args.top_k, targets=args.targets, per_layer=args.per_layer)
    if args.json:
        emit_json(res.to_dict())
        return 0
    for m in res.masks:
        print(f"mask at token {m['position']}:")
        for p in m["predictions"]:
            extra = f"  (pieces: {' '.join(p['pieces'])})" if p.get("multi_piece") else ""
            print(f"  {p['score']:8.4f}  {p['token']}{extra}")
    if len(res.masks) > 1:
        print(f"joint: {res.joint['text']}  (p = {res.joint['score']:.4g})")
    for pl in res.per_layer:
        print(f"per layer, mask at token {pl['position']}:")
        for i, guesses in enumerate(pl["layers"]):
            name = "embeddings" if i == 0 else f"layer {i}"
            print(f"  {name:>10}: " + ", ".join(f"{g['token']} {g['score']:.3f}" for g in guesses))
    return 0


def cmd_models(args) -> int:
    from core.encoder.catalog import list_models
    rows = list_models(args.folder or ())
    if args.json:
        emit_json({"models": rows})
        return 0
    for r in rows:
        state = "available" if r["available"] else (
            f"refused: {r['refused']}" if r.get("refused") else
            "unusable" if r.get("error") and r["source"] != "hub" else "not available offline")
        dims = f"{r.get('dim', '?')}-d, {r.get('layers', '?')} layers, {r.get('heads', '?')} heads"
        mlm = "MLM head" if r.get("mlm_head") else "no MLM head"
        print(f"{r['name']:<28} {r['source']:<9} {state:<22} {dims}, {mlm}")
        if state == "unusable":
            print(f"    {r['error']}")
    return 0
