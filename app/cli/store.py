"""Store commands for `encoderscope`: ingest, search, info, remove.

The parser (app/cli/__init__.py) calls `register(subparsers)`; each command sets `func=handler(args) -> exit code`.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys

from app.cli.ingest_files import read_inputs, report_inputs
from app.cli.options import add_index_option
from core.encoder.sources import DEFAULT_MODEL
from core.errors import InputError


def _add_model_options(p, store_default: bool = False):
    """The shared model options, with None for --model/--pooling: "the store's" (a new store gets
    minilm + mean, which the help says unless the command needs an existing store)."""
    from app.cli.options import add_model_options
    add_model_options(p, store_default="existing" if store_default else "new")
    p.set_defaults(model=None, pooling=None)


def _add_encoding_option(p):
    from core.text_file import COMMON_ENCODINGS
    p.add_argument("--encoding", metavar="NAME", default=None,
                   help="the files' text encoding when they are not UTF-8, e.g. "
                        f"{', '.join(COMMON_ENCODINGS[:-1])} (default: UTF-8, or what a "
                        "byte-order mark says)")


def add_store_option(p):
    p.add_argument("--store", metavar="STORE", default=None,
                   help="a store folder (FAISS), milvus-lite:FOLDER (embedded Milvus Lite) or "
                        "http(s)://HOST:PORT[/DB][?collection=NAME] (a Milvus server; token from "
                        "$ENCODERSCOPE_MILVUS_TOKEN). Default: $ENCODERSCOPE_STORE, else the "
                        "user data folder, e.g. ~/.local/share/encoderscope/stores/default")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ingest", help="embed sentences from .txt/.csv/.jsonl files into a store",
        description="Embed sentences from .txt/.csv/.jsonl files into a store. A sentence is "
                    "stored once: a text equal to a stored one after trimming spaces at both ends "
                    "(case and inner spaces count) is counted as a duplicate and not added again. "
                    "Blank lines and lines without any letter or digit are skipped; a file that "
                    "looks binary is refused.")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help=".txt (one sentence a line), .csv or .jsonl (none: only with --rebuild)")
    p.add_argument("--sample-corpus", action="store_true",
                   help="also ingest the sample corpus shipped with Encoderscope (576 sentences)")
    add_store_option(p)
    _add_model_options(p)
    p.add_argument("--column", metavar="NAME", help="CSV column holding the text (default: one named "
                                                    "text, sentence, sentences, content or body, "
                                                    "else the only column)")
    p.add_argument("--field", metavar="NAME", help="JSONL field holding the text (default: the first "
                                                   "of text, sentence, sentences, content, body; a "
                                                   "line that is a JSON string is the text)")
    _add_encoding_option(p)
    add_index_option(p)
    p.add_argument("--batch-size", type=int, default=256,
                   help="sentences per committed batch (default 256)")
    p.add_argument("--whiten", action="store_true",
                   help="a new store keeps its vectors BERT-whitened (Su et al., 2021): mean and "
                        "whitening matrix fitted on the vectors of the FILEs' sentences, kept with "
                        "the store (whitening.safetensors, named in its fingerprint) and applied "
                        "to every later text and query (FAISS stores)")
    p.add_argument("--whiten-dims", type=int, metavar="K", default=None,
                   help="with --whiten: keep the first K whitened dimensions (default: all)")
    p.add_argument("--rebuild", action="store_true",
                   help="if the store was built with another model or pooling, re-embed all its "
                        "sentences with this one first (FILEs may then be left out)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_ingest)

    p = subparsers.add_parser("search", help="the stored sentences nearest to a query")
    p.add_argument("query", metavar="QUERY")
    add_store_option(p)
    _add_model_options(p, store_default=True)
    p.add_argument("-k", type=int, default=10, help="number of results (default 10)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_search, backend=None)   # None: the store's own encoder

    p = subparsers.add_parser("info", help="what a store holds")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true",
                   help="verify every sentence (checksum, unit-length vector) and every index "
                        "vector against the database; names damaged rows by id (FAISS stores). "
                        "Milvus: every row read back against the server's count (ids hiding "
                        "another row), texts stored twice, and a sample of vectors re-embedded")
    p.add_argument("--repair", action="store_true",
                   help="verify like --check, set rows that fail their checksum aside (kept in "
                        "the database's 'damaged' table) and rebuild a damaged, missing or "
                        "foreign index and manifest from the database. Milvus: drop hidden rows "
                        "and second copies of a text, write wrong hashes again and embed wrong "
                        "vectors again")
    p.add_argument("--full", action="store_true",
                   help="with --check or --repair on a Milvus store: embed every sentence again "
                        "and compare it with its stored vector (default: a sample of 32)")
    p.set_defaults(func=cmd_info)

    p = subparsers.add_parser("remove", help="remove sentences from a store by id")
    p.add_argument("ids", nargs="+", type=int, metavar="ID")
    add_store_option(p)
    p.set_defaults(func=cmd_remove)


def _location(args):
    from index.locations import parse_location
    return parse_location(args.store)


def _backend(args, model):
    from core.encoder.backends import get_backend
    return get_backend(model, getattr(args, "backend", "scratch") or "scratch",
                       device=getattr(args, "device", None),
                       precision=getattr(args, "precision", None))


def _err(msg):
    print(msg, file=sys.stderr)


def cmd_ingest(args) -> int:
    from index import corpus
    from index.errors import StoreUnavailable

    if args.batch_size < 1:
        raise InputError("--batch-size must be at least 1")
    if args.sample_corpus:
        from core.assets import sample_corpus
        args.files = [*args.files, str(sample_corpus())]
    if not args.files and not args.rebuild:
        raise InputError("give at least one FILE to ingest, or --sample-corpus (or --rebuild alone "
                         "to re-embed the store with --model/--pooling)")
    if args.whiten_dims is not None and not args.whiten:
        raise InputError("--whiten-dims goes with --whiten")
    items, rest = read_inputs(args)
    report_inputs(args, items, rest)
    loc = _location(args)
    if args.whiten:
        return _ingest_whitened(args, items, rest, loc)

    opened = corpus.open_for_ingest(loc, lambda model: _backend(args, model), args.model, args.pooling,
                                    index=args.index, create=bool(args.files))
    if opened is None:
        raise InputError(f"there is no store at {loc} to rebuild")
    store, backend, pooling = opened.store, opened.backend, opened.pooling
    result = corpus.Ingested(ids=[])
    reindexed = False
    try:
        if opened.differ is not None:
            was, now = opened.differ.describe()
            if args.rebuild or _ask(f"{loc.describe().capitalize()} was built with {was}, not {now}. "
                                    f"Re-embed all {store.count()} sentences with {backend.model_name}? [y/N] "):
                _rebuild(store, backend, pooling, args.quiet)
            else:
                corpus.require_match(store, backend, pooling)
        bars = _IngestBars(len(items), args.quiet)
        try:
            corpus.ingest(store, items, backend, pooling=pooling, batch_size=args.batch_size,
                          progress=bars.update, keep_ids=False, result=result, count=True)
        except StoreUnavailable as e:
            raise _kept(e, result) from None
        finally:
            bars.close()
        if result.interrupted is None:
            with _index_progress(args.quiet) as progress:
                if args.index not in ("auto", store.index_kind):
                    _err(f"switching the index of {loc.describe()} from {store.index_kind} to {args.index} ...")
                reindexed = corpus.switch_index(store, args.index, progress)
    finally:
        try:
            store.close()
        except KeyboardInterrupt as e:
            result.interrupted = result.interrupted or e
    blank, bad = rest.blank, rest.bad
    skipped = blank + len(bad) + rest.no_letters
    no_letters = f", no letter or digit {rest.no_letters}" if rest.no_letters else ""
    print(f"added {result.added}, duplicates {result.duplicates}, skipped {skipped} "
          f"(blank {blank}, unreadable {len(bad)}{no_letters}), truncated {result.truncated}; "
          f"{loc.describe()} holds {result.total} sentences"
          + (f" (index: {args.index})" if reindexed else ""))
    if result.truncated:
        print(f"note: {result.truncated} of the texts were longer than the {backend.max_length} tokens "
              f"{backend.model_name} reads: only their first {backend.max_length} tokens were embedded",
              file=sys.stderr)
    if result.interrupted is not None:
        from core.errors import Terminated
        sigterm = isinstance(result.interrupted, Terminated)
        _err(f"interrupted by {'SIGTERM' if sigterm else 'Ctrl-C'}: the {result.total} sentences "
             "committed before it are kept; run the same ingest again to add the rest (what is "
             "stored is not added twice)")
        return 128 + signal.SIGTERM if sigterm else 130
    return 0


class _IngestBars:
    """corpus.ingest's progress(done, total, note): a bar of sentences embedded, then (when
    the save rebuilds the index) the note and a bar of vectors indexed."""

    def __init__(self, total, quiet):
        self.quiet, self.note = quiet, None
        self.bar = _progress_bar(total, quiet)

    def update(self, done, total, note):
        if note and note != self.note:
            self.bar.close()
            _err(note + " ...")
            self.note, self.bar = note, _progress_bar(0, self.quiet, desc="indexing", unit=" vectors")
            return
        if note:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self):
        self.bar.close()


def _ingest_whitened(args, items, rest, loc) -> int:
    """ingest --whiten: a new store whose vectors are whitened with a transform fitted on the
    FILEs' own sentences (all embedded first, then stored)."""
    from index import corpus
    from index.locations import store_exists
    if args.rebuild:
        raise InputError("--whiten creates a new store; --rebuild re-embeds an existing one: use one of them")
    if store_exists(loc):
        raise InputError(f"{loc.describe()} already exists: a whitening is fitted on the sentences "
                         "of a new store; choose a new --store for the whitened one")
    backend = _backend(args, args.model or DEFAULT_MODEL)
    bar = _progress_bar(len(items), args.quiet)
    try:
        store, result = corpus.create_whitened_corpus(
            loc, backend, args.pooling or "mean", list(items), dims=args.whiten_dims, index=args.index,
            progress=lambda done, _total: bar.update(done - bar.n))
    finally:
        bar.close()
    try:
        total = store.count()
        w = store.whitening
    finally:
        store.close()
    skipped = rest.blank + len(rest.bad) + rest.no_letters
    print(f"added {result.added}, duplicates {result.duplicates}, skipped {skipped}; "
          f"{loc.describe()} holds {total} sentences, whitened to {w.dims} of {w.input_dim} "
          f"dimensions (fitted on them)")
    return 0


