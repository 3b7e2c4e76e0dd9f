"""`encoderscope migrate --from STORE --to STORE`: copy a corpus between any two stores (FAISS
folder, milvus-lite:FOLDER, http(s)://HOST:PORT) without re-embedding.

The stored vectors are copied as they are, so the model fingerprints must match: a missing
destination is created for the source's model; an existing one built with another model is
refused with the usual ModelMismatch message. Sentences the destination already holds are
counted as duplicates, so an interrupted migrate can simply be run again. At the end the counts
are verified and a sample of sentences is searched in the destination with their own vectors.

Ids: a new Milvus destination (one that never held a row) keeps the source's ids; a FAISS
destination numbers rows 1, 2, ... in source id order (the same ids when the source has no
gaps); other destinations give the copies fresh ids (ids are never reused). The time each
sentence was added is kept by Milvus destinations; the FAISS store stamps rows with the time of
the copy (it has no API to set it).
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from core.errors import InputError

from . import fingerprint as fpmod
from .errors import StoreError

BATCH = 2000
SAMPLE = 20


@dataclass
class MigrateResult:
    source: str
    destination: str
    source_count: int = 0
    copied: int = 0              # rows read from the source
    added: int = 0
    duplicates: int = 0          # already in the destination
    destination_count: int = 0
    seconds: float = 0.0
    verified: bool = False
    sample_checked: int = 0
    problems: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def migrate(source, destination, *, batch: int = BATCH, index: str = "auto", progress=None,
            sample: int = SAMPLE) -> MigrateResult:
    """Copy every sentence of `source` into `destination` (locations or open stores).

    progress(done, total) after every batch. Raises ModelMismatch if the destination holds
    another model, StoreError if the verification fails."""
    from .locations import describe_location, open_store, parse_location

    if batch < 1:
        raise InputError("--batch-size must be at least 1")
    t0 = time.perf_counter()
    src_loc, dst_loc = parse_location(source), parse_location(destination)
    if str(src_loc) == str(dst_loc) and (src_loc.kind, src_loc.path) == (dst_loc.kind, dst_loc.path):
        raise InputError("the source and the destination are the same store")
    src = open_store(src_loc, readonly=True)
    dst = None
    try:
        fp = src.fingerprint_dict
        dst = open_store(dst_loc, create=True, fingerprint=fp, index=index)
        # open_store already checked fp against an existing destination; say it plainly too
        fpmod.check(dst.fingerprint_dict, fp, f"the vectors of {describe_location(src_loc)}",
                    where=f"at {dst_loc}")
        res = MigrateResult(str(src_loc), str(dst_loc))
        res.source_count = total = src.count()
        before = dst.count()
        keep_ids = before == 0 and dst.can_keep_ids()
        samples = []
        rng = np.random.default_rng(0)
        for ids, vecs, recs in src.iter_batches(batch):
            kw = {"ids": ids.tolist()} if keep_ids else {}
            out = dst.add([r["text"] for r in recs], vecs, [r["metadata"] for r in recs],
                          fingerprint=fp, **kw)
            res.copied += len(recs)
            res.added += out.added
            res.duplicates += out.duplicates
            if sample and len(recs):   # a few rows of every batch, kept bounded
                pick = rng.choice(len(recs), size=min(sample, len(recs)), replace=False)
                samples += [(recs[i]["text"], vecs[i]) for i in pick]
                if len(samples) > 4 * sample:
                    samples = [samples[i] for i in rng.choice(len(samples), sample, replace=False)]
            if progress:
                progress(res.copied, total)
        dst.save()
        res.destination_count = dst.count()
        _verify(res, before, dst, samples[:sample] if len(samples) <= sample else
                [samples[i] for i in rng.choice(len(samples), sample, replace=False)])
        res.seconds = time.perf_counter() - t0
        return res
    finally:
        try:
            if dst is not None:
                dst.close()
        finally:
            src.close()


def _verify(res: MigrateResult, before: int, dst, samples) -> None:
    if res.copied != res.source_count:
        res.problems.append(f"read {res.copied} sentences from the source, which counts "
                            f"{res.source_count} (was it changed during the copy?)")
    if res.added + res.duplicates != res.copied:
        res.problems.append(f"{res.copied} sentences read but {res.added} added + "
                            f"{res.duplicates} already there")
    if res.destination_count != before + res.added:
        res.problems.append(f"the destination holds {res.destination_count} sentences, expected "
                            f"{before} + {res.added}")
    if samples:
        hits = dst.search(np.stack([v for _, v in samples]), k=1)
        for (text, _), row in zip(samples, hits):
            if not row or row[0].text != text and row[0].score < 0.9999:
                res.problems.append(f"searching the destination for {text[:60]!r} with its own "
                                    f"vector found {row[0].text[:60]!r}" if row else
                                    f"searching the destination for {text[:60]!r} found nothing")
        res.sample_checked = len(samples)
    res.verified = not res.problems
    if res.problems:
        raise StoreError("migrate copied the sentences but the check failed: "
                         + "; ".join(res.problems[:5]))


# ------------------------------------------------------------------------------------------
# command line
# ------------------------------------------------------------------------------------------
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
    p.add_argument("--index", choices=("auto", "flat", "hnsw", "sq8", "ivf"), default="auto",
                   help="index kind of a new destination (default auto: FAISS exact then HNSW "
                        "from 200k; Milvus Lite FLAT; Milvus server HNSW)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=cmd_migrate)


def cmd_migrate(args) -> int:
    import json

    from tqdm import tqdm

    from .locations import describe_location
    if args.index == "ivf" and "://" not in args.destination and not args.destination.startswith(
            "milvus-lite:"):
        raise InputError("--index ivf is for Milvus destinations")
    bar = tqdm(total=None, desc="copying", unit=" sentences", disable=args.quiet,
               file=sys.stderr, dynamic_ncols=True, smoothing=0.1)
    last = [0]

    def progress(done, total):
        if bar.total is None:
            bar.total = total
            bar.refresh()
        bar.update(done - last[0])
        last[0] = done
    try:
        res = migrate(args.source, args.destination, batch=args.batch_size, index=args.index,
                      progress=progress)
    except KeyboardInterrupt:
        bar.close()
        print("interrupted: the batches copied so far are in the destination; run the same "
              "command again to finish (sentences already there are skipped)", file=sys.stderr)
        return 130
    finally:
        bar.close()
    if args.json:
        json.dump(res.to_dict(), sys.stdout, ensure_ascii=False)
        sys.stdout.write("\n")
    else:
        rate = res.copied / res.seconds if res.seconds else 0
        print(f"copied {res.copied} sentences from {describe_location(args.source)} to "
              f"{describe_location(args.destination)} in {res.seconds:.1f} s ({rate:.0f}/s): "
              f"added {res.added}, already there {res.duplicates}; the destination holds "
              f"{res.destination_count}; verified (counts + {res.sample_checked} sample searches)")
    return 0
