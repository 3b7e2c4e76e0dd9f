"""Loading a FAISS store's index snapshot and proving it belongs to its database.

Functions of explicit inputs (the sentence database, the store folder, the model's fingerprint
and width); VectorStore (index/faiss/store.py) runs them on open, on search and on repair. One
recovery path: whatever is wrong with the manifest or the snapshot (missing, damaged, foreign,
older, another kind, not a regular file), the problem is a StoreCorrupted with remedy "repair",
and repair rebuilds the index from the database after setting aside the rows that fail their
checksum. Checks, cheapest first: the manifest's store id is the database's; the index file's
size and sha256 are the manifest's; the index lists exactly the database's ids and holds the
database's vectors (a sample on every open, all with verify=True); every search hit's score is
the query's cosine with the database's vector for that id.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from index.faiss.faiss_index import IVF_FP16_SCORE_ERROR, MARKING_KINDS, FaissIndex
from index.faiss.manifest import (
    FORMAT_VERSION,
    MANIFEST_NAME,
    Manifest,
    read_manifest,
    sha256_file,
)
from index.store.durability import check_regular, move_aside
from index.store.errors import StoreCorrupted

VERIFY_SAMPLE = 64          # index vectors compared with the database on every open
# How far a hit's score may be from the cosine with the database's vector. sq8 holds 8-bit codes
# trained on the first vectors: one far outside their range is clipped (seen: 0.06 off), while
# another sentence's vector is typically 0.3-1.0 off.
# ivf re-ranks its candidates with fp16 vectors (exact ones in older files): a cosine of unit
# vectors moves by at most 2^-11 there; another sentence's vector is far further off.
SCORE_TOLERANCE = {"flat": 1e-4, "hnsw": 1e-4, "sq8": 0.2, "ivf": 2 * IVF_FP16_SCORE_ERROR}
SQ8_MIN_COSINE = 0.9        # decoded sq8 vector vs the database's (clipped ones: ~0.94)


@dataclass
class LoadedSnapshot:
    index: FaissIndex      # the snapshot's index, caught up with the database
    indexed_gen: int       # the database generation it now reflects
    saved_gen: int         # the generation of the snapshot on disk (-1: a writer must save anew)


class RebuildNeeded(Exception):
    """Nothing to load (no snapshot yet, or one of another model after a rebuild): build the
    index from the database. Not damage."""


def load_snapshot(db, folder: Path, fingerprint: dict, dim: int) -> LoadedSnapshot:
    """The snapshot on disk, caught up with the database; raises StoreCorrupted (what is wrong)
    or RebuildNeeded (nothing wrong, nothing to load)."""
    man = read_manifest(folder)
    if man is None:
        raise RebuildNeeded()
    if man.store_id is not None and man.store_id != db.store_id:
        raise StoreCorrupted(
            f"the manifest and index snapshot in {folder} belong to another store "
            f"(store id {man.store_id[:12]}, the database's is {str(db.store_id)[:12]}); the "
            "sentences are safe in the database, and repairing the store rebuilds the index "
            "from them", path=folder / MANIFEST_NAME, remedy="repair")
    if man.index_file is None:
        return _flat_from_db(db, man, fingerprint, dim)
    index = read_index(folder, man)
    gen = db.generation
    _not_older(db, man, gen)
    if man.fingerprint != fingerprint or int(man.dim) != dim:
        raise RebuildNeeded()     # a crash after a rebuild's commit, before its save
    if man.generation < gen:
        # The database moved on after the snapshot (a crash between commit and save):
        # append the rows added since, drop the rows removed since.
        if int(db.get_meta("structural_generation", 0)) > man.generation:
            raise RebuildNeeded()
        for ids, vecs in db.vectors(dim, after_id=man.max_id):
            index.add(ids, vecs)
        drop_removed(db, index)
    else:
        if index.kind in MARKING_KINDS:
            drop_removed(db, index)      # restore the snapshot's deleted-id marks
        if man.count != index.ntotal:
            raise StoreCorrupted(f"the manifest {folder / MANIFEST_NAME} counts "
                                 f"{man.count} vectors, its index file {index.ntotal}",
                                 path=folder / MANIFEST_NAME, remedy="repair")
    # A format 1 manifest (no store id): a writer replaces it on open.
    # An older format's manifest (no store id; or before the vector log): a writer replaces it on open.
    current = man.store_id is not None and man.format_version == FORMAT_VERSION
    return LoadedSnapshot(index, gen, man.generation if current else -1)


def _not_older(db, man: Manifest, gen: int) -> None:
    if man.generation > gen:
        raise StoreCorrupted(
            f"the index snapshot (generation {man.generation}) is newer than the sentence "
            f"database {db.path} (generation {gen}): the database was replaced by an older "
            "copy; repairing the store reindexes that copy", path=db.path, remedy="repair")


def _flat_from_db(db, man: Manifest, fingerprint: dict, dim: int) -> LoadedSnapshot:
    """A flat index over the vector log (a manifest naming no file): built from the database,
    current at once; the manifest still says which store, model and generation it covered."""
    from index.faiss.rebuild import index_from_db
    gen = db.generation
    _not_older(db, man, gen)
    if man.fingerprint != fingerprint or int(man.dim) != dim or man.index_kind != "flat":
        raise RebuildNeeded()
    index = index_from_db(db, dim, "flat", man.index_params, size_hint=man.count)
    return LoadedSnapshot(index, gen, man.generation)


def check_against_db(db, folder: Path, index: FaissIndex, dim: int, full: bool = False,
                     sample: int = VERIFY_SAMPLE, report: dict | None = None) -> None:
    """The index lists exactly the database's ids, and holds the database's vectors for
    them (a sample of `sample` rows spread over the ids, or all with full=True); the rows
    compared pass their checksum (with full=True, what was checked goes into `report`).
    StoreCorrupted otherwise."""
    problem = db.log_problem()
    if problem is not None:
        raise problem
    db_ids = db.all_ids()
    if not np.array_equal(np.sort(index.ids()), db_ids):
        raise StoreCorrupted(
            f"the index snapshot in {folder} does not hold the same sentences as the "
            f"database ({index.ntotal} vectors, {len(db_ids)} sentences); repairing the store "
            "rebuilds the index from the database", path=folder / MANIFEST_NAME,
            remedy="repair")
    if full:
        damaged = db.rows.verify(dim)
        if report is not None:
            report.update(rows=len(db_ids), unchecked=db.rows.unchecked_count(), damaged=[d.id for d in damaged])
        if damaged:
            raise db.rows.damaged([d.id for d in damaged])
        chosen = db_ids
    elif len(db_ids) > sample:
        chosen = db_ids[np.linspace(0, len(db_ids) - 1, sample).astype(int)]
    else:
        chosen = db_ids
    for start in range(0, len(chosen), 5000):
        part = chosen[start:start + 5000]
        rows = db.rows.with_vectors(part, dim)
        ids = np.fromiter(rows, np.int64, len(rows))
        mine = np.stack([rows[int(i)][1] for i in ids]) if len(ids) else None
        if mine is None:
            continue
        theirs = index.reconstruct(ids)
        wrong = ids[~_same_vectors(mine, theirs, index.held_as())]
        if len(wrong):
            raise StoreCorrupted(
                f"the index snapshot in {folder} holds other vectors than the database "
                f"for {len(wrong)} sentence(s) (id {', '.join(map(str, wrong[:10]))}): it "
                "belongs to another store or an older state; repairing the store rebuilds "
                "the index from the database", path=folder / MANIFEST_NAME,
                remedy="repair")


def set_damaged_aside(db, folder: Path, dim: int, report: dict) -> None:
    """Repair's first half: move the manifest and index files aside and set aside the rows that
    fail their checksum (the caller then rebuilds the index from the rest)."""
    for path in [folder / MANIFEST_NAME, *folder.glob("index-*.faiss")]:
        moved = move_aside(path)
        if moved is not None:
            report.setdefault("moved", []).append(moved.name)
    damaged = db.rows.verify(dim)
    if damaged:
        with db.transaction():
            db.rows.set_aside(damaged)
            db.fit_log_to_file()     # slots past a cut log's end: their rows were just set aside
            db.bump(structural=True)
    report.update(rows=db.count() + len(damaged), damaged=[d.id for d in damaged],
                  set_aside=[d.id for d in damaged], rebuilt=True)


def drop_removed(db, index: FaissIndex) -> None:
    """Mark or remove the index's ids the database no longer holds."""
    gone = np.setdiff1d(index.all_ids(), db.all_ids(), assume_unique=False)
    if len(gone):
        index.remove(gone)