def _kept(e, result):
    """The server went away mid-ingest: say what this run stored (it stays) and how to go on."""
    msg = str(e).replace(" Nothing was changed locally.", "")
    n = result.added
    kept = ("This run had stored no new sentence yet" if n == 0 else
            f"The {n} new sentence{'s' if n != 1 else ''} this run stored before that "
            f"{'are' if n != 1 else 'is'} kept")
    return type(e)(
        f"{msg} {kept}; run the same command again once the server is back to add the rest "
        "(stored texts are skipped as duplicates).")


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
    from index import corpus
    try:
        corpus.reembed(store, backend, pooling, progress=progress)
    finally:
        bar.close()
    fp = store.fingerprint_dict
    _err(f"rebuild: re-embedded {store.count()} sentences with {fp.get('model')} "
         f"({fp.get('pooling')} pooling); the store now uses it")


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
    from app.cli.options import store_backend
    from index import corpus
    from index.locations import open_store

    if args.k < 1:
        raise InputError("-k must be at least 1")
    store = open_store(_location(args), writable=False)
    try:
        args.backend, encoder_note = store_backend(args, store)
        if encoder_note and store.encoders is not None:
            print(f"note: {encoder_note}", file=sys.stderr)
        backend = _backend(args, args.model or store.model_name)
        hits, _ = corpus.search(store, args.query, args.k, backend, args.pooling)
    finally:
        store.close()
    if args.json:
        from app.cli.options import emit_json
        emit_json({"results": [h.to_dict() for h in hits]})
    else:
        for h in hits:
            print(f"{h.score:.4f}  {h.id:>6}  {h.text}")
    return 0


