"""How the command line words the way out of a store error. The store says what fixes it as
data (StoreCorrupted.remedy, StoreNotFound.location, ModelMismatch.rebuild, EmptyStore); here
it becomes the `encoderscope` command that applies it (the app words the same as menu actions)."""
from __future__ import annotations

import shlex


def worded(error: Exception, args) -> str:
    """The error's message, with the command that fixes it where there is one."""
    from index.store.errors import EmptyStore, ModelMismatch, StoreCorrupted, StoreNotFound

    message = str(error) + _fix_worded(_in_migrates_words(getattr(error, "fix", None), args))
    store = getattr(args, "store", None)
    store_option = f" --store {shlex.quote(store)}" if store else ""
    if isinstance(error, StoreCorrupted):
        if error.remedy == "repair" and not getattr(args, "repair", False):
            if (error.fix or {}).get("kind") == "sampled":      # wrong vectors found in a sample
                return (f"{message}: run `encoderscope info --repair{store_option}` to repair these (it "
                        f"checks the same sample), or `encoderscope info --repair --full{store_option}` "
                        "to check and repair every vector (a sample that finds some suggests more)")
            return f"{message}: run `encoderscope info --repair{store_option}`"
    elif isinstance(error, StoreNotFound):
        if error.location is not None and getattr(args, "command", None) == "migrate":
            return (f"{message}: nothing to migrate from there; --from names an existing store "
                    "(a store folder, milvus-lite:FOLDER or http(s)://HOST:PORT?collection=NAME)")
        if error.location is not None:
            return message + _where_to_ingest(error.location)
    elif isinstance(error, ModelMismatch):
        if "`encoderscope" not in message:
            return message + _mismatch_commands(error, args)
    elif isinstance(error, EmptyStore):
        where = store_option or (f" --store {shlex.quote(error.location)}" if error.location else " --store STORE")
        return f"{message}: add some with `encoderscope ingest FILE{where}`"
    return message


def _where_to_ingest(location: str) -> str:
    """Ingest there first; or, where that ingest would be refused (a file, a folder of other
    files), what is there and where a store can be made instead."""
    from index.store.files import why_no_new_store
    from index.store.location import parse_location
    loc = parse_location(location)
    why = why_no_new_store(loc.path) if loc.path is not None else None
    if why is None:
        return f": ingest some files first (encoderscope ingest FILE --store {shlex.quote(location)})"
    new = ("milvus-lite:" if loc.kind == "lite" else "") + "NEW_FOLDER"
    return (f": it {why}; give the location of a store, or make one in a new or empty folder "
            f"(encoderscope ingest FILE --store {new})")


def _in_migrates_words(fix: dict | None, args) -> dict | None:
    """A fix that sets --store, for `migrate`: --from or --to, whichever named that store (a
    server's default database in place of a missing one: same server and collection)."""
    settings = (fix or {}).get("settings") or {}
    if (fix or {}).get("kind") != "settings" or "store" not in settings or \
            getattr(args, "command", None) != "migrate":
        return fix
    from index.store.location import parse_location
    want = parse_location(settings["store"])
    side = "store"
    for option, value in (("from", args.source), ("to", args.destination)):
        loc = parse_location(value)
        if (loc.kind, loc.uri, loc.path, loc.collection) == (want.kind, want.uri, want.path,
                                                             want.collection):
            side = option
            break
    return {**fix, "settings": {(side if k == "store" else k): v for k, v in settings.items()}}


def _mismatch_commands(error, args) -> str:
    """A model or pooling mismatch of search or ingest: keep the store's model (the same
    command without --model/--pooling), or re-embed the store first (ModelMismatch.rebuild)."""
    given = " and ".join(f for f, v in (("--model", getattr(args, "model", None)),
                                          ("--pooling", getattr(args, "pooling", None))) if v)
    r = error.rebuild
    rebuild = (f"`encoderscope ingest --rebuild --model {shlex.quote(str(r['model']))} --pooling "
               f"{r['pooling']} --store {shlex.quote(str(r['location']))}`") if r else None
    command = getattr(args, "command", None)
    if getattr(error, "again", False):
        return ""        # another writer re-embedded the store meanwhile: the message says to run it again
    if command == "search" and given:
        store = getattr(args, "store", None)
        keep = (f"`encoderscope search {shlex.quote(args.query)}"
                + (f" --store {shlex.quote(store)}`" if store else "`"))
        again = f", or re-embed it first by {rebuild}" if rebuild else ""
        return f": search with the store's model by {keep}{again}"
    # the model given is the store's own, changed since (its config or tokenizer files):
    # leaving out --model would load the same files, so only the re-embed or a new store helps
    same = not given or (given == "--model" and error.store_model == error.other_model)
    if command == "ingest" and same:
        if rebuild:
            return f": {rebuild}, then run the same ingest command again"
        files = " ".join(shlex.quote(f) for f in getattr(args, "files", None) or ["FILE"])
        model = shlex.quote(str(error.other_model))
        return f": `encoderscope ingest {files} --whiten --model {model} --store NEW_STORE`"
    if command == "ablate" and given:
        return f": leave out {given}" + (f", or re-embed the store first by {rebuild}" if rebuild else "")
    if command == "ingest" and given:
        if not rebuild:
            return f" (run the same ingest command without {given}, or ingest into a new --store with --whiten)"
        return f": run the same ingest command without {given}, or re-embed the store first by {rebuild}"
    return f": {rebuild}" if rebuild else ""


def encoding_hint() -> str:
    """The command line's way out of a file that is not UTF-8 (tests run it)."""
    from core.files.text_file import OTHER_ENCODING
    first, *more = OTHER_ENCODING["choices"]
    return f"if the file is in another encoding, add --encoding {first} (or {', '.join(more)})"


# An error's fix kind (core.errors) -> the options or command that apply it, from the fix's data.
_WORDED = {
    "encoding": lambda fix: f"; {encoding_hint()}",
    "column": lambda fix: " with --column NAME",
    "train_mlm": lambda fix: (f": `encoderscope train --init {fix['init']} --corpus YOUR_TEXT.txt "
                              "--out my-mlm`, then --model my-mlm"),
    "method": lambda fix: f" (--method {fix['method']})",
    "clusters": lambda fix: " (--clusters)",
    "whiten_again": lambda fix: ": `encoderscope ingest FILE --whiten --store NEW_STORE`",
    "settings": lambda fix: f" ({_flags(fix['settings'], ', ')})",
    "train": lambda fix: f": `encoderscope train {_flags(fix['settings'])} --corpus FILE --out DIR`, then --model DIR",
    "resume": lambda fix: f" with `encoderscope train --resume {shlex.quote(str(fix['out']))}`",
    "reembed": lambda fix: " (`encoderscope ingest --rebuild`)",
    "store_elsewhere": lambda fix: (f": --store {shlex.quote(fix['folder'])} (a FAISS folder) or --store "
                                    f"{fix['server']}?collection=NAME (a Milvus server)"),
}


def _fix_worded(fix: dict | None) -> str:
    """An error's fix (EncoderscopeError.fix) as the options or command that apply it."""
    word = _WORDED.get((fix or {}).get("kind"))
    return word(fix) if word is not None else ""


def _flags(settings: dict, sep: str = " ") -> str:
    """{"precision": "fp32", "lr": None} -> "--precision fp32, --lr" (None: the option alone)."""
    return sep.join(f"--{name.replace('_', '-')}" + (f" {value}" if value is not None else "")
                    for name, value in settings.items())
