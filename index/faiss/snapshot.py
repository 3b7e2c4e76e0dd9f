"""Loading a FAISS store's index snapshot and proving it belongs to its database.

VectorStore (index/faiss/store.py) mixes this in. One recovery path: whatever is wrong with the
manifest or the snapshot (missing, damaged, foreign, older, another kind, not a regular file),
the problem is a StoreCorrupted with remedy "repair", and repair rebuilds the index from the
database after setting aside the rows that fail their checksum. Checks, cheapest first: the
manifest's store id is the database's; the index file's size and sha256 are the manifest's;
the index lists exactly the database's ids and holds the database's vectors (a sample on every
open, all with verify=True); every search hit's score is the query's cosine with the
database's vector for that id.
"""
from __future__ import annotations

import numpy as np

from index.durability import check_regular, move_aside
from index.errors import StoreCorrupted
from index.faiss.faiss_index import IVF_FP16_SCORE_ERROR, MARKING_KINDS, FaissIndex
from index.faiss.manifest import (
    MANIFEST_NAME,
    Manifest,
    UnsupportedFormat,
    read_manifest,
    sha256_file,
)

VERIFY_SAMPLE = 64          # index vectors compared with the database on every open
# How far a hit's score may be from the cosine with the database's vector. sq8 holds 8-bit codes
# trained on the first vectors: one far outside their range is clipped (seen: 0.06 off), while
# another sentence's vector is typically 0.3-1.0 off.
# ivf re-ranks its candidates with fp16 vectors (exact ones in older files): a cosine of unit
# vectors moves by at most 2^-11 there; another sentence's vector is far further off.
SCORE_TOLERANCE = {"flat": 1e-4, "hnsw": 1e-4, "sq8": 0.2, "ivf": 2 * IVF_FP16_SCORE_ERROR}
SQ8_MIN_COSINE = 0.9        # decoded sq8 vector vs the database's (clipped ones: ~0.94)