def cmd_info(args) -> int:
    from index import corpus
    loc = _location(args)
    if (args.repair or args.check) and loc.is_milvus:
        return _check_milvus(args, loc)
    found = corpus.describe(loc, check=args.check, repair=args.repair,
                            load_backend=(lambda model: _backend(args, model)) if args.check else None)
    info = found.info
    if found.report is not None:
        _print_check(found.report, info, repaired=args.repair)
    if found.model_error is not None:
        _err(f"check: the texts were not embedded again: the store's model cannot be loaded ({found.model_error})")
    elif found.meaning is not None:
        _err(f"check: ok: {found.meaning.checked} sampled sentences embedded again with "
             f"{info['model']} give their stored vectors")
    source = found.incomplete_source
    if source is not None:
        _err(f"warning: {loc.describe()} is an incomplete copy: migrating {source} into it was "
             "interrupted or failed before the copy was verified; run the same "
             f"`encoderscope migrate --from {shlex.quote(source)} --to {shlex.quote(str(loc))}` again")
    if args.json:
        keys = ("count", "model", "dim", "index", "bytes")
        json.dump({**{k: info[k] for k in keys}, "whitening": info.get("whitening"),
                   "complete": source is None}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    fp = info["fingerprint"]
    print(f"store     {info['path']}" + ("  (INCOMPLETE: an unverified migrate copy)" if source else ""))
    print(f"sentences {info['count']}")
    print(f"model     {info['model']} ({info['pooling']} pooling, weights "
          f"{str(fp.get('weights_sha256', ''))[:12]})")
    print(f"dim       {info['dim']}")
    white = info.get("whitening")
    if white:
        print(f"whitening {white['dims']} of {white['input_dim']} dimensions (BERT-whitening, "
              f"transform {white['sha256'][:12]} in {white.get('file', 'the store')})")
    print(f"index     {info['index']} {info['index_params'] or ''}".rstrip())
    if info.get("index_structure"):               # FAISS folders: what the file holds
        print(f"structure {info['index_structure']}")
    if info.get("engine") == "milvus":       # the server's disks: not measured here
        print("on disk   on the server (not measured from here)")
    else:
        print(f"on disk   {_human(info['bytes'])}")
    return 0


def _check_milvus(args, loc) -> int:
    """info --check / --repair on a Milvus store: every row read back (index/milvus/check.py)
    and a sample (--full: every one) of vectors re-embedded with the store's model."""
    from index import corpus
    from index.errors import StoreCorrupted, StoreError
    report, count = corpus.check_milvus(loc, lambda model: _backend(args, model),
                                        getattr(args, "model", None), repair=bool(args.repair),
                                        full=bool(getattr(args, "full", False)))
    found = _milvus_problems(report)
    if found and not args.repair:
        raise StoreCorrupted(f"{loc.describe()}: " + "; ".join(found), remedy="repair")
    if args.repair:
        done = report["repaired"]
        parts = [f"{n} {what}" for n, what in (
            (done["hidden_dropped"], "hidden rows dropped (ingest their files again to add "
                                     "those sentences back)"),
            (done["duplicates_removed"], "second copies of a text removed"),
            (done["hashes_rewritten"], "hashes written again"),
            (done["vectors_reembedded"], "vectors embedded again")) if n]
        if parts:
            _err("repair: " + ", ".join(parts))
        report = report["after"]
        left = _milvus_problems(report)
        if left:
            raise StoreError(f"repair: {loc.describe()} still has problems it could not "
                             "repair: " + "; ".join(left))
    what = "repair" if args.repair else "check"
    vectors = ("every vector re-embedded and compared" if report.get("full") else
               f"{report['sampled']} sampled vector{'s' if report['sampled'] != 1 else ''} "
               "re-embedded and compared")
    _err(f"{what}: ok: {report['readable']} sentence{'s' if report['readable'] != 1 else ''} "
         f"read back of {report['rows']} row{'s' if report['rows'] != 1 else ''} the server "
         f"counts, no text stored twice, every hash its text's, {vectors}; the store holds "
         f"{count}")
    return 0


def _milvus_problems(report: dict) -> list[str]:
    """What a Milvus check found, in words (empty: nothing)."""
    hidden, twice = report["hidden_ids"], report["duplicates"]
    extra = sum(len(ids) - 1 for ids in twice.values())
    problems = []
    if hidden:
        problems.append(f"{len(hidden)} id{'s' if len(hidden) != 1 else ''} "
                        f"hide{'' if len(hidden) != 1 else 's'} another sentence behind "
                        f"{'them' if len(hidden) != 1 else 'it'} "
                        f"({_ids(hidden)})")
    if extra:
        problems.append(f"{extra} sentence{'s are' if extra != 1 else ' is'} stored twice")
    wrong = report["wrong_hash"]
    if wrong:
        problems.append(f"{len(wrong)} row{'s' if len(wrong) != 1 else ''}' hash is not "
                        f"{'their' if len(wrong) != 1 else 'its'} text's ({_ids(wrong)})")
    off = report["vectors_off"]
    if off:
        of = "" if report.get("full") else f" of {report['sampled']} sampled"
        problems.append(f"{len(off)}{of} vector{'s are' if len(off) != 1 else ' is'} not "
                        f"{'their' if len(off) != 1 else 'its'} text's embedding ({_ids(off)})")
    return problems


def _ids(ids) -> str:
    ids = list(ids)
    return "id" + ("s " if len(ids) != 1 else " ") + ", ".join(map(str, ids[:10])) + \
        (" ..." if len(ids) > 10 else "")


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
    verified = info["count"] if rows is None else rows - len(aside)
    kept = f" (the {len(aside)} set aside not counted)" if aside else ""
    _err(f"{what}: ok: {verified} sentences verified{kept} (checksums, unit vectors), the index "
         "holds exactly the database's vectors")
    if report.get("unchecked"):
        _err(f"{what}: {report['unchecked']} of them were written before row checksums: only "
             "their vectors could be checked; the next ingest, remove or repair adds checksums")


def cmd_remove(args) -> int:
    from index import corpus
    from index.locations import open_store
    loc = _location(args)
    with open_store(loc, writable=True) as store:
        gone, _ = corpus.remove(store, args.ids)
        left = store.count()
    missing = [i for i in dict.fromkeys(args.ids) if i not in set(gone)]
    print(f"removed {len(gone)} sentence{'s' if len(gone) != 1 else ''}; the store holds {left}")
    if missing:
        _err(f"error: no sentence with id {', '.join(map(str, missing))} in {loc.describe()}"
             + (" (the others were removed)" if gone else ""))
        return 2
    return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
