"""Ids and duplicates on a Milvus server, where several writers may share a collection and the
server may restart at any moment.

No counter is trusted alone: a writer commits under the collection's writer lock and, holding
it, reads back (Strong consistency) which of its texts are stored and the highest stored id at
or above the next_id hint, so a hint rolled back by a server restart (Milvus issue #30144: an
acknowledged property change lost) can never hand out an id in use. The hint itself keeps the
ids of removed rows from coming back.

The writer lock is a collection, NAME__writer, whose description names its holder: creating a
collection that exists with other parameters fails, so exactly one writer's create succeeds.
A holder killed mid-commit leaves it behind; it counts as abandoned after STALE_AFTER seconds
(a commit holds it for one batch, well under a second).
"""
from __future__ import annotations

import random
import time
import uuid

from index.errors import StoreError, StoreUnavailable

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
