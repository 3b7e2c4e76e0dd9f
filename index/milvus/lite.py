"""Milvus Lite in a local folder: its layout, the one-process-per-folder rule and its locks,
starting the embedded server, and stopping it once no store of this process uses it.

Milvus Lite folder layout (milvus-lite:FOLDER):
    FOLDER/milvus.db/                 Milvus Lite's data (WAL + segments; its own LOCK)
    FOLDER/encoderscope-milvus.json   small manifest: format, collection, created
    FOLDER/lock                       flock'ed by the one writer (index.store.durability.WriterLock)
    FOLDER/unclean                    there while a writer has the folder open (see repair.py)
Milvus Lite lets one process open a folder at a time (readers included); a second process gets
StoreLocked naming the holder.
"""
from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path

from core.errors import InputError
from core.files.platform_os import PosixLock, pid_alive
from index.milvus.calls import INSTALL_HINT
from index.milvus.schema import FORMAT, FORMAT_VERSION
from index.store.durability import WriterLock, atomic_write, write_failed
from index.store.errors import StoreCorrupted, StoreError, StoreLocked, StoreNotFound
from index.store.files import LITE_FILES, kind_of, refuse_links
from index.store.location import LITE_MANIFEST, Location

RELEASE_WAIT = 5.0      # s to wait for a dead or closed writer's Milvus Lite lock to clear
UNCLEAN = "unclean"     # in a Lite folder while a writer has it open (removed on close)

log = logging.getLogger(__name__)

_USERS: dict[str, int] = {}     # Lite data dir -> MilvusStore objects using it in this process
_MUTEX = threading.Lock()
_COPIES: set = set()            # Lite data dirs that are reading copies of read-only folders


def lock_holder(folder: Path) -> int | None:
    """The pid recorded by the folder's last writer, if readable."""
    try:
        raw = (folder / "lock").read_text(encoding="ascii", errors="replace").strip()
        return int(raw) if raw else None
    except (OSError, ValueError):
        return None


def holder_gone(folder: Path) -> bool:
    """Whether the process recorded as the folder's last writer is this one or no longer runs."""
    pid = lock_holder(folder)
    if pid is None or pid == os.getpid():
        return True
    return not pid_alive(pid)


