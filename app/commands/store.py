"""Store commands for `encoderscope`: ingest, search, info, remove.

app/cli.py calls `register(subparsers)`; each command sets `func=handler(args) -> exit code`.
"""
from __future__ import annotations

import contextlib
import json
import sys

from core.errors import InputError
from core.sources import DEFAULT_MODEL

MAX_BAD_LINES_SHOWN = 20


def _add_model_options(p):
    from app.cli import add_model_options
    add_model_options(p)
    # None = "the store's model/pooling" (a new store gets minilm + mean).
    p.set_defaults(model=None, pooling=None)


def _add_store_option(p):
    p.add_argument("--store", metavar="STORE", default=None,
                   help="a store folder (FAISS), milvus-lite:FOLDER (embedded Milvus Lite) or "
                        "http(s)://HOST:PORT[/DB][?collection=NAME] (a Milvus server; token from "
                        "$ENCODERSCOPE_MILVUS_TOKEN). Default: $ENCODERSCOPE_STORE, else the "
                        "user data folder, e.g. ~/.local/share/encoderscope/stores/default")


def register(subparsers) -> None:
    p = subparsers.add_parser("ingest", help="embed sentences from .txt/.csv/.jsonl files into a store")
    p.add_argument("files", nargs="+", metavar="FILE", help=".txt (one sentence a line), .csv or .jsonl")
    _add_store_option(p)
    _add_model_options(p)
    p.add_argument("--column", metavar="NAME", help="CSV column holding the text (default: 'text' "
                                                    "or the only column)")
    p.add_argument("--field", metavar="NAME", help="JSONL field holding the text (default: text)")
    p.add_argument("--index", choices=("auto", "flat", "hnsw", "sq8", "ivf"), default="auto",
                   help="index kind of a new store: exact (flat), approximate (hnsw, ivf), "
                        "8-bit quantised (sq8) or auto (FAISS: exact, ivf from 200k sentences; "
                        "Milvus Lite FLAT; Milvus server HNSW; default)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="sentences per committed batch (default 256)")
    p.add_argument("--rebuild", action="store_true",
                   help="if the store was built with another model, re-embed all its sentences "
                        "with this one first")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = subparsers.add_parser("search", help="the stored sentences nearest to a query")
    p.add_argument("query", metavar="QUERY")
    _add_store_option(p)
    _add_model_options(p)
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_search)

    p = subparsers.add_parser("info", help="what a store holds")
    _add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--repair", action="store_true",
                   help="rebuild a damaged index file from the vectors kept in the database")
    p.set_defaults(func=cmd_info)

    p = subparsers.add_parser("remove", help="remove sentences from a store by id")
    p.add_argument("ids", nargs="+", type=int, metavar="ID")
    _add_store_option(p)
    p.set_defaults(func=cmd_remove)


def _location(args):
    from index.locations import parse_location
    return parse_location(args.store)


def _backend(args, model):
    from core.backend import get_backend
    return get_backend(model, getattr(args, "backend", "scratch") or "scratch",
                       device=getattr(args, "device", None),
                       precision=getattr(args, "precision", "fp32") or "fp32")


def _err(msg):
    print(msg, file=sys.stderr)


# ------------------------------------------------------------------------------------------
def _read_inputs(args):
    from index.readers import Blank, BadLine, read_file
    items, bad, blank = [], [], 0
    for f in args.files:
        for rec in read_file(f, column=args.column, field=args.field):
            if isinstance(rec, Blank):
                blank += 1
            elif isinstance(rec, BadLine):
                bad.append(rec)
            else:
                items.append((rec.text, rec.metadata))
    return items, bad, blank


