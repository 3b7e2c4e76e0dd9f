"""After a Milvus Lite writer was killed: make the store whole again before it is used.

Half-written index files: Milvus Lite writes each segment's index sidecar (an .npy of the
vectors for FLAT, a Parquet file for the scalar index) in place, so a kill in the middle leaves a
truncated file that fails every later load of the collection. They are derived data (Milvus Lite
builds a missing one from the segment on load), so `remove_damaged_index_files` deletes the ones
proven incomplete (their own header or footer says so) and the open loads again; a file it
cannot judge is left alone and the load's error stands.

Duplicates: a writer leaves FOLDER/unclean while it has the folder open. The next open that finds it
(a writer, or a reader when no writer holds the folder) rereads every id once: Milvus Lite's
WAL replay can bring back rows that were also flushed, so one id appears twice (count(*) and
queries see both copies); each such id is rewritten once, from its newest copy. The id counter
is also moved past the largest id present, so no id is ever handed out twice.
"""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from index.milvus.calls import plain_rows
from index.milvus.lite import UNCLEAN
from index.milvus.schema import FIELDS, PROP
from index.store.durability import WriterLock
from index.store.errors import StoreLocked
from index.store.files import touch_own

INSERT_CHUNK = 1000          # rows per upsert call
QUERY_CHUNK = 500            # ids per get call

log = logging.getLogger(__name__)


def after_crash_check(store) -> None:
    """Repair `store` (a Lite MilvusStore just opened) if its last writer did not close it;
    then mark the folder unclean while this store writes to it."""
    marker = store.folder / UNCLEAN
    if marker.exists():
        temp = None
        if store._lock is None:
            try:
                temp = WriterLock(store.folder).acquire()
            except StoreLocked:
                temp = None       # a writer in this process: the marker is its own
        if store._lock is not None or temp is not None:
            try:
                fixed = repair_duplicates(store)
                if fixed:
                    log.warning("%s: rewrote %d sentences duplicated by an interrupted "
                                "write", store.location, fixed)
                if temp is not None:
                    marker.unlink(missing_ok=True)
            finally:
                if temp is not None:
                    temp.release()
    if store._writable:
        touch_own(marker)


def repair_duplicates(store) -> int:
    """Rewrite every id stored twice once; returns how many ids were rewritten."""
    seen, dups = set(), set()
    for r in store._scan([], dedupe=False):
        i = int(r["id"])
        if i in seen:
            dups.add(i)
        seen.add(i)
    top = max(seen, default=0) + 1
    call, client = store._call, store._client
    if top > store._next_id:        # never hand out an id that is already there
        call(client.alter_collection_properties, store._name,
             properties={PROP + "next_id": str(top)}, what="repair ids")
        store._next_id = top
    if not dups:
        return 0
    fields = ["id", "vector", "hash"] + FIELDS
    rows = {}
    ids = sorted(dups)
    for s in range(0, len(ids), QUERY_CHUNK):
        for r in plain_rows(call(client.get, store._name, ids=ids[s:s + QUERY_CHUNK],
                                 output_fields=fields, what="repair")):
            rows[int(r["id"])] = {k: r.get(k) for k in fields}
    data = list(rows.values())
    for s in range(0, len(data), INSERT_CHUNK):
        call(client.upsert, store._name, data=data[s:s + INSERT_CHUNK], what="repair")
    call(client.flush, store._name, what="flush")
    return len(data)


# Where Milvus Lite keeps index sidecars inside its data folder (milvus-lite 3.x layout).
INDEX_SIDECARS = "collections/*/partitions/*/indexes/*"


def remove_damaged_index_files(store) -> list[Path]:
    """Delete the index sidecars of `store`'s Lite folder that a crash left incomplete (with the
    writer lock: this store's, or taken for the moment); returns what was removed."""
    temp = None
    if store._lock is None:
        try:
            temp = WriterLock(store.folder).acquire()
        except StoreLocked:
            return []             # another process writes there: not ours to repair
    try:
        damaged = [p for p in sorted(Path(store.loc.lite_db).glob(INDEX_SIDECARS))
                   if p.is_file() and incomplete(p)]
        for p in damaged:
            p.unlink(missing_ok=True)
        if damaged:
            log.warning("%s: removed %d index file(s) left half-written by an interrupted write "
                        "(%s); Milvus Lite builds them again from the data", store.location,
                        len(damaged), ", ".join(p.name for p in damaged))
        return damaged
    finally:
        if temp is not None:
            temp.release()


def incomplete(path: Path) -> bool:
    """True when `path` is an .npy or Parquet file shorter than its own header or footer says
    (or empty, or cut inside its magic bytes); False when complete or of a format this cannot
    judge."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        head = f.read(6)
        f.seek(0)
        if len(head) < 6 and (b"\x93NUMPY".startswith(head) or b"PAR1".startswith(head[:4])):
            return True
        if head == b"\x93NUMPY":
            try:
                version = np.lib.format.read_magic(f)
                if version not in ((1, 0), (2, 0)):
                    return False
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
                shape, _, dtype = read(f)
            except ValueError:              # the header itself is cut or garbled
                return True
            return size < f.tell() + int(np.prod(shape)) * dtype.itemsize
        if head[:4] == b"PAR1":             # Parquet: a complete file ends with its footer magic
            if size < 12:
                return True
            f.seek(size - 4)
            return f.read(4) != b"PAR1"
    return False
