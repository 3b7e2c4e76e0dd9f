"""Ids, duplicates and reads on a Milvus server, where several writers may share a collection and the
server may restart at any moment.

No counter is trusted alone: a writer commits under the collection's writer lock and, holding
it, reads back (Strong consistency) which of its texts are stored and the highest stored id at
or above the next_id hint, so a hint rolled back by a server restart (a known Milvus bug, milvus-io/milvus#30144: an
acknowledged property change lost) can never hand out an id in use. The hint itself keeps the
ids of removed rows from coming back.

The writer lock is a collection, NAME__writer, whose description names its holder: creating a
collection that exists with other parameters fails, so exactly one writer's create succeeds.
A holder killed mid-commit leaves it behind; it counts as abandoned after STALE_AFTER seconds
(a commit holds it for one batch, well under a second).
"""
from __future__ import annotations

import contextlib
import json
import random
import time
import uuid

from index.errors import StoreError, StoreUnavailable
from index.milvus.calls import plain_rows
from index.milvus.schema import PROP

LOCK_SUFFIX = "__writer"
LOCK_PREFIX = "encoderscope writer lock"
STALE_AFTER = 20.0
WAIT_FOR_LOCK = 120.0


def lock_name(collection: str) -> str:
    return collection + LOCK_SUFFIX


class ServerWriterLock:
    """The writer lock of one collection on a server (see the module docstring)."""

    def __init__(self, client, call, collection: str, describe: str):
        self.client = client
        self.call = call
        self.name = lock_name(collection)
        self.describe = describe          # the store, for messages
        self.token = None

    def _schema(self, token: str):
        from pymilvus import DataType, MilvusClient
        schema = MilvusClient.create_schema(
            auto_id=False, description=f"{LOCK_PREFIX} {token} {time.time():.3f}")
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)   # Milvus wants a vector field
        return schema

    def acquire(self, wait: float = WAIT_FOR_LOCK) -> None:
        token = uuid.uuid4().hex
        start = time.monotonic()
        while True:
            try:
                self.call(self.client.create_collection, self.name, schema=self._schema(token),
                          what="take the writer lock")
                self.token = token
                return
            except StoreUnavailable:
                raise
            except StoreError as e:
                if "duplicate collection" not in str(e) and "already exist" not in str(e):
                    raise
            held = self._held_for()
            if held is not None and held > STALE_AFTER:
                self._drop(expect=None)       # its holder died mid-commit
                continue
            if time.monotonic() - start > wait:
                raise StoreUnavailable(
                    f"another writer has held the writer lock of {self.describe} for "
                    f"{held or 0:.0f} s; try again when it is done (an abandoned lock is "
                    f"taken over after {STALE_AFTER:.0f} s)")
            time.sleep(0.02 + random.random() * 0.08)

    def _held_for(self) -> float | None:
        """Seconds since the current holder took the lock; None when it is gone."""
        try:
            desc = self.call(self.client.describe_collection, self.name,
                             what="read the writer lock")
        except StoreUnavailable:
            raise
        except StoreError:
            return None
        parts = str(desc.get("description", "")).split()
        try:
            return time.time() - float(parts[-1])
        except (ValueError, IndexError):
            return STALE_AFTER + 1      # not one of ours: treat as abandoned

    def _holder(self) -> str | None:
        try:
            desc = self.call(self.client.describe_collection, self.name,
                             what="read the writer lock")
        except StoreError:
            return None
        parts = str(desc.get("description", "")).split()
        return parts[-2] if len(parts) >= 2 else None

    def _drop(self, expect: str | None) -> None:
        if expect is not None and self._holder() != expect:
            return       # taken over after we were too slow: not ours to drop
        try:
            self.call(self.client.drop_collection, self.name, what="release the writer lock")
        except StoreError:
            pass         # the server is gone; the lock goes stale and is taken over

    def release(self) -> None:
        if self.token is not None:
            token, self.token = self.token, None
            self._drop(expect=token)


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


class ServerCommits:
    """MilvusStore's commits and reads where writers share a server: the writer lock around a
    commit, duplicates and the first free id read back under it, Session reads."""

    @contextlib.contextmanager
    def _commit_guard(self):
        """On a server: the writer lock around a commit's duplicate check and insert, and
        the first free id read back under it. Lite: one writer process already (its lock)."""
        if self.loc.kind != "server" or self._server_lock is not None:
            yield
            return
        lock = ServerWriterLock(self._client, self._call, self._name, self.loc.describe())
        lock.acquire()
        self._server_lock = lock
        try:
            yield
        finally:
            self._server_lock = None
            self._free_id = None
            lock.release()

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
            if hint is not None:     # one Strong read: the stored texts and ids above the hint
                expr = f"({expr}) or id >= {hint}" if part else f"id >= {hint}"
            # Under the lock the first read waits for every writer's rows (Strong); later ones
            # are served past that point already.
            rows = self._server_query(expr, ["id", "hash"], strong=locked and i == 0) \
                if self.loc.kind == "server" else plain_rows(self._call(
                    self._client.query, self._name, filter=expr,
                    output_fields=["id", "hash"], what="look for duplicates"))
            if hint is not None:
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
        waiting for the server's clock tick (Strong waits ~200 ms on every call). Servers
        before 2.4 return no timestamp for a delete, so the first read after one is Strong."""
        if self.loc.kind != "server":
            return {}
        if self._unseen_delete:
            self._unseen_delete = False
            return {"consistency_level": "Strong"}
        return {"consistency_level": "Session"}

