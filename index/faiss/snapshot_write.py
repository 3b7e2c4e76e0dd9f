"""Writing a FAISS store's index snapshot and its manifest, crash-safe: the snapshot goes to a
new file (temp + fsync + rename), then the manifest (same way), then older snapshots are
deleted, so a crash at any point leaves the manifest naming a complete snapshot."""
from __future__ import annotations

from pathlib import Path

from index.faiss.faiss_index import FaissIndex
from index.faiss.manifest import MANIFEST_NAME, Manifest, sha256_file, write_manifest
from index.store.durability import atomic_write_with, check_regular, write_failed


def index_file_name(generation: int) -> str:
    return f"index-{generation:010d}.faiss"


def write_snapshot(folder: Path, index: FaissIndex, db, gen: int, fingerprint: dict, dim: int,
                   encoders) -> None:
    """Write `index` as the snapshot of database generation `gen`, and the manifest naming it.
    A flat index of a format 3 store is not written: it holds nothing the database and its
    vector log do not (each vector as it is, inline or in the log), so the manifest names no
    file and an open builds it from the database."""
    check_regular(folder / MANIFEST_NAME, "manifest")
    name = path = None
    size, digest = 0, None
    if not (index.kind == "flat" and db.has_slots):
        name = index_file_name(gen)
        path = folder / name
        check_regular(path, "index file")               # no folder/FIFO in the way
        try:
            size = atomic_write_with(path, index.write)
        except OSError as e:
            raise write_failed(path, e, f"the index snapshot {path}") from None
        digest = sha256_file(path)
    man = Manifest(fingerprint=fingerprint, dim=dim, index_kind=index.kind,
                   index_params=index.params, index_file=name, index_bytes=size,
                   index_sha256=digest, count=index.ntotal,
                   max_id=db.max_id(), generation=gen, store_id=db.store_id,
                   encoders=encoders)
    try:
        write_manifest(folder, man)
    except OSError as e:
        if path is not None:
            _unlink_quietly(path)     # the snapshot nobody points to
        raise write_failed(folder / MANIFEST_NAME, e,
                           f"the manifest {folder / MANIFEST_NAME}") from None
    for old in folder.glob("index-*.faiss"):
        if old.name != name:
            _unlink_quietly(old)


def _unlink_quietly(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass
