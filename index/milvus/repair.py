"""After a Milvus Lite writer was killed: make the store whole again before it is used.

A writer leaves FOLDER/unclean while it has the folder open. The next open that finds it
(a writer, or a reader when no writer holds the folder) rereads every id once: Milvus Lite's
WAL replay can bring back rows that were also flushed, so one id appears twice (count(*) and
queries see both copies); each such id is rewritten once, from its newest copy. The id counter
is also moved past the largest id present, so no id is ever handed out twice.
"""
from __future__ import annotations

import logging

from ..durability import WriterLock
from ..errors import StoreLocked
from .calls import plain_rows
from .lite import UNCLEAN
from .schema import FIELDS, PROP

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
        marker.touch()


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
