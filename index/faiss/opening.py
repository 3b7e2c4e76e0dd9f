"""Opening a FAISS store folder: checks of the folder and its files, the writer lock, creating
a new store's database, and loading (or repairing) its index snapshot. VectorStore.open calls
open_store, and load_checked again when a reader must catch up with a writer."""
from __future__ import annotations

from pathlib import Path

from core.errors import InputError
from index.faiss.faiss_index import REQUESTS
from index.faiss.manifest import MANIFEST_NAME, UnsupportedFormat
from index.faiss.sentences import DB_NAME, SIDE_FILES, SentenceDB
from index.faiss.snapshot import RebuildNeeded, check_against_db, load_snapshot, set_damaged_aside
from index.faiss.torn import clear_torn, refuse_torn, torn_at_creation
from index.faiss.vector_log import LOG_NAME
from index.store import fingerprint as fpmod
from index.store.durability import WriterLock, check_regular, move_aside, remove_stale_temps, write_failed
from index.store.errors import StoreCorrupted, StoreError, StoreNotFound
from index.store.files import check_readable, refuse_links
from index.store.whitening import WHITENING_FILE, is_whitened, store_fingerprint
from index.store.whitening import write as write_whitening

# The stored setting "auto" switches at; stores keep the key they were first written with.
IVF_THRESHOLD_KEY = "hnsw_threshold"


def open_store(cls, folder: Path, *, writable: bool, create: bool, fingerprint, index: str,
               index_params: dict | None, ivf_threshold: int, repair: bool, check: bool,
               verify: bool, whitening):
    """A `cls` (VectorStore) on `folder`; the arguments are VectorStore.open's."""
    folder = Path(folder).expanduser()
    if create and not writable:
        raise ValueError("create=True needs writable=True")
    if repair and not writable:
        raise ValueError("repair=True needs writable=True")
    if index not in REQUESTS:
        raise InputError(f"unknown index kind {index!r}; choose one of {', '.join(REQUESTS)}")
    db_path = folder / DB_NAME
    if folder.exists() and not folder.is_dir():
        raise StoreError(f"{folder} is a file, not a store folder")
    check_readable(folder)
    refuse_links(folder)
    torn = check_regular(db_path, "sentence database", remedy="restore") and torn_at_creation(folder)
    if torn and not create:
        refuse_torn(folder)
    if torn or not check_regular(db_path, "sentence database", remedy="restore"):
        if not create:
            if (folder / MANIFEST_NAME).exists():
                raise StoreCorrupted(f"the store at {folder} has lost its sentence database "
                                     f"({db_path} is missing)", path=db_path, remedy="restore")
            raise StoreNotFound(f"no store at {folder}", location=str(folder))
        if fingerprint is None:
            raise InputError("creating a store needs the model fingerprint")
        fingerprint = _creation_fingerprint(fingerprint, whitening)
        try:   # a symlink to a folder not made yet (a dangling link) gets its folder
            folder.resolve().mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise write_failed(folder, e, f"the store folder {folder}") from None
        # a torn creation's database files are its own, removed under the lock below
        own = ("lock", WHITENING_FILE, *((DB_NAME, *(DB_NAME + s for s in SIDE_FILES)) if torn else ()))
        strangers = [p.name for p in folder.iterdir() if p.name not in own
                     and not p.name.startswith(".") and not (torn and LOG_NAME.fullmatch(p.name))]
        if strangers:
            raise StoreError(f"{folder} is not empty and holds no store; choose an empty or "
                             "new folder for the store")
    moved = []
    if repair:   # a folder or FIFO where the lock or SQLite's side files belong holds nothing
        for name in ("lock", *(DB_NAME + suffix for suffix in SIDE_FILES)):
            moved.append(move_aside(folder / name))
    lock = WriterLock(folder).acquire() if writable else None
    db = None
    try:
        if writable:
            remove_stale_temps(folder)
        if create and torn_at_creation(folder):    # checked again under the lock
            clear_torn(folder)
        db = SentenceDB(folder)
        if check and db.initialised():
            db.check()
        if not db.initialised():
            if not (create and writable):
                raise StoreCorrupted(f"{db_path} is not an Encoderscope store database",
                                     path=db_path, remedy="restore")
            if whitening is not None:    # first: the database must never name a missing file
                write_whitening(folder, whitening)
            fpd = fpmod.as_dict(fingerprint)
            db.create({"fingerprint": fpd, "dim": int(fpd["dim"]), "index_request": index,
                       "index_params": index_params or {}, IVF_THRESHOLD_KEY: int(ivf_threshold),
                       "generation": 0, "structural_generation": 0, "format_version": 1})
        if writable:
            db.stage_drop()               # an interrupted rebuild's staged vectors
            if db.needs_upgrade():        # a store written before row checksums or the vector log
                db.upgrade()
            db.open_log_for_writing()
        else:     # a missing or foreign log is said first: no repair of the snapshot mends it
            db.vector_log()
        store = cls(folder, db, lock)
        if (whitening is not None and writable and store._fp.get("whitening") != whitening.digest()
                and is_whitened(store._fp) and db.count() == 0):
            store = _whiten_afresh(cls, store, folder, db, lock, fingerprint, whitening)
        if whitening is not None and store._fp.get("whitening") != whitening.digest():
            raise InputError(f"{folder} already holds a store: a whitening is fitted when a "
                             "store is created; choose a new folder for the whitened store")
        if fingerprint is not None:
            store._check_model(fingerprint, "your vectors and queries")
        store._load(repair=repair, verify=verify)
        store.check_report.setdefault("moved", []).extend(m.name for m in moved if m)
        if writable and (store._saved_gen != store._indexed_gen or store._needs_migration()):
            store.save()
        return store
    except BaseException:
        if db is not None:
            db.close()
        if lock is not None:
            lock.release()
        raise


