"""`encoderscope migrate --from STORE --to STORE`: copy a corpus between any two stores (FAISS
folder, milvus-lite:FOLDER, http(s)://HOST:PORT) without re-embedding.

The stored vectors are copied as they are, so the model fingerprints must match: a missing
destination is created for the source's model; an existing one built with another model is
refused with the usual ModelMismatch message. Sentences the destination already holds are
counted as duplicates, so an interrupted migrate can simply be run again. At the end the copy is
checked: the counts; every copied row, by id: the source is read again and each row's text and
vector compared with the destination's row it was copied to (index/corpus/migrate_check.py); a sample
of sentences searched in the destination with their own vectors; and with --verify, a sample of
texts embedded again with the store's model and compared with their stored vectors (catches a
source that already held wrong vectors). A failed check names the ids and raises StoreError.

Ids: a new Milvus destination (one that never held a row) keeps the source's ids; a FAISS
destination numbers rows 1, 2, ... in source id order (the same ids when the source has no
gaps); other destinations give the copies fresh ids (ids are never reused). The time each
sentence was added is kept by Milvus destinations; the FAISS store stamps rows with the time of
the copy (it has no API to set it).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import InputError
from index.store import fingerprint as fpmod
from index.store.durability import atomic_write
from index.store.errors import StoreError
from index.store.files import StoreFileIsLink, is_link, remove_own

BATCH = 2000
SAMPLE = 20             # sentences searched in the destination with their own vectors
REEMBED_SAMPLE = 100    # texts embedded again by --verify


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
    rows_checked: int = 0        # destination rows compared with the source's re-read, by id
    reembedded: int = 0          # texts embedded again (--verify) and compared
    wrong_ids: list = field(default_factory=list)   # destination ids that failed a check
    problems: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def migrate(source, destination, *, batch: int = BATCH, index: str = "auto", progress=None,
            sample: int = SAMPLE, verify_backend=None,
            reembed_sample: int = REEMBED_SAMPLE) -> MigrateResult:
    """Copy every sentence of `source` into `destination` (locations or open stores).

    progress(done, total) after every batch. verify_backend: the store's model (a Backend); with
    it, `reembed_sample` texts of the destination are embedded again and compared with their
    stored vectors. Raises ModelMismatch if the destination holds another model, StoreError
    (naming the ids) if a check fails."""
    from index.opening import describe_location, open_store
    from index.store.location import parse_location

    if batch < 1:
        raise InputError("the batch size must be at least 1")
    t0 = time.perf_counter()
    src_loc, dst_loc = parse_location(source), parse_location(destination)
    if str(src_loc) == str(dst_loc) and (src_loc.kind, src_loc.path) == (dst_loc.kind, dst_loc.path):
        raise InputError("the source and the destination are the same store")
    src = open_store(src_loc, writable=False)
    dst = None
    try:
        fp = src.fingerprint_dict
        if callable(verify_backend) and not hasattr(verify_backend, "embed"):
            verify_backend = verify_backend(src.model_fingerprint_dict)   # load the model before copying
        # A whitened source's transform goes with its vectors (a FAISS destination keeps it).
        whitened = {} if src.whitening is None else {"whitening": src.whitening}
        dst = open_store(dst_loc, create=True, fingerprint=src.model_fingerprint_dict if whitened else fp,
                         index=index, **whitened)
        # open_store already checked fp against an existing destination; say it plainly too
        fpmod.check(dst.fingerprint_dict, fp, f"the vectors of {describe_location(src_loc)}",
                    where=f"at {dst_loc}")
        mark_incomplete(dst_loc, src_loc)
        with dst.exclusive():     # one writer: ids kept from the source stay free meanwhile
            res = _copy(src, dst, src_loc, dst_loc, fp, batch, progress, sample, verify_backend,
                        reembed_sample)
        marker = _marker(dst_loc)
        if marker is not None:
            remove_own(marker)
        res.seconds = time.perf_counter() - t0
        return res
    finally:
        try:
            if dst is not None:
                dst.close()
        finally:
            src.close()


def _copy(src, dst, src_loc, dst_loc, fp, batch, progress, sample, verify_backend,
          reembed_sample) -> MigrateResult:
    """Copy and verify, under the destination's writer lock."""
    res = MigrateResult(str(src_loc), str(dst_loc))
    res.source_count = total = src.count()
    before = dst.count()
    keep_ids = before == 0 and dst.can_keep_ids()
    samples = []
    id_map = {}                     # source id -> the destination id it was copied to
    rng = np.random.default_rng(0)
    for ids, vecs, recs in src.iter_batches(batch):
        kw = {"ids": ids.tolist()} if keep_ids else {}
        out = dst.add([r["text"] for r in recs], vecs, [r["metadata"] for r in recs],
                      fingerprint=fp, **kw)
        id_map.update(zip(ids.tolist(), (int(i) for i in out.ids)))
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
            [samples[i] for i in rng.choice(len(samples), sample, replace=False)],
            src, id_map, batch, verify_backend, reembed_sample, rng)
    return res


