"""Store commands for `encoderscope`: ingest, search, info, remove.

core/cli.py calls `register(subparsers)`; each command sets `func=handler(args) -> exit code`.
`python -m index.cli ...` runs these commands alone (same behaviour).
"""
from __future__ import annotations

import json
import sys

from core.errors import InputError

MAX_BAD_LINES_SHOWN = 20


def _add_model_options(p):
    try:
        from core.cli import add_model_options
        add_model_options(p)
    except ImportError:  # pragma: no cover - core.cli not there yet
        p.add_argument("--model")
        p.add_argument("--backend", choices=("scratch", "hf"), default="scratch")
        p.add_argument("--device", default=None)
        p.add_argument("--precision", choices=("fp32", "bf16"), default="fp32")
        p.add_argument("--pooling", choices=("mean", "cls", "max"))
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
                   help="index kind of a new store: exact (flat), approximate (hnsw), 8-bit "
                        "quantised (sq8), ivf (Milvus only) or auto (FAISS: exact, HNSW from "
                        "200k sentences; Milvus Lite FLAT; Milvus server HNSW; default)")
    p.add_argument("--batch-size", type=int, default=256,
                   help="sentences per committed batch (default 256)")
    p.add_argument("--rebuild", action="store_true",
                   help="if the store was built with another model, re-embed all its sentences "
                        "with this one first")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_cli_words(cmd_ingest))

    p = subparsers.add_parser("search", help="the stored sentences nearest to a query")
    p.add_argument("query", metavar="QUERY")
    _add_store_option(p)
    _add_model_options(p)
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli_words(cmd_search))

    p = subparsers.add_parser("info", help="what a store holds")
    _add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true",
                   help="verify every sentence (checksum, unit-length vector) and every index "
                        "vector against the database; names damaged rows by id (FAISS stores)")
    p.add_argument("--repair", action="store_true",
                   help="verify like --check, set rows that fail their checksum aside (kept in "
                        "the database's 'damaged' table) and rebuild a damaged, missing or "
                        "foreign index and manifest from the database")
    p.set_defaults(func=_cli_words(cmd_info))

    p = subparsers.add_parser("remove", help="remove sentences from a store by id")
    p.add_argument("ids", nargs="+", type=int, metavar="ID")
    _add_store_option(p)
    p.set_defaults(func=_cli_words(cmd_remove))


def _location(args):
    from .locations import parse_location
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
    from .readers import BadLine, Blank, read_file
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
    from . import fingerprint as fpmod
    from .base import AddResult
    from .locations import open_store, store_exists

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    items, bad, blank = _read_inputs(args)
    for b in bad[:MAX_BAD_LINES_SHOWN]:
        _err(f"skipped {b}")
    if len(bad) > MAX_BAD_LINES_SHOWN:
        _err(f"... and {len(bad) - MAX_BAD_LINES_SHOWN} more unreadable lines")
    loc = _location(args)
    if args.index == "ivf" and not loc.is_milvus:
        raise InputError("--index ivf is for Milvus stores (milvus-lite:FOLDER or a server)")

    if store_exists(loc):
        store = open_store(loc, writable=True)
        backend = None
        try:
            model = args.model or store.model_name
            pooling = args.pooling or store.pooling
            backend = _backend(args, model)
            fp = backend.fingerprint(pooling=pooling)
            if not fpmod.compatible(store.fingerprint_dict, fpmod.as_dict(fp)):
                if args.rebuild or _ask(f"{loc.describe().capitalize()} was built with "
                                        f"{fpmod.describe(store.fingerprint_dict)}, not "
                                        f"{fp.describe()}. Re-embed all {store.count()} sentences "
                                        f"with {model}? [y/N] "):
                    _rebuild(store, backend, pooling, args.quiet)
                else:
                    fpmod.check(store.fingerprint_dict, fp, f"texts embedded with --model {model}",
                                where=f"in {loc.describe()}", hint=store._rebuild_hint(fp))
        except BaseException:
            store.close()
            raise
    else:
        model = args.model or "minilm"
        pooling = args.pooling or "mean"
        backend = _backend(args, model)
        fp = backend.fingerprint(pooling=pooling)
        store = open_store(loc, writable=True, create=True, fingerprint=fp, index=args.index)

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
            store.save()
            if (not interrupted and args.index != "auto" and args.index != store.index_kind):
                # --index on an existing store: switch it (from the stored vectors, no model)
                _err(f"switching the index of {loc.describe()} from {store.index_kind} to "
                     f"{args.index} ...")
                store.reindex(args.index)
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