def is_locked(data_dir: Path) -> bool:
    """Whether another process holds Milvus Lite's own LOCK on data_dir."""
    path = data_dir / "LOCK"
    if not path.exists():
        return False
    try:
        fd = os.open(str(path), os.O_RDONLY)    # flock needs no write access (read-only media)
    except OSError:
        return False
    lock = PosixLock()       # Milvus Lite's own lock is flock (it runs on Linux and macOS only)
    try:
        if not lock.try_lock(fd):
            return True
        lock.unlock(fd)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def prepare(loc: Location, writable: bool, create: bool, fingerprint) -> WriterLock | None:
    """Check the folder (a store of ours, or empty when creating), take the writer lock when
    writable, and make sure no other process has Milvus Lite running on it."""
    folder = loc.path
    manifest = folder / LITE_MANIFEST
    if os.path.exists(folder) and not folder.is_dir():
        raise StoreError(f"{folder} is {kind_of(folder)}, not a store folder; give a folder "
                         "(a new one to create a store) after milvus-lite:")
    refuse_links(folder, LITE_FILES, ())
    if not manifest.exists():
        if not create:
            if (folder / "store.db").exists():
                raise StoreNotFound(f"{folder} holds a FAISS store, not a Milvus Lite one: open the "
                                    f"folder itself, without milvus-lite:")
            if loc.lite_db.is_dir():
                raise StoreNotFound(f"the store at {loc} was left half-made by an interrupted first "
                                    "ingest (its creation never completed)", location=str(loc))
            raise StoreNotFound(f"no store at {loc}", location=str(loc))
        if fingerprint is None:
            raise InputError("creating a store needs the model fingerprint")
        try:
            folder.resolve().mkdir(parents=True, exist_ok=True)     # a dangling link: its target
        except OSError as e:
            raise write_failed(folder, e, f"the store folder {folder}") from None
        strangers = [p.name for p in folder.iterdir()
                     if p.name not in ("lock", loc.lite_db.name) and not p.name.startswith(".")]
        if strangers:
            raise StoreError(f"{folder} is not empty and holds no store; choose an empty or "
                             "new folder for milvus-lite:FOLDER")
    else:
        try:
            d = json.loads(manifest.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise StoreCorrupted(f"the manifest {manifest} is damaged ({e})",
                                 path=manifest) from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise StoreCorrupted(f"{manifest} is not an Encoderscope Milvus manifest",
                                 path=manifest)
    lock = WriterLock(folder).acquire() if writable else None
    try:
        from milvus_lite.server_manager import server_manager_instance as mgr
    except ImportError:
        if lock:
            lock.release()
        raise StoreError(f"Milvus Lite stores need milvus-lite: {INSTALL_HINT}") from None
    running_here = os.path.abspath(loc.lite_db) in getattr(mgr, "_servers", {})
    if not running_here and is_locked(loc.lite_db) and holder_gone(folder):
        # The last writer is dead (killed) or was this process: Milvus Lite's own lock is
        # still being let go (a server stopping, a killed process being reaped). Wait a little.
        deadline = time.monotonic() + RELEASE_WAIT
        while time.monotonic() < deadline and is_locked(loc.lite_db):
            time.sleep(0.1)
    if not running_here and is_locked(loc.lite_db):
        if lock:
            lock.release()
        pid = lock_holder(folder)
        who = f"process {pid}" if pid else "another process"
        raise StoreLocked(
            f"the Milvus Lite store {folder} is open in {who}; Milvus Lite lets one process "
            "at a time use a folder (readers included): close the other program, or put "
            "the corpus on a Milvus server to share it (see docs/scale-out.md)", pid=pid)
    return lock


def on_read_only_media(loc: Location) -> bool:
    """The folder cannot be written (a read-only mount, chattr +i): Milvus Lite, which writes
    its LOCK and WAL even to read, cannot run on it."""
    return loc.path.is_dir() and not os.access(loc.path, os.W_OK)


def reading_copy(loc: Location) -> Path:
    """A private copy of a read-only folder's Milvus Lite data, for Milvus Lite to run on
    (removed again by release)."""
    import shutil
    import tempfile
    where = Path(tempfile.mkdtemp(prefix="encoderscope-lite-readonly-"))
    try:
        shutil.copytree(loc.lite_db, where / loc.lite_db.name,
                        ignore=shutil.ignore_patterns("LOCK"))
    except OSError as e:
        shutil.rmtree(where, ignore_errors=True)
        raise StoreError(f"the Milvus Lite store {loc.path} is on read-only media, and "
                         f"copying it to read it failed ({e.strerror or e}): copy it to "
                         "writable storage and open it there") from None
    _COPIES.add(str(where / loc.lite_db.name))
    return where / loc.lite_db.name


def connect(loc: Location, pymilvus, data_dir: Path | None = None):
    """A client on the folder's embedded Milvus Lite (started in this process if needed);
    data_dir: where its data is, when not in the folder (a reading copy)."""
    t0 = time.perf_counter()
    try:
        client = pymilvus.MilvusClient(str(data_dir or loc.lite_db))
    except pymilvus.MilvusException as e:
        if is_locked(loc.lite_db):
            raise StoreLocked(f"the Milvus Lite store {loc.path} is open in another "
                              "process; Milvus Lite lets one process at a time use a folder",
                              pid=lock_holder(loc.path)) from None
        raise StoreCorrupted(f"Milvus Lite could not open {loc.lite_db} "
                             f"({getattr(e, 'message', e)})", path=loc.lite_db) from None
    log.info("Milvus Lite %s opened in %.2f s", loc.lite_db, time.perf_counter() - t0)
    return client


def has_manifest(loc: Location) -> bool:
    return (loc.path / LITE_MANIFEST).exists()


def write_manifest(loc: Location) -> None:
    """The small file that marks the folder as an Encoderscope Milvus Lite store."""
    import milvus_lite
    d = {"format": FORMAT, "format_version": FORMAT_VERSION, "collection": loc.collection,
         "data": loc.lite_db.name, "created": time.time(),
         "milvus_lite": getattr(milvus_lite, "__version__", "?")}
    atomic_write(loc.path / LITE_MANIFEST, (json.dumps(d, indent=2) + "\n").encode())


def register(key: str) -> None:
    """One more store of this process uses the Lite server for `key`."""
    with _MUTEX:
        _USERS[key] = _USERS.get(key, 0) + 1


def release(key: str, registered: bool) -> None:
    """Stop this process's Milvus Lite server for `key` once no store uses it, so that
    another process can open the folder."""
    with _MUTEX:
        n = _USERS.get(key, 0) - (1 if registered else 0)
        if n > 0:
            _USERS[key] = n
            return
        _USERS.pop(key, None)
        try:
            from milvus_lite.server_manager import server_manager_instance
            server_manager_instance.release_server(key)
        except Exception:   # noqa: BLE001,S110  (best effort: the process may be exiting)
            pass
        if key in _COPIES:
            import shutil
            _COPIES.discard(key)
            shutil.rmtree(Path(key).parent, ignore_errors=True)