def _whiten_afresh(cls, store, folder, db, lock, model_fp, whitening):
    """A whitened store that holds no sentence yet (its first ingest was cut off after the
    transform was written) takes the transform fitted now: nothing stored was whitened with
    the old one. Done under the writer lock, checked empty under it."""
    if model_fp is None:
        return store
    store._check_model(model_fp, "your vectors and queries")    # the same model, else refused
    fpd = store_fingerprint(model_fp, whitening)
    write_whitening(folder, whitening)
    with db.transaction():
        db.set_meta("fingerprint", fpd)
        db.set_meta("dim", int(fpd["dim"]))
        if db.vector_log() is not None:
            db.switch_log(int(fpd["dim"]))     # the whitened dimension may differ
    return cls(folder, db, lock)


def load_checked(store, *, repair: bool = False, verify: bool = False) -> None:
    """Load the snapshot named by the manifest, catch it up with the database and check it
    against the database. One recovery path: whatever is wrong with the snapshot, repair
    rebuilds the index from the database (setting damaged rows aside first)."""
    store.check_report = {"rows": None, "damaged": [], "rebuilt": False, "set_aside": []}
    try:
        try:
            _load_verified(store, verify)
        except RebuildNeeded:      # nothing saved yet, or a snapshot of another model
            store._rebuild_index()
            store._saved_gen = -1
            if verify:              # the rows it was built from are checked all the same
                check_against_db(store._db, store.folder, store._index, store._dim, full=True,
                                 report=store.check_report)
    except StoreCorrupted as problem:
        if not repair or problem.remedy != "repair" or isinstance(problem, UnsupportedFormat):
            raise
        _repair(store)


def _load_verified(store, verify: bool) -> None:
    reader = store._lock is None
    for attempt in range(5):
        try:
            with store._db.read_snapshot(enabled=reader):
                loaded = load_snapshot(store._db, store.folder, store._fp, store._dim)
                store._index, store._indexed_gen, store._saved_gen = (
                    loaded.index, loaded.indexed_gen, loaded.saved_gen)
                check_against_db(store._db, store.folder, store._index, store._dim, full=verify,
                                 report=store.check_report)
            return
        except FileNotFoundError:
            # A writer replaced the snapshot between our manifest read and the index read.
            if not reader or attempt == 4:
                raise StoreCorrupted(
                    f"the index file named by {store.folder / MANIFEST_NAME} is missing; the "
                    "sentences are safe in the database, and repairing the store rebuilds the "
                    "index from them", path=store.folder / MANIFEST_NAME, remedy="repair") from None


def _repair(store) -> None:
    """Set aside the rows that fail their checksum, then rebuild the index from the rest."""
    set_damaged_aside(store._db, store.folder, store._dim, store.check_report)
    store._rebuild_index()
    store._saved_gen = -1


def _creation_fingerprint(fingerprint, whitening) -> dict:
    """The fingerprint a new store records: the model's, or with a whitening the whitened one."""
    if whitening is None:
        if is_whitened(fingerprint):
            raise InputError("a whitened store is created with its whitening transform: pass "
                             "whitening= with the fingerprint of the model's own vectors")
        return fingerprint
    return store_fingerprint(fingerprint, whitening)
