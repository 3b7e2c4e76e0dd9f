"""Store commands for `encoderscope`: ingest, search, remove (info: app/cli/store_info.py).

The parser (app/cli/__init__.py) calls `register(subparsers)`; each command sets `func=handler(args) -> exit code`.
"""
from __future__ import annotations

import contextlib
import signal
import sys

from app.cli import store_info
from app.cli.ingest_files import read_inputs, report_inputs
from app.cli.options import add_index_option, add_store_option, backend_for, store_backend, store_location
from core.encoder.sources import DEFAULT_MODEL
from core.errors import InputError, Terminated
from core.long_lived import freeze_long_lived


def _add_model_options(p, store_default: bool = False):
    """The shared model options, with None for --model/--pooling: "the store's" (a new store gets
    minilm + mean, which the help says unless the command needs an existing store)."""
    from app.cli.options import add_model_options
    add_model_options(p, store_default="existing" if store_default else "new")
    p.set_defaults(model=None, pooling=None)


def _add_encoding_option(p):
    from core.files.text_file import COMMON_ENCODINGS
    p.add_argument("--encoding", metavar="NAME", default=None,
                   help="the files' text encoding when they are not UTF-8, e.g. "
                        f"{', '.join(COMMON_ENCODINGS[:-1])} (default: UTF-8, or what a "
                        "byte-order mark says)")


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
    p.add_argument("--batch-size", type=int, default=None,
                   help="sentences per committed batch (default: a window, sized to about a "
                        "second of the encoder's work)")
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

    store_info.register(subparsers)

    p = subparsers.add_parser("remove", help="remove sentences from a store by id")
    p.add_argument("ids", nargs="+", type=int, metavar="ID")
    add_store_option(p)
    p.set_defaults(func=cmd_remove)


def _err(msg):
    print(msg, file=sys.stderr)


