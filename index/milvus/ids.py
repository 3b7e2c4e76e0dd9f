"""Ids, duplicates and reads on a Milvus server, where several writers may share a collection and the
server may restart at any moment.

No counter is trusted alone: a writer commits under the collection's writer lock (lease.py)
and, holding it, reads back (Strong consistency) which of its texts are stored, the highest
stored id at or above the next_id hint and the id mark (marks.py), so a hint rolled back by a
server restart (a known Milvus bug, milvus-io/milvus#30144: an acknowledged property change
lost) can never hand out an id in use or one of a removed sentence.
"""
from __future__ import annotations

import contextlib
import json

from index.milvus.calls import plain_rows
from index.milvus.lease import ServerWriterLock
from index.milvus.schema import PROP
from index.store import fingerprint as fpmod
from index.store.errors import ModelMismatch


def verified_next_id(store, hint: int, stored: list[int]) -> int:
    """The first free id: above the hint and above every stored id at or beyond it (`stored`:
    the ids >= hint a Strong query found; more are looked up until none is left)."""
    while stored:
        hint = max(hint, max(stored) + 1)
        stored = [int(r["id"]) for r in store._server_query(
            f"id >= {hint}", ["id"], strong=True, limit=16_384)]
    return hint


HASH_CHUNK = 1024            # hashes per duplicate query on a server (each read waits its tick)
QUERY_CHUNK = 500            # hashes / ids per `in [...]` filter
MARK_ID = -1                 # the row that keeps the highest id handed out (never a sentence)


class ServerCommits:
    """MilvusStore's commits and reads where writers share a server: the writer lock around a
    commit, duplicates and the first free id read back under it, Session reads."""

    @contextlib.contextmanager
    def _commit_guard(self):
        """On a server: the writer lock (a fenced lease) around a commit or a whole write
        operation (remove, rebuild, repair, migrate), re-entrant; under it every call is
        fenced (lease.py). Lite and FAISS: one writer process already (the folder's lock)."""
        if self.loc.kind != "server" or self._server_lock is not None:
            yield
            return
        lock = ServerWriterLock(self._client, self._call, self._name, self.loc.describe())
        lock.acquire()
        self._server_lock = lock
        self._call.lease = lock
        try:
            self._same_model_as_stored()
            yield
        finally:
            self._call.lease = None
            self._server_lock = None
            self._free_id = None
            lock.release()

    def _same_model_as_stored(self) -> None:
        """Under the lock: the collection still holds vectors of this store's model (another
        writer may have re-embedded it since this one opened it)."""
        props = self._call(self._client.describe_collection, self._name,
                           what="read the collection").get("properties") or {}
        stored = json.loads(props.get(PROP + "fingerprint", "{}") or "{}")
        if stored and fpmod.as_dict(stored) != fpmod.as_dict(self._fp):
            raise ModelMismatch(
                f"the store at {self.location} was re-embedded with {fpmod.describe(stored)} by "
                f"another writer while this one had it open with {fpmod.describe(self._fp)}; "
                "nothing more was written: run the command again",
                store_model=stored.get("model"), other_model=self._fp.get("model"), again=True)

    def _server_query(self, filter: str, fields, *, strong: bool = False, limit=None):
        kw = {"limit": limit} if limit is not None else {}
        return plain_rows(self._call(
            self._client.query, self._name, filter=filter, output_fields=fields,
            consistency_level="Strong" if strong else "Session", what="read sentences", **kw))

    def _hint(self) -> int:
        """The next_id property (another writer may have moved it; a restart may have rolled
        it back: only a hint) and what this process handed out."""
        props = self._call(self._client.describe_collection, self._name,
                           what="read the collection").get("properties") or {}
        return max(self._next_id, int(props.get(PROP + "next_id", 1)))

    def _id_mark(self) -> int:
        """The highest id ever handed out as the mark row keeps it (0: none), read Strong."""
        rows = self._server_query(f"id == {MARK_ID}", ["row"], strong=True)
        return max([0] + [int(r.get("row") or 0) for r in rows])

    def _keep_id_mark(self, highest: int) -> None:
        """Remember `highest` as handed out, in a row (rows survive a restart; properties may
        not): removing the newest sentences must not free their ids. Under the lock."""
        top = max(highest, self._id_mark(), self._hint() - 1)
        vector = [1.0] + [0.0] * (self._dim - 1)
        self._call(self._client.upsert, self._name,
                   data=[self._row(MARK_ID, vector, "", "", None, top, 0.0, None)],
                   what="keep the highest id handed out")

    def _set_next_id(self, value: int) -> None:
        self._call(self._client.alter_collection_properties, self._name,
                   properties={PROP + "next_id": str(int(value))}, what="reserve ids")
        self._next_id = int(value)

    def _existing(self, hashes) -> dict[str, int]:
        hashes = list(dict.fromkeys(hashes))
        if self._dedup == "map":
            m = self._load_hash_map()
            return {h: m[h] for h in hashes if h in m}
        found = {}
        locked = self._server_lock is not None
        hint = self._hint() if locked and self._free_id is None else None
        chunk = HASH_CHUNK if self.loc.kind == "server" else QUERY_CHUNK
        for i in range(0, max(len(hashes), 1 if hint else 0), chunk):
            part = hashes[i:i + chunk]
            expr = f"hash in {json.dumps(part)}"
            if hint is not None:     # one Strong read: the stored texts, ids above the hint, the mark
                expr = (f"({expr}) or id >= {hint} or id == {MARK_ID}" if part
                        else f"id >= {hint} or id == {MARK_ID}")
            # Under the lock the first read waits for every writer's rows (Strong); later ones
            # are served past that point already.
            rows = self._server_query(expr, ["id", "hash", "row"], strong=locked and i == 0) \
                if self.loc.kind == "server" else plain_rows(self._call(
                    self._client.query, self._name, filter=expr,
                    output_fields=["id", "hash"], what="look for duplicates"))
            if hint is not None:
                mark = max([0] + [int(r.get("row") or 0) for r in rows
                                  if int(r["id"]) == MARK_ID])
                hint = max(hint, mark + 1)
                self._free_id = verified_next_id(
                    self, hint, [int(r["id"]) for r in rows if int(r["id"]) >= hint])
                hint = None
            wanted = set(part)
            for r in rows:
                if r["hash"] in wanted:
                    found.setdefault(r["hash"], int(r["id"]))
        return found

    def _server_top(self, top: int) -> int:
        """One past the highest id to read: the hint, or past rows stored above it (another
        writer's, or the hint rolled back by a restart)."""
        top = max(top, self._hint())
        above = self._server_query(f"id >= {top}", ["id"], limit=16_384)
        return max([top] + [int(r["id"]) + 1 for r in above])

    def _read_kw(self) -> dict:
        """Session consistency on a server: this process's own writes are seen without
        waiting for the server's clock tick (Strong waits ~200 ms on every call). A new
        client has written nothing, so its Session reads are only eventually consistent: the
        first read of an opened store is Strong (it sees every row written before, by any
        process; later reads on that query node are served past that point). Servers before
        2.4 return no timestamp for a delete, so the first read after one is Strong too."""
        if self.loc.kind != "server":
            return {}
        if self._wait_next_read:
            self._wait_next_read = False
            return {"consistency_level": "Strong"}
        return {"consistency_level": "Session"}