def _progress_bar(total, quiet, desc="embedding"):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit=" sentences", unit_scale=False, disable=quiet,
                file=sys.stderr, dynamic_ncols=True, smoothing=0.1)


# ------------------------------------------------------------------------------------------
def cmd_search(args) -> int:
    from . import fingerprint as fpmod
    from .locations import open_store

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
    from .locations import open_store
    loc = _location(args)
    report = None
    if (args.repair or args.check) and loc.is_milvus:
        raise InputError(f"--{'repair' if args.repair else 'check'} is for FAISS store folders "
                         "(Milvus keeps its own segments consistent)")
    if args.repair:
        store = open_store(loc, writable=True, repair=True, verify=True)
    else:
        store = open_store(loc, readonly=True, **({"verify": True} if args.check else {}))
    try:
        if args.repair or args.check:
            report = store.check_report
        info = store.info()
    finally:
        store.close()
    if report is not None:
        _print_check(report, info, repaired=args.repair)
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


def _print_check(report: dict, info: dict, repaired: bool) -> None:
    """What --check / --repair found, on stderr (stdout keeps the info, JSON included)."""
    rows = report.get("rows")
    aside = report.get("set_aside") or []
    if aside:
        shown = ", ".join(map(str, aside[:20])) + (" ..." if len(aside) > 20 else "")
        _err(f"repair: set aside {len(aside)} damaged row{'s' if len(aside) != 1 else ''} "
             f"(id {shown}) into the table 'damaged' of store.db; ingest those texts again")
    for name in report.get("moved", []):
        _err(f"repair: moved {name.split('.not-a-file-')[0]}, which was not a regular file, "
             f"out of the way as {name}")
    if repaired and report.get("rebuilt"):
        _err(f"repair: rebuilt the index and manifest from the {info['count']} sentences in the "
             "database")
    what = "repair" if repaired else "check"
    _err(f"{what}: ok: {rows if rows is not None else info['count']} sentences verified "
         "(checksums, unit vectors), the index holds exactly the database's vectors")
    if report.get("unchecked"):
        _err(f"{what}: {report['unchecked']} of them were written before row checksums: only "
             "their vectors could be checked; the next ingest, remove or repair adds checksums")


def _cli_words(func):
    """Word a store error's remedy as the command that applies it (the app words it as a
    menu action): a StoreCorrupted with remedy "repair" gets `encoderscope info --repair`."""
    import functools
    import shlex

    from .errors import StoreCorrupted

    @functools.wraps(func)
    def run(args):
        try:
            return func(args)
        except StoreCorrupted as e:
            if e.remedy != "repair" or getattr(args, "repair", False):
                raise
            where = f" --store {shlex.quote(args.store)}" if args.store else ""
            raise StoreCorrupted(f"{e}: run `encoderscope info --repair{where}`", path=e.path,
                                 remedy=e.remedy, damaged_ids=e.damaged_ids) from None
    return run


def cmd_remove(args) -> int:
    from .locations import open_store
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


# ------------------------------------------------------------------------------------------
def main(argv=None) -> int:
    """Stand-alone entry (`python -m index.cli ...`): the `encoderscope` command line."""
    from core.cli import main as encoderscope_main
    return encoderscope_main(argv)


if __name__ == "__main__":
    sys.exit(main())