INCOMPLETE = "incomplete-migrate"   # in a destination folder until its copy is verified


def _marker(loc) -> Path | None:
    """The destination folder's marker; a store without a folder (a server) has none."""
    return loc.path / INCOMPLETE if loc.path is not None else None


def mark_incomplete(dst_loc, src_loc) -> None:
    """A destination folder is marked until migrate has verified it: a migrate killed or
    failed half-way leaves a store that looks whole otherwise."""
    marker = _marker(dst_loc)
    if marker is not None:
        if is_link(marker):
            raise StoreFileIsLink(marker)
        atomic_write(marker, f"{src_loc}\n".encode())


def incomplete_source(loc) -> str | None:
    """The source of an unverified migrate into the store at `loc` (the copy was interrupted
    or failed before it was verified), or None when the store is not such a copy."""
    marker = _marker(loc)
    if marker is None or is_link(marker) or not marker.is_file():
        return None
    try:
        return marker.read_text("utf-8").strip() or "another store"
    except (OSError, UnicodeDecodeError):
        return "another store"


def _verify(res: MigrateResult, before: int, dst, samples, src=None, id_map=None,
            batch: int = BATCH, backend=None, reembed_sample: int = 0, rng=None) -> None:
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
    if src is not None and id_map is not None:
        _check_rows(res, src, dst, id_map, batch, backend, reembed_sample,
                    rng if rng is not None else np.random.default_rng(0))
    res.verified = not res.problems
    if res.problems:
        raise StoreError("migrate copied the sentences but the check failed: "
                         + "; ".join(res.problems[:5]))


def _ids(ids, n: int = 10) -> str:
    ids = sorted(ids)
    more = f" and {len(ids) - n} more" if len(ids) > n else ""
    return ", ".join(map(str, ids[:n])) + more


def _check_rows(res, src, dst, id_map, batch, backend, reembed_sample, rng) -> None:
    """Every copied row by id against a second read of the source; with a backend, a sample
    of texts embedded again against their stored vectors."""
    from index.corpus.migrate_check import (
        compare_destination,
        expected_rows,
        reembedding_mismatches,
    )
    exp = expected_rows(src, id_map, batch)
    pick = []
    if backend is not None and reembed_sample and len(exp.ids):
        pick = rng.choice(exp.ids, size=min(reembed_sample, len(exp.ids)), replace=False)
    cmp = compare_destination(dst, exp, batch, pick)
    res.rows_checked = cmp.checked
    if exp.unmapped:
        res.problems.append(f"source ids {_ids(exp.unmapped)} were not copied (was the source "
                            "changed during the copy?)")
    if cmp.missing:
        res.wrong_ids += cmp.missing
        res.problems.append(f"destination ids {_ids(cmp.missing)} are missing")
    if cmp.wrong_text:
        res.wrong_ids += cmp.wrong_text
        res.problems.append(f"destination ids {_ids(cmp.wrong_text)} hold another text than "
                            "the source row copied to them")
    if cmp.wrong_vector:
        res.wrong_ids += cmp.wrong_vector
        res.problems.append(f"destination ids {_ids(cmp.wrong_vector)} hold another vector than "
                            "the source row copied to them")
    if backend is not None:
        bad = reembedding_mismatches(cmp.sample, dst.model_for_checks(backend), dst.pooling)
        res.reembedded = len(cmp.sample)
        if bad:
            res.wrong_ids += [i for i, _ in bad]
            worst = min(c for _, c in bad)
            res.problems.append(
                f"{len(bad)} of {len(cmp.sample)} sentences embedded again do not match their "
                f"stored vector (cosine down to {worst:.3f}): destination ids "
                f"{_ids([i for i, _ in bad])}: the source pairs these texts with vectors that "
                "are not theirs, and only embedding them again repairs that")
