"""`encoderscope info`: what a store holds, and with --check / --repair what is wrong with it
and what was repaired (FAISS folders and Milvus stores), in words on stderr."""
from __future__ import annotations

import json
import shlex
import sys

from app.cli.options import add_store_option, backend_for, store_location


def register(subparsers) -> None:
    p = subparsers.add_parser("info", help="what a store holds")
    add_store_option(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--check", action="store_true",
                   help="verify every sentence (checksum, unit-length vector) and every index "
                        "vector against the database; names damaged rows by id (FAISS stores). "
                        "Milvus: every row read back against the server's count (ids hiding "
                        "another row), texts stored twice, and its vectors re-embedded (every one, or "
                        "a random sample in a large store)")
    p.add_argument("--repair", action="store_true",
                   help="verify like --check, set rows that fail their checksum aside (kept in "
                        "the database's 'damaged' table) and rebuild a damaged, missing or "
                        "foreign index and manifest from the database. Milvus: drop hidden rows "
                        "and second copies of a text, write wrong hashes again and embed wrong "
                        "vectors again")
    p.add_argument("--full", action="store_true",
                   help="with --check or --repair on a Milvus store: embed every sentence again "
                        "and compare it with its stored vector (default: every one in a store "
                        "of up to 2000, else a random sample sized for 95%% confidence)")
    p.set_defaults(func=cmd_info)


def _err(msg):
    print(msg, file=sys.stderr)


def cmd_info(args) -> int:
    from index.corpus import door
    loc = store_location(args)
    if (args.repair or args.check) and loc.is_milvus:
        return _check_milvus(args, loc)
    found = door.describe(loc, check=args.check, repair=args.repair,
                            load_backend=(lambda model: backend_for(args, model)) if args.check else None)
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
    print(f"index     {info['index']} {index_params_worded(info['index_params'])}".rstrip())
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
    from index.corpus import door
    from index.store.errors import StoreCorrupted, StoreError
    report, count = door.check_milvus(loc, lambda model: backend_for(args, model),
                                        getattr(args, "model", None), repair=bool(args.repair),
                                        full=bool(getattr(args, "full", False)))
    found = _milvus_problems(report)
    if found and not args.repair:
        # a sample's wrong vectors: the repair draws the same sample (the same rows) and repairs
        # them; --full finds the rest a sample that found some suggests
        raise StoreCorrupted(f"{loc.describe()}: " + "; ".join(found), remedy="repair",
                             fix={"kind": "sampled"} if _sampled_off(report) else None)
    if args.repair:
        done = report["repaired"]
        parts = [f"{n} {one if n == 1 else many}" for n, one, many in (
            (done["hidden_dropped"], "hidden row dropped (ingest its file again to add that "
             "sentence back)", "hidden rows dropped (ingest their files again to add those "
             "sentences back)"),
            (done["duplicates_removed"], "second copy of a text removed",
             "second copies of a text removed"),
            (done["hashes_rewritten"], "hash written again", "hashes written again"),
            (done["vectors_reembedded"], "vector embedded again", "vectors embedded again"))
            if n]
        if parts:
            _err("repair: " + ", ".join(parts))
        full_too = _full_worded(args) if _sampled_off(report) or _sampled_off(report["after"]) else ""
        if full_too and not _milvus_problems(report["after"]):
            _err(f"repair: the wrong vectors were found in a sample ({vectors_checked(report)}), so others "
                 f"are likely wrong too: {full_too}")
        report = report["after"]
        left = _milvus_problems(report)
        if left:
            raise StoreError(f"repair: {loc.describe()} still has problems it could not "
                             "repair: " + "; ".join(left) + (f"; {full_too}" if full_too else ""))
    what = "repair" if args.repair else "check"
    _err(f"{what}: ok: {report['readable']} sentence{'s' if report['readable'] != 1 else ''} "
         f"read back of {report['rows']} row{'s' if report['rows'] != 1 else ''} the server "
         f"counts, no text stored twice, every hash its text's; {vectors_checked(report)}: all "
         f"right{_sample_note(report)}; the store holds {count}"
         + (" (read without the writer lock, which this user may not take: the server counted "
            "the same rows before and after)" if report.get("unlocked") else ""))
    return 0


def _sampled_off(report: dict) -> bool:
    """Whether a sample (not every vector) was checked and found wrong vectors."""
    return bool(report["vectors_off"]) and not report.get("full") and report["sampled"] < report.get("of", 0)


def _full_worded(args) -> str:
    store = f" --store {shlex.quote(args.store)}" if getattr(args, "store", None) else ""
    return f"`encoderscope info --repair --full{store}` checks and repairs every vector"


def vectors_checked(report: dict) -> str:
    """Which vectors were embedded again and compared: "all 577 vectors checked", or a sample
    said as one ("299 of 50000 vectors checked, drawn at random")."""
    n, of = report["sampled"], report.get("of", report["sampled"])
    if report.get("full") or n >= of:
        return f"all {n} vector{'s' if n != 1 else ''} checked"
    return f"{n} of {of} vectors checked, drawn at random"


def _sample_note(report: dict) -> str:
    if report.get("full") or report["sampled"] >= report.get("of", 0):
        return ""
    return (f" (a sample this size finds a wrong vector {report['confidence']:.0%} of the time "
            f"when {report['share']:.0%} or more of them are wrong; --full checks every one)")


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
        problems.append(f"1 row's hash is not its text's ({_ids(wrong)})" if len(wrong) == 1 else
                        f"{len(wrong)} rows' hashes are not their texts' ({_ids(wrong)})")
    off = report["vectors_off"]
    if off:
        problems.append(f"{vectors_checked(report)}: {len(off)} "
                        + ("is not its text's embedding" if len(off) == 1 else
                           "are not their texts' embeddings") + f" ({_ids(off)})")
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


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def index_params_worded(params: dict | None) -> str:
    """An index's settings as people read them: "(M 32, efConstruction 200; search: ef 128)"."""
    if not params:
        return ""
    build = {k: v for k, v in params.items() if not isinstance(v, dict)}
    parts = [", ".join(f"{k} {v}" for k, v in build.items())] if build else []
    parts += [f"{k}: " + ", ".join(f"{kk} {vv}" for kk, vv in v.items())
              for k, v in params.items() if isinstance(v, dict) and v]
    return f"({'; '.join(parts)})" if parts else ""
