"""Store commands for `encoderscope`: ingest, search, info, remove.

The parser (app/cli/__init__.py) calls `register(subparsers)`; each command sets `func=handler(args) -> exit code`.
"""
from __future__ import annotations

import contextlib
import json
import shlex
import signal
import sys

from app.cli.options import add_index_option
from core.encoder.sources import DEFAULT_MODEL
from core.errors import InputError

MAX_BAD_LINES_SHOWN = 20


def _add_model_options(p, store_default: bool = False):
    """The shared model options, with None for --model/--pooling: "the store's" (a new store gets
    minilm + mean, which the help says unless the command needs an existing store)."""
    from app.cli.options import add_model_options
    add_model_options(p, store_default="existing" if store_default else "new")
    p.set_defaults(model=None, pooling=None)


def _add_encoding_option(p):
    from core.readers import COMMON_ENCODINGS
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
                        "and second copies of a text")
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


# ------------------------------------------------------------------------------------------
class _Inputs:
    """The (text, metadata) items of every FILE, read again as they are embedded: memory stays
    bounded by the ingest's window, not by the corpus. `len()` is the number of sentences found
    by the first pass (scan_inputs), which a file changed in between may make wrong for the
    progress bar only."""

    def __init__(self, args, count: int):
        self.args, self.count = args, count

    def __len__(self):
        return self.count

    def __iter__(self):
        from core.readers import Sentence, read_file
        a = self.args
        for f in a.files:
            for rec in read_file(f, column=a.column, field=a.field, encoding=a.encoding):
                if isinstance(rec, Sentence):
                    yield rec.text, rec.metadata


def _read_inputs(args):
    """(items, Collected of everything but the sentences) from every FILE: a first pass counts
    and checks, so a binary, missing or unreadable file stops the ingest before anything is
    embedded; the items are read again as they are embedded."""
    from core.readers import BadLine, Blank, Collected, NoLetters, read_file
    count, rest = 0, Collected([], [])
    for f in args.files:
        for rec in read_file(f, column=args.column, field=args.field, encoding=args.encoding):
            if isinstance(rec, BadLine):
                rest.bad.append(rec)
            elif isinstance(rec, NoLetters):
                rest.no_letters += 1
            elif isinstance(rec, Blank):
                rest.blank += 1
            else:
                count += 1
    return _Inputs(args, count), rest


def _report_inputs(args, items, rest) -> None:
    """Say what was skipped (lines, encodings, symbol-only lines); an error when no file gave a
    single sentence."""
    from core.readers import other_encoding_hint
    bad, undecodable = rest.bad, rest.undecodable
    hint = f"; {other_encoding_hint()}" if undecodable and args.encoding is None else ""
    if not len(items) and args.files:
        names = ", ".join(args.files)
        if undecodable:
            first = undecodable[0]
            raise InputError(f"nothing to ingest: no line of {names} could be read as "
                             f"{args.encoding or 'UTF-8'} (line {first.row}: {first.reason}){hint}")
        why = [f"{len(bad)} unreadable, the first {bad[0]}"] if bad else []
        why += [f"{rest.no_letters} without any letter or digit"] if rest.no_letters else []
        raise InputError(f"nothing to ingest: {names} has no text lines"
                         + (f" ({'; '.join(why)})" if why else ""))
    for b in bad[:MAX_BAD_LINES_SHOWN]:
        _err(f"skipped {b}")
    if len(bad) > MAX_BAD_LINES_SHOWN:
        _err(f"... and {len(bad) - MAX_BAD_LINES_SHOWN} more unreadable lines")
    if rest.no_letters:
        _err(f"note: skipped {rest.no_letters} line(s) without any letter or digit")
    if undecodable:
        _err(f"note: {len(undecodable)} line(s) could not be read as {args.encoding or 'UTF-8'} "
             f"and were skipped{hint}")


