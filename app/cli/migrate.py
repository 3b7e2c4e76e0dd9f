"""`encoderscope migrate --from STORE --to STORE`: copy a corpus between any two stores without
re-embedding (the copy and its checks: index/corpus/migrate.py)."""
from __future__ import annotations

import sys

from app.cli.options import add_index_option
from core.errors import InputError
from index.corpus.migrate import BATCH, REEMBED_SAMPLE, migrate
from index.opening import describe_location
from index.store import fingerprint as fpmod


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "migrate", help="copy a corpus between stores (FAISS folder, milvus-lite:FOLDER, "
                        "http(s)://HOST:PORT) without re-embedding")
    p.add_argument("--from", dest="source", required=True, metavar="STORE",
                   help="the store to copy: a folder, milvus-lite:FOLDER or "
                        "http(s)://HOST:PORT[/DB][?collection=NAME]")
    p.add_argument("--to", dest="destination", required=True, metavar="STORE",
                   help="where to copy it (created if missing, for the source's model); a "
                        "server token comes from $ENCODERSCOPE_MILVUS_TOKEN")
    p.add_argument("--batch-size", type=int, default=BATCH,
                   help=f"sentences per copied batch (default {BATCH})")
    add_index_option(p, "a new destination")
    p.add_argument("--verify", action="store_true",
                   help="also embed a sample of the copied texts again with the store's model "
                        "and compare them with their stored vectors (every copied row is "
                        "always compared with the source by id)")
    p.add_argument("--verify-sample", type=int, default=REEMBED_SAMPLE, metavar="N",
                   help=f"texts --verify embeds again (default {REEMBED_SAMPLE})")
    p.add_argument("--backend", choices=("scratch", "hf"), default="scratch",
                   help="how --verify runs the store's model (default scratch)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_migrate)


def _model_of(kind: str):
    """fingerprint dict -> the Backend that made it (for --verify), or an error saying why not."""
    def load(fp: dict):
        from core.encoder.backends import get_backend
        backend = get_backend(fp.get("model"), kind)
        now = fpmod.as_dict(backend.fingerprint(pooling=fp.get("pooling", "mean")))
        # Both encoders hash the same files, so another --backend never helps: say what changed.
        changed = ("its config or tokenizer files changed since the store was built"
                   if fpmod.only_network_differs(fp, now) else "it holds other weights than the store's")
        fpmod.check(fp, now, f"the vectors of --verify's model ({fp.get('model')})", where="being copied",
                    hint=f"{changed}: put back the model's files, or leave out --verify (every copied "
                         "row is still compared with the source by id)")
        return backend
    return load


def cmd_migrate(args) -> int:
    from tqdm import tqdm

    bars = []          # made at the first batch: an error before it shows no empty bar
    last = [0]

    def progress(done, total):
        if not bars:
            bars.append(tqdm(total=total, desc="copying", unit=" sentences", disable=args.quiet,
                             file=sys.stderr, dynamic_ncols=True, smoothing=0.1))
        bars[0].update(done - last[0])
        last[0] = done

    def close():
        for bar in bars:
            bar.close()
    try:
        if args.verify and args.verify_sample < 1:
            raise InputError("--verify-sample must be at least 1")
        res = migrate(args.source, args.destination, batch=args.batch_size, index=args.index,
                      progress=progress,
                      verify_backend=_model_of(args.backend) if args.verify else None,
                      reembed_sample=args.verify_sample)
    except KeyboardInterrupt:
        close()
        print("interrupted: the batches copied so far are in the destination; run the same "
              "command again to finish (sentences already there are skipped)", file=sys.stderr)
        return 130
    finally:
        close()
    if args.json:
        from app.cli.options import emit_json
        emit_json(res.to_dict())
    else:
        rate = res.copied / res.seconds if res.seconds else 0
        print(f"copied {res.copied} sentences from {describe_location(args.source)} to "
              f"{describe_location(args.destination)} in {res.seconds:.1f} s ({rate:.0f}/s): "
              f"added {res.added}, already there {res.duplicates}; the destination holds "
              f"{res.destination_count}; verified (counts, {res.rows_checked} rows compared "
              f"with the source by id, {res.sample_checked} sample searches"
              + (f", {res.reembedded} texts embedded again" if res.reembedded else "") + ")")
    return 0
