"""The writer lock of a collection on a Milvus server: a lease that can expire, fenced.

The lock is a collection, NAME__writer: creating a collection that exists fails, so exactly
one writer's create succeeds. Its description names the holder (token, host, pid, when) and
its `encoderscope.lease` property says when the holder last renewed it. A holder that stops
renewing (killed, stalled, cut off) loses it after LEASE seconds; a holder on this machine
whose process is gone loses it at once.

Milvus has no conditional write, so the fence is on the holder's side, where it cannot be
skipped: every call made under the lock goes through `fence()`, which (for a write) reads the
lock back and checks that it still carries this holder's token, and refuses once the lease
has run out on this process's own monotonic clock; the call's timeout is what is left of the
lease, so no request can reach the server after the lease ran out (gRPC sends the deadline
with it and drops a request whose deadline has passed). A stalled holder (SIGSTOP) therefore
stops with WriterLockLost instead of writing onto ids another writer has handed out since.
Clocks of machines sharing a server must agree within MARGIN seconds.
"""
from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid

from core.files.platform_os import pid_alive
from core.notices import say
from index.milvus.schema import PROP
from index.store.durability import command_of
from index.store.errors import StoreError, StoreUnavailable, WriterLockLost

LOCK_SUFFIX = "__writer"
LOCK_PREFIX = "encoderscope writer lock"
LEASE = 20.0              # seconds a holder may go without renewing
RENEW_AFTER = LEASE / 4   # a holder renews once this much of its lease has gone
MARGIN = 3.0              # a holder stops this long before a waiter may take its lock over
WAIT_FOR_LOCK = 600.0     # a waiter gives up after this long behind a live holder
NOTICE_AFTER = 2.0        # a waiter says nothing for a wait shorter than this (a commit)
SAY_EVERY = 10.0          # seconds between a waiter's notices
LEASE_PROP = PROP + "lease"

log = logging.getLogger(__name__)


def lock_name(collection: str) -> str:
    return collection + LOCK_SUFFIX


def foreign_companion(name: str, role: str, where: str, collection: str) -> StoreError:
    """The refusal for a collection in a companion's place that Encoderscope did not make."""
    return StoreError(
        f"{where} holds a collection {name} that Encoderscope did not make, where the store "
        f"{collection} keeps its {role}; it was left as it is: rename or remove it, or "
        f"choose another collection for the store with ?collection=NAME")


class Holder:
    """What a lock collection says about its holder."""

    def __init__(self, desc: dict):
        words = str(desc.get("description", "")).split()
        prefix = len(LOCK_PREFIX.split())
        self.ours = " ".join(words[:prefix]) == LOCK_PREFIX
        rest = words[prefix:]
        self.token = rest[0] if rest else None
        self.host = rest[1] if len(rest) >= 4 else None
        self.pid = int(rest[2]) if len(rest) >= 4 and rest[2].isdigit() else None
        self.command = rest[3] if len(rest) >= 5 else None     # "ingest", "app", ...
        try:
            self.since = float(rest[-1]) if rest else 0.0
        except ValueError:
            self.since = 0.0
        self.renewed = self.since
        lease = str((desc.get("properties") or {}).get(LEASE_PROP, "")).split()
        if len(lease) == 2 and lease[0] == self.token:
            try:
                self.renewed = max(self.since, float(lease[1]))
            except ValueError:
                pass

    def gone(self) -> bool:
        """Whether the holder is a process of this machine that no longer runs."""
        if self.host != socket.gethostname() or self.pid is None:
            return False
        if self.pid == os.getpid():
            return False
        return not pid_alive(self.pid)

    def who(self) -> str:
        """The holder in words: its command where known, its process and host."""
        if self.pid is None:
            return "another writer"
        command = self.command
        if command is None and self.host == socket.gethostname():
            command = command_of(self.pid)
        what = ("the Encoderscope app, " if command == "app" else
                f"`encoderscope {command}`, " if command else "")
        return f"{what}process {self.pid} on {self.host}"


def own_description(token: str) -> str:
    """The lock's description: who holds it (the command is one word, before the time, so
    a reader that knows only token, host, pid and time still reads those)."""
    command = command_of(os.getpid())
    return " ".join([LOCK_PREFIX, token, socket.gethostname(), str(os.getpid()),
                     *([command] if command else []), f"{time.time():.3f}"])


class LockHeld(StoreUnavailable):
    """A live writer holds the lock (it renews its lease)."""


