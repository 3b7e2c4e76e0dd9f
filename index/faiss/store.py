"""VectorStore: sentences in SQLite and their vectors in a log beside it (the source of truth), a
FAISS index snapshot for search, a manifest tying them together. See docs/api-contract.md for the
backend it embeds with.

Folder layout:
    store.db (+ -wal, -shm)   sentences, metadata, each row's vector slot, row checksums, store id,
                              generation counter (index/faiss/sentences.py, index/faiss/row_checks.py)
    vectors-<n>.f32           the float32 vectors, one slot each, appended a window at a time
                              (index/faiss/vector_log.py); rows of older stores hold theirs inline
    index-<generation>.faiss  the FAISS snapshot named by the manifest (a flat index has none: it
                              holds nothing the log does not, and an open builds it from there)
    manifest.json             format, store id, fingerprint, dim, metric, index kind + params,
                              count, generation covered, index file name/size/sha256
    lock                      flock'ed by the one writer; holds its pid
    whitening.safetensors     a whitened store's transform (index/store/whitening.py), named by the
                              sha256 in its fingerprint and checked against it on every open

Trust: the database carries a random store id, also written in the manifest, and a checksum per
row; on open the index must list exactly the database's ids and hold the database's vectors
(a sample; all of them with verify=True), and every search hit's score is checked against the
database's vector for that id, so a foreign, older or damaged part gives StoreCorrupted (with
remedy "repair"), never a wrong result (index/faiss/snapshot.py). Only regular files are opened (no
FIFO can block); OS write errors (a full disk) are one StoreWriteFailed (index/store/durability.py).

Durability: every batch of added sentences is one SQLite transaction (WAL, synchronous=FULL),
its vectors appended to the log and fsync'd before it commits; the
in-memory index takes the batch's vectors beside the commit and is rebuilt from the database if
either fails.
`save()` writes the FAISS snapshot to a new file (temp + fsync + rename), then the manifest (same
way), then deletes older snapshots; a crash at any point leaves the manifest pointing at a
complete older snapshot. On open, a snapshot behind the database (crash between commit and
save) is caught up from the stored vectors, without the model.

Opening and loading: opening.py; writing the snapshot: snapshot_write.py; rebuilding the index and
re-embedding with another model: rebuild.py.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from core.errors import Cancelled, InputError
from index.faiss import rebuild
from index.faiss.faiss_index import AUTO_IVF_THRESHOLD, REQUESTS, FaissIndex, resolve_kind
from index.faiss.new_rows import NewRows, planned_rows
from index.faiss.opening import IVF_THRESHOLD_KEY, load_checked, open_store
from index.faiss.sentences import SentenceDB
from index.faiss.snapshot import (
    check_against_db,
    exact_scores,
)
from index.faiss.snapshot_write import write_snapshot
from index.store import fingerprint as fpmod
from index.store.adding import EMBED_WINDOW, AddResult, check_texts, plan_unique
from index.store.base import Hit, Store
from index.store.durability import WriterLock
from index.store.errors import DuplicateText, ModelMismatch, StoreCorrupted, StoreError, UnknownId
from index.store.location import default_store_dir
from index.store.text_hash import text_hashes
from index.store.whitening import describe_whitening, is_whitened
from index.store.whitening import load as load_whitening

# Windows of at least this many rows add their vectors to the index beside the COMMIT; smaller
# ones add them after it, on this thread (a thread handoff would cost more than the copy).
INDEX_ADD_BESIDE = 256


class VectorStore(Store):
    """FAISS + SQLite store. Open with `VectorStore.open(folder, ...)`."""

    def __init__(self, folder: Path, db: SentenceDB, lock: WriterLock | None):
        self.folder = Path(folder)
        self._db = db
        self._lock = lock
        self._mutex = threading.RLock()
        self._index: FaissIndex | None = None
        self._fp: dict = db.get_meta("fingerprint")
        self._encoders = db.get_meta("encoders")          # None: a store from before they were recorded
        self._dim: int = int(db.get_meta("dim"))
        self._request: str = db.get_meta("index_request", "auto")
        self._params: dict = db.get_meta("index_params", {}) or {}
        self._threshold: int = int(db.get_meta(IVF_THRESHOLD_KEY, AUTO_IVF_THRESHOLD))
        if (self._fp is None or self._fp.get("dim") != self._dim or not 0 < self._dim < 1 << 16
                or self._request not in REQUESTS):
            raise StoreCorrupted(f"the sentence database {db.path} is damaged: its model, "
                                 "dimension or index settings are inconsistent; restore it from "
                                 "a backup", path=db.path, remedy="restore")
        if is_whitened(self._fp):
            self._whitening = load_whitening(self.folder, self._fp, self._dim)
        self._indexed_gen = -1     # database generation the in-memory index reflects
        self._saved_gen = -1       # generation of the snapshot on disk
        self._stale = False        # HNSW/ivf after an update: rebuild before use
        self._migration_cancelled = False   # prepare_index() was cancelled: keep the old kind
        self._closed = False
        if lock is not None:       # the writer: WAL checkpoints off its commits' thread
            db.checkpoint_in_background()

    # ---------------------------------------------------------------------------------------
    # opening
    # ---------------------------------------------------------------------------------------
    @classmethod
    def open(cls, folder=None, *, writable: bool = False, create: bool = False, fingerprint=None,
             index: str = "auto", index_params: dict | None = None,
             ivf_threshold: int = AUTO_IVF_THRESHOLD, repair: bool = False,
             check: bool = True, verify: bool = False, whitening=None) -> VectorStore:
        """Open (or with create=True, writable=True and a fingerprint, create) a store.

        fingerprint: the model the caller will add/search with; a different model raises
        ModelMismatch (rebuild() re-embeds the store for another model).
        index: "auto" (exact, ivf from ivf_threshold vectors on), "flat", "hnsw", "sq8" or
        "ivf"; used when creating; an existing store keeps its own.
        repair (writable only): a damaged, missing or foreign index snapshot or manifest is
        rebuilt from the database, rows that fail their checksum are set aside (table
        `damaged`); a manifest of another format version is never overwritten.
        verify: check every row (checksum, unit vector) and every index vector against the
        database, not only a sample; the findings are in `check_report`.
        whitening (create only): a core.evaluate.whitening.Whitening whose whitened vectors the new store
        keeps; `fingerprint` is then the model's, and the store's becomes the whitened one.
        """
        folder = Path(folder) if folder is not None else default_store_dir()
        return open_store(cls, folder, writable=writable, create=create, fingerprint=fingerprint,
                          index=index, index_params=index_params, ivf_threshold=ivf_threshold,
                          repair=repair, check=check, verify=verify, whitening=whitening)

    # ---- loading and checking the snapshot (index/faiss/opening.py) -------------------------
    def _load(self, repair: bool = False, verify: bool = False) -> None:
        self._same_model_as_stored()
        load_checked(self, repair=repair, verify=verify)

    def _same_model_as_stored(self) -> None:
        """A reader catching up with a writer: the database still holds vectors of the model
        this store was opened with. A writer's rebuild with another model would otherwise load
        the new vectors under the old model's queries (same width: wrong hits, silently)."""
        stored = self._db.get_meta("fingerprint")
        if stored is not None and fpmod.as_dict(stored) != fpmod.as_dict(self._fp):
            raise ModelMismatch(
                f"the store at {self.folder} was re-embedded with {fpmod.describe(stored)} by "
                f"a writer while this reader had it open with {fpmod.describe(self._fp)}; "
                "nothing was read from the new vectors: open the store again",
                store_model=stored.get("model"), other_model=self._fp.get("model"), again=True)

    def verify(self) -> dict:
        """Check every row and every index vector against the database (what `info --check`
        runs): check_report, or StoreCorrupted naming what is damaged."""
        with self._mutex:
            if self._stale:
                self._rebuild_index()
            check_against_db(self._db, self.folder, self._index, self._dim, full=True,
                                 report=self.check_report)
        return dict(self.check_report)

    def _rebuild_index(self, kind: str | None = None, progress=None, cancel=None) -> None:
        """Build the FAISS index from the vectors stored in the database (a cancel raises
        Cancelled and keeps the index held so far)."""
        db = self._db
        kind = kind or resolve_kind(self._request, db.count(), self._threshold)
        self._index = rebuild.index_from_db(db, self._dim, kind, self._params_for(kind),
                                            progress=progress, cancel=cancel)
        self._indexed_gen = db.generation
        self._stale = False

    def _params_for(self, kind):
        return self._params if self._request == kind else {}

    def _needs_migration(self) -> bool:
        """Index kind or quantiser training that should change now that the store has grown."""
        return not self._migration_cancelled and self.pending_reindex() is not None

    def prepare_index(self, progress=None, cancel=None) -> None:
        """Do the rebuild pending_reindex() announces now, with progress(done, total) and a
        cancel Event checked between chunks. A cancel raises Cancelled and keeps the current
        index (save() then writes it as it is; the next prepare_index() or opening the store
        for writing tries the rebuild again)."""
        self._need_writer()
        with self._mutex:
            self._migration_cancelled = False
            if not self._needs_migration():
                return
            try:
                self._rebuild_index(progress=progress, cancel=cancel)
            except Cancelled:
                self._migration_cancelled = True
                raise

    def pending_reindex(self) -> str | None:
        """What the next save() will rebuild, in words (it can take minutes), or None."""
        return rebuild.pending_reindex(self._index, self._request, self._threshold)

    # ---------------------------------------------------------------------------------------
    # properties
    # ---------------------------------------------------------------------------------------
    @property
    def where(self) -> str:
        return str(self.folder)

    @property
    def index_kind(self) -> str:
        return self._index.kind

    @property
    def writable(self) -> bool:
        return self._lock is not None

    def _save_encoders(self, record: list) -> None:
        # vectors were just added, so the save that follows writes a new manifest with the record
        with self._mutex, self._db.transaction():
            self._db.set_meta("encoders", record)

    def _need_writer(self):
        if self._closed:
            raise StoreError("the store is closed")
        if self._lock is None:
            raise StoreError(f"the store at {self.folder} was opened read-only")

    # ---------------------------------------------------------------------------------------
    # changes
    # ---------------------------------------------------------------------------------------
    def _text_keys(self, texts) -> list:
        check_texts(texts)
        return text_hashes(texts)

    def _change_mark(self) -> int:
        """The database's generation: every committed change moves it (add_stream reuses a
        window's duplicate look-up while only its own commits moved it)."""
        return self._db.generation

    def _stored_ids(self, keys) -> dict:
        """hash -> id of the keys the database holds (one query a window)."""
        return self._db.existing_ids(set(keys))

    def _plan(self, texts, result: AddResult, keys=None, known=None):
        """known: hash -> id of the stored ones among keys, when the caller has it current."""
        hashes = self._text_keys(texts) if keys is None else keys
        existing = self._db.existing_ids(set(hashes)) if known is None else known
        plan, dup_of = plan_unique(hashes, existing, result)
        return plan, dup_of, hashes

    def _store_planned(self, plan, texts, metas, vecs, result: AddResult, hashes, ids=None):
        rows = planned_rows(plan, texts, hashes, metas, vecs)
        if ids is None:
            self._commit_rows(plan, rows, result)
        else:               # a migrate copy keeps its source's ids
            self._commit_rows(plan, rows, result, [ids[i] for i in plan])

    def can_keep_ids(self) -> bool:
        """Whether no id was ever handed out here (a migrate copy then keeps its source's ids)."""
        return self._db.highest_id_ever() == 0

    def _commit_rows(self, plan, rows: NewRows, result: AddResult, keep=None):
        """Insert the rows in one transaction; their vectors go into the index at once, on a
        helper thread while the rows are inserted and SQLite's COMMIT writes and syncs them
        (the add and the disk work release the GIL). The
        database stays the truth: if the commit fails, or the add does, the index is rebuilt
        from the database before its next use (a failing add fails again there, and says so)."""
        if not len(rows):
            return
        db = self._db
        adding = None
        try:
            with db.transaction():
                ids = db.new_ids(len(rows), keep)
                if not self._stale and len(rows) >= INDEX_ADD_BESIDE:
                    adding = _IndexAdd(self._index, ids, rows.vectors)
                db.insert(rows, ids)
                gen = db.bump()
            if adding is None and not self._stale:
                adding = _IndexAdd(self._index, ids, rows.vectors, now=True)
            if adding is not None and adding.finish() is not None:
                self._stale = True      # committed, but not in the index: rebuilt from the database
        except BaseException:
            if adding is not None:
                adding.wait()
                self._stale = True      # the index may disagree with the database now
            raise
        db.release_cache()
        for i, id_ in zip(plan, ids):
            result.ids[i] = id_
        result.added += len(ids)
        self._indexed_gen = gen

    def remove(self, ids) -> list:
        """Remove sentences by id; returns the ids that were there (unknown ids are skipped)."""
        self._need_writer()
        ids = [int(i) for i in ids]
        with self._mutex:
            with self._db.transaction():
                gone = self._db.delete(ids)
                if gone:
                    gen = self._db.bump()
            if gone:
                self._index_remove(gone)
                self._indexed_gen = gen
        return gone

    def _index_remove(self, ids):
        if not self._stale:
            self._index.remove(np.asarray(ids, np.int64))

    def update_text(self, id, text, vector=None, *, backend=None, fingerprint=None) -> None:
        """Replace the text of sentence `id` and its vector (embedded with `backend` when no
        vector is given)."""
        self._need_writer()
        id = int(id)
        if not isinstance(text, str) or not text.strip():
            raise InputError("empty texts cannot be stored")
        with self._mutex:
            if not self._db.records([id]):
                raise UnknownId(f"no sentence with id {id} in the store at {self.folder}")
            other = self._db.id_of(text)
            if other is not None and other != id:
                raise DuplicateText(f"the store already holds this text as id {other}")
            x = self._vector_for(text, vector, backend, fingerprint)
            with self._db.transaction():
                self._db.update(id, text, x)
                gen = self._db.bump(structural=True)
            if self._index.supports_update and not self._stale:
                self._index.remove(np.asarray([id], np.int64))
                self._index.add(np.asarray([id], np.int64), x[None, :])
            else:
                self._stale = True
            self._indexed_gen = gen

    def clear(self) -> None:
        self._need_writer()
        with self._mutex:
            with self._db.transaction():
                self._db.clear()
                self._db.bump(structural=True)
            self._rebuild_index()

    def rebuild(self, backend, pooling=None, *, batch_size: int = EMBED_WINDOW,
                embed_batch_size: int | None = None, progress=None, cancel=None) -> None:
        """Re-embed every sentence with another model (or pooling) and switch the store to it
        (see rebuild.py: an interruption leaves the store on its old model, intact)."""
        rebuild.rebuild(self, backend, pooling, batch_size=batch_size,
                        embed_batch_size=embed_batch_size, progress=progress, cancel=cancel)

    def reindex(self, kind: str | None = None, progress=None, cancel=None) -> None:
        """Rebuild the FAISS index from the stored vectors (no model needed) and save it.
        A cancel (Event, checked between chunks) raises Cancelled and changes nothing."""
        rebuild.reindex(self, kind, progress, cancel)

    # ---------------------------------------------------------------------------------------
    # snapshot
    # ---------------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the index snapshot + manifest for the current database state (if changed)."""
        self._need_writer()
        with self._mutex:
            if self._stale or self._needs_migration() or self._indexed_gen != self._db.generation:
                self._rebuild_index()
            gen = self._db.generation
            if self._saved_gen == gen:
                return
            write_snapshot(self.folder, self._index, self._db, gen, self._fp, self._dim,
                           self._encoders)
            self._saved_gen = gen

    def close(self) -> None:
        if self._closed:
            return
        try:
            if self._lock is not None:
                self.save()
                self._db.checkpoint()
        finally:
            self._closed = True
            self._db.close()
            if self._lock is not None:
                self._lock.release()

    # ---------------------------------------------------------------------------------------
    # reading
    # ---------------------------------------------------------------------------------------
    def search(self, vectors, k: int = 10, *, fingerprint=None):
        """Nearest sentences by cosine similarity (see Store.search); k larger than the store is fine."""
        if self._closed:
            raise StoreError("the store is closed")
        q = self._query_vectors(vectors, fingerprint)
        k = int(k)
        if k < 1:
            raise InputError("k must be at least 1")
        with self._mutex:
            for attempt in (1, 2):
                if self._stale:
                    self._rebuild_index()
                scores, ids = self._index.search(q, k)
                wanted = {int(i) for i in ids.ravel() if i >= 0}
                # A reader reads the rows and the log they name as one view (a writer's rebuild
                # may switch logs between the two).
                with self._db.read_snapshot(enabled=self._lock is None):
                    rows = self._db.rows.with_vectors(wanted, self._dim) if wanted else {}
                try:
                    found = exact_scores(self.folder, self._index, q, scores, ids, rows)
                    break
                except StoreCorrupted:
                    # A reader whose index predates a writer's commit (an updated text) sees
                    # the new row beside its old vector: load the writer's state, search again.
                    if attempt == 2 or self._lock is not None or \
                            self._db.generation == self._indexed_gen:
                        raise
                    self._load()
        # Each hit's score is its exact cosine with the vector the database holds (exact_scores).
        out = []
        for row in found:
            hits = [Hit(cos, i, rows[i][0]["text"], rows[i][0]["metadata"]) for i, cos in row]
            hits.sort(key=lambda h: (-h.score, h.id))
            out.append(hits)
        return out

    def count(self) -> int:
        return self._db.count()

    def iter(self):
        """Every sentence as {"id", "text", "metadata"}, in id order."""
        return self._db.iter_records()

    def get(self, ids) -> dict:
        return self._db.records(ids)

    def iter_batches(self, batch: int = 2000, vectors: bool = True):
        """(ids int64, vectors float32 (n, dim) or None, records) in id order, `batch` rows at
        a time, read from SQLite (what migrate copies)."""
        for ids, vecs in self._db.vectors(self._dim, batch=batch):
            recs = self._db.records(ids.tolist())
            keep = [i for i, id_ in enumerate(ids.tolist()) if id_ in recs]
            yield ids[keep], (vecs[keep] if vectors else None), [recs[int(ids[i])] for i in keep]

    def vectors(self):
        """(ids, vectors) of the whole store, as stored."""
        parts = list(self._db.vectors(self._dim))
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self._dim), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def index_ids(self) -> np.ndarray:
        return np.sort(self._index.ids())

    def bytes_on_disk(self) -> int:
        total = 0
        for p in self.folder.iterdir():
            if p.is_file() and p.name != "lock":
                total += p.stat().st_size
        return total

    def info(self) -> dict:
        return {"count": self.count(), "model": self._fp.get("model"), "dim": self._dim,
                "index": self._index.kind, "index_structure": self._index.describe(),
                "bytes": self.bytes_on_disk(),
                "metric": "cosine", "pooling": self.pooling,
                "fingerprint": dict(self._fp), "index_params": dict(self._index.params),
                "path": str(self.folder), "generation": self._db.generation,
                "whitening": describe_whitening(self._whitening, self._fp, self.folder)}

    def __repr__(self):
        return f"VectorStore({str(self.folder)!r}, {self.count()} sentences, {self._index.kind})"


class _IndexAdd:
    """index.add(ids, vectors) on a helper thread (now: on this one, at once): finish() waits
    and returns what it raised."""

    def __init__(self, index: FaissIndex, ids, vectors, now: bool = False):
        self._error: BaseException | None = None
        args = (index, np.asarray(ids, np.int64), vectors)
        self._thread = None if now else threading.Thread(target=self._run, args=args, daemon=True,
                                                         name="encoderscope-index-add")
        if now:
            self._run(*args)
        else:
            self._thread.start()

    def _run(self, index, ids, vectors) -> None:
        try:
            index.add(ids, vectors)
        except BaseException as e:      # noqa: BLE001 - raised again on the caller's thread
            self._error = e

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()

    def finish(self) -> BaseException | None:
        self.wait()
        return self._error
