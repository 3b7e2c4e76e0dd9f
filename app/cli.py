"""`encoderscope` on the command line: the composition root, with the same core as the app.

Subcommands here: embed, inspect, fill-mask, models, gui. The others live one module each in
app/commands/ (store: ingest/search/info/remove, train, ...) and in index/migrate.py, and
register themselves through `register(subparsers)`. Qt is imported only when `gui` runs.
Errors meant for people print as `error: ...` with exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import signal
import sys
import threading

from core.errors import EncoderscopeError, Terminated
from core.names import BACKENDS, POOLINGS, PRECISION_CHOICES
from core.sources import DEFAULT_HUB_MODEL, DEFAULT_MODEL

EXIT_USAGE = 2
# Subcommand modules, each with register(subparsers); imported when the parser is built.
COMMANDS = ("app.commands.store", "index.migrate", "app.commands.train", "app.commands.explain",
            "app.commands.why",
            "app.commands.map")


def add_model_options(p: argparse.ArgumentParser, pooling: bool = True, store_default: str | None = None):
    """--model/--backend/--device/--precision (and --pooling): shared by every command that runs a
    model. store_default: the command takes the model and pooling of a store ("existing": it must
    exist; "new": a new store gets the defaults), so the help says so."""
    if store_default is None:
        model_default = f"default: {DEFAULT_MODEL}"
        pooling_default = "default: mean"
    else:
        new = "" if store_default == "existing" else f"; a new store: {DEFAULT_MODEL}"
        model_default = f"default: the store's{new}"
        pooling_default = "default: the store's" + ("" if store_default == "existing" else "; a new store: mean")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help=f"{DEFAULT_MODEL} (packaged, offline), a hub id such as {DEFAULT_HUB_MODEL}, "
                        f"or a model folder / trained checkpoint ({model_default})")
    p.add_argument("--backend", choices=BACKENDS, default="scratch",
                   help="scratch: our from-scratch encoder; hf: Hugging Face transformers (default: scratch)")
    p.add_argument("--device", default=None,
                   help="auto, cpu, cuda or mps (default: $ENCODERSCOPE_DEVICE or auto)")
    p.add_argument("--precision", choices=PRECISION_CHOICES, default=None,
                   help="embedding precision: auto = bf16 where the CPU/GPU computes it natively "
                        "(AVX512-BF16, AMX, CUDA) and the model's bf16 vectors keep cosine >= 0.9999 "
                        "with fp32, else fp32 (default: $ENCODERSCOPE_PRECISION or auto). Vectors of "
                        "either precision share a store.")
    if pooling:
        p.add_argument("--pooling", choices=POOLINGS, default="mean",
                       help=f"how token vectors become one sentence vector ({pooling_default})")


def backend_from_args(args):
    from core.backend import get_backend
    return get_backend(args.model, args.backend, device=args.device, precision=args.precision)


def emit_json(obj):
    json.dump(obj, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


def read_texts(args) -> list[str]:
    texts = list(args.text or [])
    if args.file:
        texts += read_file_lines(args.file, args.encoding)
    if not texts:
        raise EncoderscopeError("no text given: pass TEXT arguments or --file FILE")
    return texts


def read_file_lines(path, encoding=None) -> list[str]:
    """`embed --file`: every line with a letter or digit (core.readers' rules), whatever the
    suffix; a line that cannot be read stops with its file, line and a way out."""
    from core.readers import collect, other_encoding_hint, read_txt
    got = collect(read_txt(path, encoding))
    if got.bad:
        first = got.bad[0]
        hint = f"; {other_encoding_hint()}" if first.undecodable and encoding is None else ""
        raise EncoderscopeError(f"{path}, line {first.row}: {first.reason}{hint}")
    if not got.sentences:
        skipped = f" ({got.no_letters} line(s) without any letter or digit)" if got.no_letters else ""
        raise EncoderscopeError(f"{path} has no text lines{skipped}")
    if got.no_letters:
        print(f"note: skipped {got.no_letters} line(s) of {path} without any letter or digit", file=sys.stderr)
    return [s.text for s in got.sentences]


def cmd_embed(args) -> int:
    from core.backend import EmbedStats
    b = backend_from_args(args)
    stats = EmbedStats()
    vecs = b.embed(read_texts(args), pooling=args.pooling, batch_size=args.batch_size, stats=stats)
    if stats.truncated:
        print(f"note: {stats.truncated} text(s) were longer than {b.max_length} tokens and were truncated "
              f"(texts {', '.join(str(i + 1) for i in stats.truncated_indices[:10])})", file=sys.stderr)
    if args.json:
        emit_json({"model": b.model_name, "backend": b.backend, "device": b.device_name,
                   "precision": b.precision, "precision_note": b.precision_note, "dim": b.dim,
                   "pooling": args.pooling, "truncated": stats.truncated,
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
    from core.catalog import list_models
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


def cmd_gui(args) -> int:
    from .main import main as gui_main
    return gui_main([] if args.store is None else ["--store", args.store]) or 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="encoderscope",
                                     description="Embed, search, inspect and fill masks with transformer encoders.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log what happens")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("embed", help="sentence vectors (L2-normalised) for texts")
    p.add_argument("text", nargs="*", help="texts to embed")
    p.add_argument("--file", help="a file with one text per non-blank line")
    p.add_argument("--encoding", metavar="NAME", help="the --file's text encoding when it is not UTF-8, "
                                                      "e.g. latin-1, cp1252, utf-16 (default: UTF-8)")
    p.add_argument("--batch-size", type=int, default=32)
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

    p = sub.add_parser("gui", help="open the desktop app")
    p.add_argument("--store", metavar="STORE",
                   help="store to open: a folder, milvus-lite:FOLDER or http(s)://HOST:PORT")
    p.set_defaults(func=cmd_gui)

    for module in COMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def check_arguments(args) -> None:
    """Arguments are text: bytes that are not UTF-8 (Python keeps them as lone surrogates)
    are refused here, before a tokenizer or a database meets them."""
    for name, value in vars(args).items():
        for text in (value if isinstance(value, list) else [value]):
            if isinstance(text, str) and not text.isascii():
                try:
                    text.encode("utf-8")
                except UnicodeEncodeError as e:
                    bad = os.fsencode(text[e.start:e.end])
                    raise EncoderscopeError(
                        f"the {name.replace('_', ' ')} argument is not valid UTF-8 text (byte "
                        f"{bad[0]:#04x} at character {e.start + 1}); pass it in UTF-8") from None


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None) -> int:
    if threading.current_thread() is not threading.main_thread():
        return _main(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        check_arguments(args)
        return args.func(args) or 0
    except EncoderscopeError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Terminated:
        print("terminated (SIGTERM)", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`encoderscope search ... | head`): not an error of ours
        try:   # as the Python docs advise: no second error when stdout is flushed at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 0


if __name__ == "__main__":
    sys.exit(main())