def cmd_ingest(args) -> int:
    from index import corpus
    from index import fingerprint as fpmod
    from index.base import AddResult

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    items, bad, blank = _read_inputs(args)
    for b in bad[:MAX_BAD_LINES_SHOWN]:
        _err(f"skipped {b}")
    if len(bad) > MAX_BAD_LINES_SHOWN:
        _err(f"... and {len(bad) - MAX_BAD_LINES_SHOWN} more unreadable lines")
    loc = _location(args)

    store = corpus.open_corpus(loc, writable=True)
    if store is not None:
        backend = None
        try:
            model = args.model or store.model_name
            pooling = args.pooling or store.pooling
            backend = _backend(args, model)
            fp = backend.fingerprint(pooling=pooling)
            differ = corpus.mismatch(store, backend, pooling)
            if differ is not None:
                was, now = differ.describe()
                if args.rebuild or _ask(f"{loc.describe().capitalize()} was built with {was}, not "
                                        f"{now}. Re-embed all {store.count()} sentences "
                                        f"with {model}? [y/N] "):
                    _rebuild(store, backend, pooling, args.quiet)
                else:
                    fpmod.check(store.fingerprint_dict, fp, f"texts embedded with --model {model}",
                                where=f"in {loc.describe()}", hint=store._rebuild_hint(fp))
        except BaseException:
            store.close()
            raise
    else:
        model = args.model or DEFAULT_MODEL
        pooling = args.pooling or "mean"
        backend = _backend(args, model)
        store = corpus.create_corpus(loc, backend, pooling, index=args.index)

    result = AddResult(ids=[])
    interrupted = reindexed = False
    bar = _progress_bar(len(items), args.quiet)
    try:
        try:
            store.add_stream(items, backend, pooling=pooling, batch_size=args.batch_size,
                             progress=lambda done, total: bar.update(done - bar.n), result=result)
        except KeyboardInterrupt:
            interrupted = True
        finally:
            bar.close()
        try:
            slow = store.pending_reindex()
            if slow:
                _err(slow + " ...")
                with _index_progress(args.quiet) as progress:
                    store.prepare_index(progress=progress)
            store.save()
            if (not interrupted and args.index != "auto" and args.index != store.index_kind):
                # --index on an existing store: switch it (from the stored vectors, no model)
                _err(f"switching the index of {loc.describe()} from {store.index_kind} to "
                     f"{args.index} ...")
                with _index_progress(args.quiet) as progress:
                    store.reindex(args.index, **({} if loc.is_milvus else {"progress": progress}))
                reindexed = True
        except KeyboardInterrupt:   # a second Ctrl-C: the database still holds every commit
            interrupted = True
        total = store.count()
    finally:
        try:
            store.close()
        except KeyboardInterrupt:
            interrupted = True
    skipped = blank + len(bad)
    print(f"added {result.added}, duplicates {result.duplicates}, skipped {skipped} "
          f"(blank {blank}, unreadable {len(bad)}), truncated {result.truncated}; "
          f"{loc.describe()} holds {total} sentences"
          + (f" (index: {args.index})" if reindexed else ""))
    if interrupted:
        _err("interrupted: the sentences committed before Ctrl-C are kept")
        return 130
    return 0


def _ask(question: str) -> bool:
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        return False
    sys.stderr.write(question)
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _rebuild(store, backend, pooling, quiet):
    bar = _progress_bar(store.count(), quiet, desc="re-embedding")
    last = [0]

    def progress(done, total):
        bar.update(done - last[0])
        last[0] = done
    try:
        store.rebuild(backend, pooling, progress=progress)
    finally:
        bar.close()


@contextlib.contextmanager
def _index_progress(quiet):
    """progress(done, total) for an index built in chunks, shown as a bar of vectors."""
    bar = _progress_bar(0, quiet, desc="indexing", unit=" vectors")

    def progress(done, total):
        bar.total = total
        bar.update(done - bar.n)
    try:
        yield progress
    finally:
        bar.close()


def _progress_bar(total, quiet, desc="embedding", unit=" sentences"):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=False, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


# ------------------------------------------------------------------------------------------
def cmd_search(args) -> int:
    from index import fingerprint as fpmod
    from index.locations import open_store

    if args.k < 1:
        raise InputError("-k must be at least 1")
    loc = _location(args)
    store = open_store(loc, readonly=True)
    try:
        model = args.model or store.model_name
        backend = _backend(args, model)
        if args.pooling and args.pooling != store.pooling or args.model:
            fp = backend.fingerprint(pooling=args.pooling or store.pooling)
            fpmod.check(store.fingerprint_dict, fp, f"queries embedded with --model {model}",
                        where=f"in {loc.describe()}", hint=store._rebuild_hint(fp))
        hits = store.search(args.query, k=args.k, backend=backend)
    finally:
        store.close()
    if args.json:
        json.dump({"results": [h.to_dict() for h in hits]}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        for h in hits:
            print(f"{h.score:.4f}  {h.id:>6}  {h.text}")
    return 0


def cmd_info(args) -> int:
    from index.locations import open_store
    loc = _location(args)
    if args.repair:
        if loc.is_milvus:
            raise InputError("--repair is for FAISS store folders (Milvus repairs itself on open)")
        store = open_store(loc, writable=True, repair=True)
    else:
        store = open_store(loc, readonly=True)
    try:
        info = store.info()
    finally:
        store.close()
    if args.json:
        keys = ("count", "model", "dim", "index", "bytes")
        json.dump({k: info[k] for k in keys}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        fp = info["fingerprint"]
        print(f"store     {info['path']}")
        print(f"sentences {info['count']}")
        print(f"model     {info['model']} ({info['pooling']} pooling, weights "
              f"{str(fp.get('weights_sha256', ''))[:12]})")
        print(f"dim       {info['dim']}")
        print(f"index     {info['index']} {info['index_params'] or ''}".rstrip())
        print(f"on disk   {_human(info['bytes'])}")
    return 0


def cmd_remove(args) -> int:
    from index.locations import open_store
    with open_store(_location(args), writable=True) as store:
        gone = store.remove(args.ids)
        left = store.count()
    missing = [i for i in dict.fromkeys(args.ids) if i not in set(gone)]
    print(f"removed {len(gone)} sentence{'s' if len(gone) != 1 else ''}; the store holds {left}")
    if missing:
        _err(f"no sentence with id {', '.join(map(str, missing))}")
        return 1
    return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