class SnapshotLoading:
    """The loading and checking half of VectorStore (needs its _db, _dim, _fp, folder, _lock,
    _mutex, _index, _stale and _rebuild_index)."""

    def _load(self, repair: bool = False, verify: bool = False) -> None:
        """Load the snapshot named by the manifest, catch it up with the database and check it
        against the database. One recovery path: whatever is wrong with the snapshot, repair
        rebuilds the index from the database (setting damaged rows aside first)."""
        self.check_report = {"rows": None, "damaged": [], "rebuilt": False, "set_aside": []}
        try:
            try:
                self._load_verified(verify)
            except _RebuildNeeded:      # nothing saved yet, or a snapshot of another model
                self._rebuild_index()
                self._saved_gen = -1
                if verify:              # the rows it was built from are checked all the same
                    self._check_against_db(self._index, full=True)
        except StoreCorrupted as problem:
            if not repair or problem.remedy != "repair" or isinstance(problem, UnsupportedFormat):
                raise
            self._repair()

    def _load_verified(self, verify: bool) -> None:
        reader = self._lock is None
        for attempt in range(5):
            try:
                with self._db.read_snapshot(enabled=reader):
                    self._load_snapshot()
                    self._check_against_db(self._index, full=verify)
                return
            except FileNotFoundError:
                # A writer replaced the snapshot between our manifest read and the index read.
                if not reader or attempt == 4:
                    raise StoreCorrupted(
                        f"the index file named by {self.folder / MANIFEST_NAME} is missing; the "
                        "sentences are safe in the database, and repairing the store rebuilds the "
                        "index from them", path=self.folder / MANIFEST_NAME, remedy="repair") from None

    def _load_snapshot(self) -> None:
        """Set self._index from the snapshot on disk, caught up with the database; raises
        StoreCorrupted (what is wrong) or _RebuildNeeded (nothing wrong, nothing to load)."""
        db = self._db
        man = read_manifest(self.folder)
        if man is None:
            raise _RebuildNeeded()
        if man.store_id is not None and man.store_id != db.store_id:
            raise StoreCorrupted(
                f"the manifest and index snapshot in {self.folder} belong to another store "
                f"(store id {man.store_id[:12]}, the database's is {str(db.store_id)[:12]}); the "
                "sentences are safe in the database, and repairing the store rebuilds the index "
                "from them", path=self.folder / MANIFEST_NAME, remedy="repair")
        index = self._read_snapshot(man)
        gen = db.generation
        if man.generation > gen:
            raise StoreCorrupted(
                f"the index snapshot (generation {man.generation}) is newer than the sentence "
                f"database {db.path} (generation {gen}): the database was replaced by an older "
                "copy; repairing the store reindexes that copy", path=db.path, remedy="repair")
        if man.fingerprint != self._fp or int(man.dim) != self._dim:
            raise _RebuildNeeded()     # a crash after a rebuild's commit, before its save
        if man.generation < gen:
            # The database moved on after the snapshot (a crash between commit and save):
            # append the rows added since, drop the rows removed since.
            if int(self._db.get_meta("structural_generation", 0)) > man.generation:
                raise _RebuildNeeded()
            for ids, vecs in db.vectors(self._dim, after_id=man.max_id):
                index.add(ids, vecs)
            self._drop_removed(index)
        else:
            if index.kind in MARKING_KINDS:
                self._drop_removed(index)      # restore the snapshot's deleted-id marks
            if man.count != index.ntotal:
                raise StoreCorrupted(f"the manifest {self.folder / MANIFEST_NAME} counts "
                                     f"{man.count} vectors, its index file {index.ntotal}",
                                     path=self.folder / MANIFEST_NAME, remedy="repair")
        self._index = index
        self._indexed_gen = gen
        # A format 1 manifest (no store id): a writer replaces it on open.
        self._saved_gen = man.generation if man.store_id is not None else -1

    def _check_against_db(self, index: FaissIndex, full: bool = False,
                          sample: int = VERIFY_SAMPLE) -> None:
        """The index lists exactly the database's ids, and holds the database's vectors for
        them (a sample of `sample` rows spread over the ids, or all with full=True); the rows
        compared pass their checksum. StoreCorrupted otherwise."""
        db_ids = self._db.all_ids()
        if not np.array_equal(np.sort(index.ids()), db_ids):
            raise StoreCorrupted(
                f"the index snapshot in {self.folder} does not hold the same sentences as the "
                f"database ({index.ntotal} vectors, {len(db_ids)} sentences); repairing the store "
                "rebuilds the index from the database", path=self.folder / MANIFEST_NAME,
                remedy="repair")
        if full:
            damaged = self._db.rows.verify(self._dim)
            self.check_report["rows"] = len(db_ids)
            self.check_report["unchecked"] = self._db.rows.unchecked_count()
            self.check_report["damaged"] = [d.id for d in damaged]
            if damaged:
                raise self._db.rows.damaged([d.id for d in damaged])
            chosen = db_ids
        elif len(db_ids) > sample:
            chosen = db_ids[np.linspace(0, len(db_ids) - 1, sample).astype(int)]
        else:
            chosen = db_ids
        for start in range(0, len(chosen), 5000):
            part = chosen[start:start + 5000]
            rows = self._db.rows.with_vectors(part, self._dim)
            ids = np.fromiter(rows, np.int64, len(rows))
            mine = np.stack([rows[int(i)][1] for i in ids]) if len(ids) else None
            if mine is None:
                continue
            theirs = index.reconstruct(ids)
            wrong = ids[~_same_vectors(mine, theirs, index.held_as())]
            if len(wrong):
                raise StoreCorrupted(
                    f"the index snapshot in {self.folder} holds other vectors than the database "
                    f"for {len(wrong)} sentence(s) (id {', '.join(map(str, wrong[:10]))}): it "
                    "belongs to another store or an older state; repairing the store rebuilds "
                    "the index from the database", path=self.folder / MANIFEST_NAME,
                    remedy="repair")

    def _repair(self) -> None:
        """Set aside the rows that fail their checksum, then rebuild the index from the rest."""
        db = self._db
        for path in [self.folder / MANIFEST_NAME, *self.folder.glob("index-*.faiss")]:
            moved = move_aside(path)
            if moved is not None:
                self.check_report.setdefault("moved", []).append(moved.name)
        damaged = db.rows.verify(self._dim)
        if damaged:
            with db.transaction():
                db.rows.set_aside(damaged)
                db.bump(structural=True)
        self.check_report.update(rows=db.count() + len(damaged), damaged=[d.id for d in damaged],
                                 set_aside=[d.id for d in damaged], rebuilt=True)
        self._rebuild_index()
        self._saved_gen = -1

    def verify(self) -> dict:
        """Check every row and every index vector against the database (what `info --check`
        runs): check_report, or StoreCorrupted naming what is damaged."""
        with self._mutex:
            if self._stale:
                self._rebuild_index()
            self._check_against_db(self._index, full=True)
        return dict(self.check_report)

    def _drop_removed(self, index: FaissIndex) -> None:
        gone = np.setdiff1d(index.all_ids(), self._db.all_ids(), assume_unique=False)
        if len(gone):
            index.remove(gone)

    def _read_snapshot(self, man: Manifest) -> FaissIndex:
        path = self.folder / man.index_file
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

    def _check_hits(self, q, scores, ids, rows) -> None:
        """Every hit's score must be the query's cosine with the vector the database holds for
        that id (rows: verified rows): an index that disagrees is never shown as a result."""
        tol = SCORE_TOLERANCE[self._index.kind]
        wrong = set()
        for qv, srow, irow in zip(q, scores, ids):
            for s, i in zip(srow, irow):
                if i >= 0 and int(i) in rows and abs(float(rows[int(i)][1] @ qv) - float(s)) > tol:
                    wrong.add(int(i))
        if wrong:
            raise StoreCorrupted(
                f"the index in {self.folder} disagrees with the database for sentence(s) "
                f"{', '.join(map(str, sorted(wrong)[:10]))}; the sentences are safe in the "
                "database, and repairing the store rebuilds the index from them",
                path=self.folder / MANIFEST_NAME, remedy="repair")


class _RebuildNeeded(Exception):
    """Nothing to load (no snapshot yet, or one of another model after a rebuild): build the
    index from the database. Not damage."""


def _same_vectors(a: np.ndarray, b: np.ndarray, held_as: str) -> np.ndarray:
    """Per row: does the index's (decoded) vector b match the database's a? held_as: what the
    index keeps of a vector (FaissIndex.held_as)."""
    if held_as == "sq8":    # 8-bit codes: close in angle, not equal
        cos = np.einsum("ij,ij->i", a, b) / np.maximum(np.linalg.norm(b, axis=1), 1e-12)
        return cos > SQ8_MIN_COSINE
    if held_as == "fp16":   # each component within one fp16 step (FAISS may round a tie the other way)
        return (np.abs(a - b) <= np.abs(a) * 2.0 ** -10 + 2.0 ** -24).all(axis=1)
    return np.abs(a - b).max(axis=1) <= 1e-6