def cmd_ingest(args) -> int:
    from index import corpus
    from index import fingerprint as fpmod
    from index.base import AddResult
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
    items, rest = _read_inputs(args)
    _report_inputs(args, items, rest)
    bad, blank = rest.bad, rest.blank
    loc = _location(args)
    if args.whiten:
        return _ingest_whitened(args, items, rest, loc)

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
                    fpmod.check(store.model_fingerprint_dict, fp, "the texts to add", where=f"in {loc.describe()}",
                                hint=_mismatch_hint(args, store, loc, model, pooling, "ingest"))
        except BaseException:
            store.close()
            raise
    else:
        if not args.files:
            raise InputError(f"there is no store at {loc} to rebuild")
        model = args.model or DEFAULT_MODEL
        backend = _backend(args, model)
        pooling = backend.choose_pooling(args.pooling)
        store = corpus.create_corpus(loc, backend, pooling, index=args.index)

    from core.errors import Terminated
    result = AddResult(ids=[])
    interrupted = reindexed = False
    signal_name = "Ctrl-C"
    before = store.count()
    bar = _progress_bar(len(items), args.quiet)
    try:
        try:
            store.add_stream(items, backend, pooling=pooling, batch_size=args.batch_size,
                             progress=lambda done, total: bar.update(done - bar.n), result=result)
        except KeyboardInterrupt as e:
            interrupted = True
            signal_name = "SIGTERM" if isinstance(e, Terminated) else signal_name
        except StoreUnavailable as e:
            raise _kept(e, result) from None
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
        except KeyboardInterrupt as e:   # a second signal: the database holds every commit
            interrupted = True
            signal_name = "SIGTERM" if isinstance(e, Terminated) else signal_name
        total = store.count()
        if interrupted:
            # Ctrl-C can land between a batch's commit and its tally: the database says what
            # was added (an ingest only adds).
            result.added = total - before
    finally:
        try:
            store.close()
        except KeyboardInterrupt:
            interrupted = True
    skipped = blank + len(bad) + rest.no_letters
    no_letters = f", no letter or digit {rest.no_letters}" if rest.no_letters else ""
    print(f"added {result.added}, duplicates {result.duplicates}, skipped {skipped} "
          f"(blank {blank}, unreadable {len(bad)}{no_letters}), truncated {result.truncated}; "
          f"{loc.describe()} holds {total} sentences"
          + (f" (index: {args.index})" if reindexed else ""))
    if result.truncated:
        print(f"note: {result.truncated} of the texts were longer than the {backend.max_length} tokens "
              f"{backend.model_name} reads: only their first {backend.max_length} tokens were embedded",
              file=sys.stderr)
    if interrupted:
        _err(f"interrupted by {signal_name}: the {total} sentences committed before it are kept; "
             "run the same ingest again to add the rest (what is stored is not added twice)")
        return 130 if signal_name == "Ctrl-C" else 128 + signal.SIGTERM
    return 0


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
    model = args.model or DEFAULT_MODEL
    pooling = args.pooling or "mean"
    backend = _backend(args, model)
    bar = _progress_bar(len(items), args.quiet)
    try:
        store, result = corpus.create_whitened_corpus(
            loc, backend, pooling, list(items), dims=args.whiten_dims, index=args.index,
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
    from index.errors import StoreUnavailable
    msg = str(e).replace(" Nothing was changed locally.", "")
    return StoreUnavailable(
        f"{msg} The {result.added} new sentences this run stored before that are kept; run "
        "the same command again once the server is back to add the rest (stored texts are "
        "skipped as duplicates).")


def _mismatch_hint(args, store, loc, model, pooling, command: str) -> str:
    """What to do when --model/--pooling differ from the store's: two commands that work as
    written (tests/test_cli_messages.py runs them)."""
    import shlex
    given = " and ".join(f for f, v in (("--model", args.model), ("--pooling", args.pooling)) if v)
    keep = (f"`encoderscope search {shlex.quote(args.query)} --store {shlex.quote(str(loc))}`"
            if command == "search" else f"the same ingest command without {given}")
    if store.whitening is not None:    # re-embedding cannot keep a transform fitted for its model
        return (f"use the store's own {store.model_name} ({store.pooling} pooling) with {keep}; a "
                f"whitened store keeps the model its whitening was fitted for, so for {model} "
                f"({pooling} pooling) ingest the texts into a new store (with --whiten to whiten them)")
    rebuild = (f"`encoderscope ingest --rebuild --model {shlex.quote(str(model))} --pooling {pooling} "
               f"--store {shlex.quote(str(loc))}`")
    return (f"use the store's own {store.model_name} ({store.pooling} pooling) with {keep}, or re-embed "
            f"its {store.count()} sentences with {model} ({pooling} pooling) first: {rebuild}")


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
    from index import fingerprint as fpmod
    from index.locations import open_store

    if args.k < 1:
        raise InputError("-k must be at least 1")
    loc = _location(args)
    store = open_store(loc, writable=False)
    try:
        model = args.model or store.model_name
        args.backend, encoder_note = store_backend(args, store)
        if encoder_note and store.encoders is not None:
            print(f"note: {encoder_note}", file=sys.stderr)
        backend = _backend(args, model)
        if args.pooling and args.pooling != store.pooling or args.model:
            fp = backend.fingerprint(pooling=args.pooling or store.pooling)
            fpmod.check(store.model_fingerprint_dict, fp, "queries", where=f"in {loc.describe()}",
                        hint=_mismatch_hint(args, store, loc, model, args.pooling or store.pooling, "search"))
        if store.count() == 0:
            raise InputError(f"{loc.describe()} holds no sentences yet: nothing to search; add "
                             f"some with `encoderscope ingest FILE --store {shlex.quote(str(loc))}`")
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
    report = None
    if (args.repair or args.check) and loc.is_milvus:
        return _check_milvus(args, loc)
    if args.repair:
        store = open_store(loc, writable=True, repair=True, verify=True)
    else:
        store = open_store(loc, writable=False, **({"verify": True} if args.check else {}))
    try:
        if args.repair or args.check:
            report = store.check_report
        info = store.info()
        meaning = _check_meaning(args, store) if args.check else None
    finally:
        store.close()
    if report is not None:
        _print_check(report, info, repaired=args.repair)
    if meaning is not None:
        _err(meaning)
    from index.migrate import incomplete_source
    source = incomplete_source(loc)
    incomplete = source is not None
    if incomplete:
        _err(f"warning: {loc.describe()} is an incomplete copy: migrating {source} into it was "
             "interrupted or failed before the copy was verified; run the same "
             f"`encoderscope migrate --from {shlex.quote(source)} --to {shlex.quote(str(loc))}` again")
    if args.json:
        keys = ("count", "model", "dim", "index", "bytes")
        json.dump({**{k: info[k] for k in keys}, "whitening": info.get("whitening"),
                   "complete": not incomplete}, sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        fp = info["fingerprint"]
        print(f"store     {info['path']}" + ("  (INCOMPLETE: an unverified migrate copy)"
                                                 if incomplete else ""))
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
        print(f"on disk   {_human(info['bytes'])}")
    return 0


def _check_meaning(args, store) -> str | None:
    """A line on the store's model (its fingerprint, then a re-embedded sample); raises
    ModelMismatch when the model at hand is not the network that wrote the vectors."""
    from core.errors import EncoderscopeError
    from index import fingerprint as fpmod
    from index.errors import ModelMismatch
    from index.meaning_check import check_meaning, describe_failure
    if store.count() == 0:
        return None
    try:
        backend = _backend(args, store.model_name)
    except EncoderscopeError as e:
        return f"check: the texts were not embedded again: the store's model cannot be loaded ({e})"
    fp = backend.fingerprint(pooling=store.pooling)
    remedy = store.mismatch_remedy(fp)
    fpmod.check(store.model_fingerprint_dict, fp, "vectors of the model now at hand",
                where=f"at {store.where}", **remedy)
    result = check_meaning(store, backend)
    if not result.ok:
        raise ModelMismatch(f"{describe_failure(result)}; {remedy['hint']}", store_model=store.model_name,
                            other_model=store.model_name, rebuild=remedy["rebuild"])
    return (f"check: ok: {result.checked} sampled sentences embedded again with "
            f"{store.model_name} give their stored vectors")


def _check_milvus(args, loc) -> int:
    """info --check / --repair on a Milvus store: every row read back (index/milvus/check.py)
    and a sample of vectors re-embedded with the store's model."""
    from index.errors import StoreCorrupted
    from index.locations import open_store
    store = open_store(loc, writable=bool(args.repair))
    try:
        backend = _backend(args, getattr(args, "model", None) or store.model_name)
        report = store.check(backend, repair=bool(args.repair))
        count = store.count()
    finally:
        store.close()
    what = "repair" if args.repair else "check"
    hidden, twice = report["hidden_ids"], report["duplicates"]
    extra = sum(len(ids) - 1 for ids in twice.values())
    problems = []
    if hidden:
        problems.append(f"{len(hidden)} id{'s' if len(hidden) != 1 else ''} hide another "
                        f"sentence behind them ({', '.join(map(str, hidden[:10]))}"
                        f"{' ...' if len(hidden) > 10 else ''})")
    if extra:
        problems.append(f"{extra} sentence{'s are' if extra != 1 else ' is'} stored twice")
    if report["wrong_hash"]:
        problems.append(f"{len(report['wrong_hash'])} rows' hash is not their text's")
    if report["vectors_off"]:
        problems.append(f"{len(report['vectors_off'])} of {report['sampled']} sampled vectors "
                        f"are not their text's embedding (ids {report['vectors_off'][:10]})")
    if problems and not args.repair:
        raise StoreCorrupted(f"{loc.describe()}: " + "; ".join(problems), remedy="repair")
    if args.repair and report.get("repaired"):
        done = report["repaired"]
        _err(f"repair: dropped {done['hidden_dropped']} hidden rows (ingest their files again "
             f"to add those sentences back) and {done['duplicates_removed']} duplicate texts")
    _err(f"{what}: ok: {report['readable']} sentences read back of {report['rows']} rows the "
         f"server counts, {len(twice)} texts stored twice, {report['sampled']} vectors "
         f"re-embedded and compared; the store holds {count}")
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
    verified = info["count"] if rows is None else rows - len(aside)
    kept = f" (the {len(aside)} set aside not counted)" if aside else ""
    _err(f"{what}: ok: {verified} sentences verified{kept} (checksums, unit vectors), the index "
         "holds exactly the database's vectors")
    if report.get("unchecked"):
        _err(f"{what}: {report['unchecked']} of them were written before row checksums: only "
             "their vectors could be checked; the next ingest, remove or repair adds checksums")


def cmd_remove(args) -> int:
    from index.locations import open_store
    # ids are 64-bit signed in every store: a larger number names no sentence
    possible = [i for i in args.ids if 0 <= i < 1 << 63]
    with open_store(_location(args), writable=True) as store:
        gone = store.remove(possible)
        left = store.count()
    missing = [i for i in dict.fromkeys(args.ids) if i not in set(gone)]
    print(f"removed {len(gone)} sentence{'s' if len(gone) != 1 else ''}; the store holds {left}")
    if missing:
        _err(f"error: no sentence with id {', '.join(map(str, missing))} in {_location(args).describe()} "
             "(the others were removed)" if gone else
             f"error: no sentence with id {', '.join(map(str, missing))} in {_location(args).describe()}")
        return 2
    return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