def cmd_ingest(args) -> int:
    from index.corpus import door
    from index.store.errors import StoreUnavailable

    if args.batch_size is not None and args.batch_size < 1:
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
    loc = store_location(args)
    if args.whiten:
        return _ingest_whitened(args, items, rest, loc)

    opened = door.open_for_ingest(loc, lambda model: backend_for(args, model), args.model, args.pooling,
                                    index=args.index, create=bool(args.files))
    if opened is None:
        raise InputError(f"there is no store at {loc} to rebuild")
    store, backend, pooling = opened.store, opened.backend, opened.pooling
    # The model, the store and the rows read are alive until this process ends: out of the cyclic
    # GC's full collections, which would walk them all every few windows (core/long_lived.py)
    freeze_long_lived(collect=False)
    result = door.Ingested(ids=[])
    reindexed = False
    try:
        if opened.differ is not None:
            was, now = opened.differ.describe()
            if args.rebuild or _ask(f"{loc.describe().capitalize()} was built with {was}, not {now}. "
                                    f"Re-embed all {store.count()} sentences with {backend.model_name}? [y/N] "):
                _rebuild(store, backend, pooling, args.quiet)
            else:
                door.require_match(store, backend, pooling)
        bars = _IngestBars(len(items), args.quiet)
        try:
            door.ingest(store, items, backend, pooling=pooling, batch_size=args.batch_size,
                          progress=bars.update, keep_ids=False, result=result, count=True)
        except StoreUnavailable as e:
            raise _kept(e, result, len(items)) from None
        finally:
            bars.close()
        if result.interrupted is None:
            with _index_progress(args.quiet) as progress:
                if args.index not in ("auto", store.index_kind):
                    _err(f"switching the index of {loc.describe()} from {store.index_kind} to {args.index} ...")
                reindexed = door.switch_index(store, args.index, progress)
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
          f"{loc.describe()} holds {_sentences(result.total)}"
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
    """door.ingest's progress(done, total, note): a bar of sentences embedded, then (when
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
    from index.corpus import door
    from index.opening import store_exists
    if args.rebuild:
        raise InputError("--whiten creates a new store; --rebuild re-embeds an existing one: use one of them")
    unfinished = door.unfinished_whitened(loc) if store_exists(loc) else {}
    if unfinished is None:
        raise InputError(f"{loc.describe()} already exists: a whitening is fitted on the sentences "
                         "of a new store; choose a new --store for the whitened one")
    # an interrupted whitened store is finished with its own model unless another is named
    backend = backend_for(args, args.model or unfinished.get("model") or DEFAULT_MODEL)
    bar = _progress_bar(len(items), args.quiet)
    try:
        store, result = door.create_whitened_corpus(
            loc, backend, args.pooling or unfinished.get("pooling") or "mean", list(items),
            dims=args.whiten_dims, index=args.index,
            progress=lambda done, _total: bar.update(done - bar.n))
    except (KeyboardInterrupt, Terminated) as e:
        bar.close()
        sigterm = isinstance(e, Terminated)
        _err(f"interrupted by {'SIGTERM' if sigterm else 'Ctrl-C'}: no sentence was stored; run the "
             "same command again to make the whitened store")
        return 128 + signal.SIGTERM if sigterm else 130
    finally:
        bar.close()
    try:
        total = store.count()
        w = store.whitening
    finally:
        store.close()
    skipped = rest.blank + len(rest.bad) + rest.no_letters
    print(f"added {result.added}, duplicates {result.duplicates}, skipped {skipped}; "
          f"{loc.describe()} holds {_sentences(total)}, whitened to {w.dims} of {w.input_dim} "
          f"dimensions (fitted on them)")
    return 0


def _sentences(n) -> str:
    return f"{n} sentence{'' if n == 1 else 's'}"


def _kept(e, result, given: int):
    """The server went away mid-ingest: say what this run stored (it stays) and how to go on
    (`given`: the texts this run was to store)."""
    msg = str(e).replace(" Nothing was changed locally.", "").rstrip()
    msg = msg if msg.endswith(("?", "!", ".")) else msg + "."
    n = result.added
    kept = ("This run had stored no new sentence yet" if n == 0 else
            f"The {n} new sentence{'s' if n != 1 else ''} this run stored before that "
            f"{'are' if n != 1 else 'is'} kept")
    if n + result.duplicates >= given:
        return type(e)(f"{msg} {kept}: every text of this run is stored, nothing is left to add.")
    from index.milvus.lease import LockHeld
    from index.store.errors import AccessRefused
    when = ("with a token that may write" if isinstance(e, AccessRefused) else
            "when that writer is done" if isinstance(e, LockHeld) else "once the server is back")
    return type(e)(
        f"{msg} {kept}; run the same command again {when} to add the rest "
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
    from index.corpus import door
    try:
        door.reembed(store, backend, pooling, progress=progress)
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
    from index.corpus import door
    from index.opening import open_store

    if args.k < 1:
        raise InputError("-k must be at least 1")
    store = open_store(store_location(args), writable=False)
    try:
        args.backend, encoder_note = store_backend(args, store)
        if encoder_note and store.encoders is not None:
            print(f"note: {encoder_note}", file=sys.stderr)
        backend = backend_for(args, args.model or store.model_name)
        hits, _ = door.search(store, args.query, args.k, backend, args.pooling)
    finally:
        store.close()
    if args.json:
        from app.cli.options import emit_json
        emit_json({"results": [h.to_dict() for h in hits]})
    else:
        for h in hits:
            print(f"{h.score:.4f}  {h.id:>6}  {h.text}")
    return 0


def cmd_remove(args) -> int:
    from index.corpus import door
    from index.opening import open_store
    loc = store_location(args)
    with open_store(loc, writable=True) as store:
        gone, _ = door.remove(store, args.ids)
        left = store.count()
    missing = [i for i in dict.fromkeys(args.ids) if i not in set(gone)]
    if not gone:      # nothing done: the error alone, no "removed 0" result before it
        raise InputError(f"no sentence with id {', '.join(map(str, missing))} in {loc.describe()}, so "
                         "nothing was removed: give the ids a search shows beside each sentence")
    result = f"removed {len(gone)} sentence{'s' if len(gone) != 1 else ''}; the store holds {left}"
    from app.cli.output import result_follows
    result_follows("the result", done=result)
    print(result)
    if missing:
        _err(f"error: no sentence with id {', '.join(map(str, missing))} in {loc.describe()}"
             + (" (the others were removed)" if gone else ""))
        return 2
    return 0