def read_index(folder: Path, man: Manifest) -> FaissIndex:
    path = folder / man.index_file
    hint = ("; the sentences are safe in the database, and repairing the store rebuilds the "
            "index from them")
    if not check_regular(path, "index file"):
        raise FileNotFoundError(path)
    size = path.stat().st_size
    if size != man.index_bytes:
        raise StoreCorrupted(f"the index file {path} is truncated or overwritten: "
                             f"{size} bytes, the manifest says {man.index_bytes}" + hint,
                             path=path, remedy="repair")
    if sha256_file(path) != man.index_sha256:
        raise StoreCorrupted(f"the index file {path} is damaged: its checksum does not match "
                             "the manifest" + hint, path=path, remedy="repair")
    try:
        return FaissIndex.read(path, man.index_kind, man.dim, man.index_params)
    except (RuntimeError, ValueError, TypeError, KeyError) as e:
        raise StoreCorrupted(f"the index file {path} is not the FAISS index its manifest "
                             f"describes ({str(e).splitlines()[0][:200]})" + hint,
                             path=path, remedy="repair") from None


def exact_scores(folder: Path, index: FaissIndex, q, scores, ids, rows) -> list[list[tuple[int, float]]]:
    """Per query, (id, cosine) of each hit: the query's cosine with the vector the database
    holds for that id (rows: verified rows), computed once, exact for every index kind (also
    where the index keeps fp16 or 8-bit vectors). The index's score must agree with it: an
    index that disagrees is never shown as a result."""
    tol = SCORE_TOLERANCE[index.kind]
    wrong, out = set(), []
    for qv, srow, irow in zip(q, scores, ids):
        found = []
        for s, i in zip(srow, irow):
            if i < 0 or int(i) not in rows:
                continue
            cos = float(rows[int(i)][1] @ qv)
            if abs(cos - float(s)) > tol:
                wrong.add(int(i))
            found.append((int(i), cos))
        out.append(found)
    if wrong:
        raise StoreCorrupted(
            f"the index in {folder} disagrees with the database for sentence(s) "
            f"{', '.join(map(str, sorted(wrong)[:10]))}; the sentences are safe in the "
            "database, and repairing the store rebuilds the index from them",
            path=folder / MANIFEST_NAME, remedy="repair")
    return out


def _same_vectors(a: np.ndarray, b: np.ndarray, held_as: str) -> np.ndarray:
    """Per row: does the index's (decoded) vector b match the database's a? held_as: what the
    index keeps of a vector (FaissIndex.held_as)."""
    if held_as == "sq8":    # 8-bit codes: close in angle, not equal
        cos = np.einsum("ij,ij->i", a, b) / np.maximum(np.linalg.norm(b, axis=1), 1e-12)
        return cos > SQ8_MIN_COSINE
    if held_as == "fp16":   # each component within one fp16 step (FAISS may round a tie the other way)
        return (np.abs(a - b) <= np.abs(a) * 2.0 ** -10 + 2.0 ** -24).all(axis=1)
    return np.abs(a - b).max(axis=1) <= 1e-6