class ServerWriterLock:
    """The writer lock of one collection on a server (see the module docstring)."""

    def __init__(self, client, call, collection: str, describe: str):
        self.client = client
        self.call = call
        self.collection = collection
        self.name = lock_name(collection)
        self.describe = describe          # the server, for messages
        self.token = None
        self._valid_until = 0.0           # time.monotonic() at which this holder must stop
        self._stop = threading.Event()
        self._beat = None
        self._lost_why = None             # why this holder lost the lock, once it has

    def _schema(self, token: str):
        from pymilvus import DataType, MilvusClient
        schema = MilvusClient.create_schema(
            auto_id=False, description=own_description(token))
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=2)   # Milvus wants a vector field
        return schema

    # ---- taking and giving back ------------------------------------------------------------
    def try_acquire(self) -> bool:
        """Take the lock only if no live writer holds it (an abandoned one is taken over)."""
        try:
            self.acquire(wait=0.0)
        except LockHeld:
            return False
        return True

    def acquire(self, wait: float = WAIT_FOR_LOCK) -> ServerWriterLock:
        token = uuid.uuid4().hex
        self._lost_why = None
        start = time.monotonic()
        said = None
        while True:
            t0 = time.monotonic()
            try:
                self.call(self.client.create_collection, self.name, schema=self._schema(token),
                          what="take the writer lock", timeout=LEASE - MARGIN, fenced=False)
                self.token = token
                self._valid_until = t0 + LEASE - MARGIN
                self._start_heartbeat()
                if said is not None:
                    say(f"took the writer lock of {self.collection} after waiting "
                        f"{time.monotonic() - start:.0f} s", log)
                return self
            except StoreUnavailable:
                raise
            except StoreError as e:
                if "duplicate collection" not in str(e) and "already exist" not in str(e):
                    raise
            holder = self._holder()
            if holder is None:
                continue                     # given back in between: try again at once
            if not holder.ours:
                raise foreign_companion(self.name, "writer lock", self.describe, self.collection)
            age = time.time() - holder.renewed
            if holder.gone() or age > LEASE:
                self._take_over(holder.token)
                continue
            waited = time.monotonic() - start
            if waited > wait:
                raise LockHeld(
                    f"{holder.who()} has held the writer lock of {self.collection} on "
                    f"{self.describe} for {time.time() - holder.since:.0f} s and still renews it; "
                    "try again when it is done")
            if waited >= NOTICE_AFTER and (said is None or time.monotonic() - said >= SAY_EVERY):
                said = time.monotonic()
                say(self._waiting(holder, waited, wait), log)
            time.sleep(0.02 + random.random() * 0.08)

    def _waiting(self, holder: Holder, waited: float, wait: float) -> str:
        age = max(time.time() - holder.renewed, 0.0)
        return (f"waiting for the writer lock of {self.collection} on {self.describe}: "
                f"{holder.who()} has held it for {max(time.time() - holder.since, 0.0):.0f} s "
                f"(renewed {age:.0f} s ago; taken over if not renewed for {LEASE:.0f} s); "
                f"waited {waited:.0f} s so far, giving up after {wait:.0f} s")

    def _holder(self) -> Holder | None:
        """The holder as the server has it now; None when there is no lock."""
        try:
            desc = self.call(self.client.describe_collection, self.name,
                             what="read the writer lock", timeout=LEASE - MARGIN,
                             fenced=False)
        except StoreUnavailable:
            raise
        except StoreError:
            return None
        return Holder(desc)

    def _take_over(self, stale_token: str | None) -> None:
        """Drop an abandoned lock, if it is still the one judged abandoned."""
        now = self._holder()
        if now is None or now.token != stale_token:
            return
        say(f"taking over the writer lock of {self.collection}, abandoned by {now.who()}", log)
        try:
            self.call(self.client.drop_collection, self.name, what="take over the writer lock",
                      fenced=False)
        except StoreUnavailable:
            raise
        except StoreError:
            pass

    def _start_heartbeat(self) -> None:
        """Renew the lease while the holder works between calls (embedding a rebuild's batch
        can take longer than the lease). It stops with the process (SIGSTOP included), so it
        cannot keep a stalled holder's lease alive."""
        self._stop.clear()

        def beat():
            while not self._stop.wait(RENEW_AFTER / 2):
                if self.token is None:
                    return
                if self.remaining() < LEASE - MARGIN - RENEW_AFTER:
                    try:
                        self.renew()
                    except StoreError:
                        return          # the holder's next call reports it
        self._beat = threading.Thread(target=beat, name="writer-lease", daemon=True)
        self._beat.start()

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None and self._beat is not threading.current_thread():
            self._beat.join(timeout=LEASE)
            self._beat = None
        if self.token is None:
            return
        token, self.token = self.token, None
        try:
            now = self._holder()
            if now is not None and now.token == token:
                self.call(self.client.drop_collection, self.name, what="release the writer lock",
                          fenced=False)
        except StoreError:
            pass         # the server is gone; the lease runs out and the lock is taken over

    # ---- the fence ---------------------------------------------------------------------------
    def remaining(self) -> float:
        return self._valid_until - time.monotonic()

    def _lost(self, why: str) -> WriterLockLost:
        self.token = None
        self._lost_why = why        # said again by every later call, never "it was given back"
        return WriterLockLost(
            f"this writer lost the writer lock of {self.collection} on {self.describe} ({why}); "
            "it stopped before writing anything more: what it committed before is kept; run "
            "the command again")

    def ran_out_during(self, what: str) -> WriterLockLost:
        """The lease ran out during a call (its deadline): this process was paused (SIGSTOP, a
        suspended laptop) or the call took the whole lease."""
        return self._lost(f"its lease ran out while it waited to {what}: this process was paused, "
                          f"or the call took longer than the {LEASE - MARGIN:.0f} s left of the lease")

    def fence(self, write: bool) -> float:
        """Before a call under the lock: renew the lease when due and, for a write, check that
        the lock is still this holder's. Returns the seconds the call may take."""
        if self.token is None:
            raise self._lost(self._lost_why or "it was given back")
        left = self.remaining()
        if left <= 0:
            raise self._lost(f"it was not renewed for {LEASE - MARGIN - left:.0f} s, and "
                             f"another writer may take it over after {LEASE:.0f} s")
        if left < LEASE - MARGIN - RENEW_AFTER:
            self.renew()
        elif write:
            self._check_token()
        return max(self.remaining(), 0.1)

    def _check_token(self) -> None:
        now = self._holder()
        if now is None or now.token != self.token:
            raise self._lost("another writer took it over" if now else "it was removed")

    def renew(self) -> None:
        t0 = time.monotonic()
        self._check_token()
        if self.remaining() <= 0:
            raise self._lost("renewing it took longer than the lease")
        self.call(self.client.alter_collection_properties, self.name,
                  properties={LEASE_PROP: f"{self.token} {time.time():.3f}"},
                  what="renew the writer lock", timeout=max(self.remaining(), 0.1),
                  fenced=False)
        self._valid_until = t0 + LEASE - MARGIN
