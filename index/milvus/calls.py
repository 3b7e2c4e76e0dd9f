"""Talking to Milvus: importing pymilvus, connecting to a server, running a call with its errors
worded for people (never a gRPC traceback), and reading results back safely."""
from __future__ import annotations

import logging
import os

from core.errors import settings_fix
from index.milvus.schema import MIN_SERVER, server_version
from index.store.errors import AccessRefused, StoreError, StoreNotFound, StoreUnavailable
from index.store.location import DEFAULT_COLLECTION, TOKEN_ENV, Location

INSTALL_HINT = "pip install 'encoderscope[milvus]'"
# Words in a server's error that mean the credentials were refused.
_AUTH_WORDS = ("auth", "token", "credential", "password", "unauthenticated")
# Words that mean the credentials were accepted but lack a privilege.
_PRIVILEGE_WORDS = ("privilege", "permission deny", "permission denied", "permissiondenied",
                    "not authorized to")


def import_pymilvus():
    """pymilvus, or StoreError with the install command."""
    try:
        import pymilvus
    except ImportError:
        raise StoreError("Milvus stores need the optional Milvus packages: "
                         f"{INSTALL_HINT} (pymilvus and milvus-lite)") from None
    # pymilvus logs every failed call at ERROR with a traceback; we raise worded errors instead.
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)   # connection recovery too
    logging.getLogger("milvus_lite.server_manager").setLevel(logging.CRITICAL)
    # Milvus Lite serves gRPC from a thread of this process; a call it does not implement
    # (AllocTimestamp, which pymilvus asks after create_index) is logged there at ERROR with a
    # traceback, and the CLI would print it. The client gets an error status, worded by Caller.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    # Milvus Lite logs its own failures (a full disk: a traceback per flush) that the store
    # raises as one worded StoreError; only its warnings about recovery are worth showing.
    logging.getLogger("milvus_lite.adapter.grpc.servicer").setLevel(logging.CRITICAL)
    return pymilvus


def plain_rows(result) -> list[dict]:
    """pymilvus query/get results as plain dicts, each row complete.

    pymilvus 3 returns a HybridExtraList: scalar fields are filled in at once, vectors (and
    other variable-length fields) later, on first access, *from the column at the row's
    current position in the list*. Sorting or reordering that list before every row was read
    pairs ids with another row's vector (what migrate copied after a Lite crash recovery,
    when rows no longer come back in id order). Iterating reads each row at its own
    position, so copy first, then reorder."""
    return [dict(r) for r in result]


def connect_server(loc: Location, pymilvus, token, timeout):
    """(client, (major, minor) server version) for a Milvus server this version supports; the
    token defaults to $ENCODERSCOPE_MILVUS_TOKEN."""
    token = token if token is not None else os.environ.get(TOKEN_ENV, "")
    try:
        client = pymilvus.MilvusClient(uri=loc.uri, token=token, db_name=loc.db_name,
                                       timeout=timeout)
    except Exception as e:   # noqa: BLE001  (MilvusException, grpc errors, socket errors)
        raise unavailable(loc, e, "connect", bool(token)) from None
    try:
        text = Caller(loc, timeout)(client.get_server_version, what="read the server's version")
        version = server_version(text)
        if version < MIN_SERVER:
            raise StoreError(f"the Milvus server {loc.uri} runs version {text}; Encoderscope "
                             f"needs Milvus {'.'.join(map(str, MIN_SERVER))} or newer")
        # The database is checked by the first call that names it.
        Caller(loc, timeout)(client.list_collections, what="list the collections")
    except BaseException:
        close_quietly(client)
        raise
    return client, version


def _missing_database(loc: Location) -> StoreNotFound:
    default = loc.uri + (f"?collection={loc.collection}" if loc.collection != DEFAULT_COLLECTION
                         else "")
    return StoreNotFound(
        f"the Milvus server {loc.uri} has no database {loc.db_name}: ask its administrator "
        f"to create it, or use the default database", fix=settings_fix(store=default))


def unavailable(loc: Location, e: Exception, what: str, has_token: bool = True) -> StoreError:
    """The StoreError for a failed call: refused credentials, a timeout, no connection, or
    anything else the server said."""
    msg = one_line(e)
    refused = _refused_credentials(e)
    if refused:       # pymilvus words this as "Fail connecting ... server unavailable"
        msg = refused
    low = msg.lower()
    where = loc.describe()
    if "database not found" in low and loc.db_name:
        return _missing_database(loc)
    if _denied(e) or (not refused and any(w in low for w in _PRIVILEGE_WORDS)):
        return AccessRefused(f"{where} accepted the credentials but their user may not "
                                f"{what} ({msg}): ask the server's administrator to grant "
                                "that privilege, or use a token of a user who has it")
    if any(w in low for w in _AUTH_WORDS):
        tok = (f"check the token in ${TOKEN_ENV}" if has_token else
               f"set ${TOKEN_ENV} to the server's token (user:password or an API key)")
        return AccessRefused(f"{where} refused the credentials while trying to {what}: "
                                f"{tok} ({msg})")
    if "deadline" in low or "timeout" in low or "timed out" in low:
        return StoreUnavailable(f"{where} did not answer in time while trying to {what}; "
                                f"check the address and the network ({msg}). Nothing was "
                                "changed locally.")
    if ("fail connecting" in low or "unavailable" in low or "connect" in low
            or "connection refused" in low or "server unavailable" in low):
        return StoreUnavailable(f"cannot reach {where} ({msg}): is the server running and the "
                                "address (host, port, http/https) right? Nothing was changed "
                                "locally.")
    return StoreError(f"{where} could not {what}: {msg}")


def one_line(e: BaseException) -> str:
    """What an error says, on one line and without a repr: a gRPC error's details (pymilvus
    wraps an `_InactiveRpcError` whose str is several lines of status fields)."""
    first, seen = e, 0
    while e is not None and seen < 5:
        details = getattr(e, "details", None)
        if callable(details):
            try:
                text = details()
                if text:
                    return " ".join(str(text).split())
            except Exception:  # noqa: BLE001,S110  (not a gRPC error after all)
                pass
        e, seen = e.__cause__ or e.__context__, seen + 1
    e = first
    text = str(getattr(e, "message", "") or e)
    if "_InactiveRpcError" in text or "status = " in text:
        import re
        m = re.search(r'details = "([^"]*)"', text)
        text = m.group(1) if m else text.split("\n")[0]
    return " ".join(text.split()).strip("<>") or type(e).__name__


def _with_status(e: BaseException, status: str):
    """The exception (e or one of its first causes) whose gRPC status is `status`, else None."""
    seen = 0
    while e is not None and seen < 5:
        code = getattr(e, "code", None)
        if callable(code):
            try:
                if getattr(code(), "name", "") == status:
                    return e
            except Exception:  # noqa: BLE001,S110  (not a gRPC error after all)
                pass
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def _denied(e: BaseException) -> bool:
    """Whether a gRPC status (of e or a cause) says PERMISSION_DENIED."""
    return _with_status(e, "PERMISSION_DENIED") is not None


def _refused_credentials(e: BaseException) -> str | None:
    """The server's words when it (or a cause of e) refused the credentials, else None."""
    refused = _with_status(e, "UNAUTHENTICATED")
    if refused is None:
        return None
    details = getattr(refused, "details", None)
    try:
        return str(details() if callable(details) else refused)
    except Exception:  # noqa: BLE001  (details of a half-built error)
        return str(refused)


# Calls that change something on the server: under a writer lock each is fenced (lease.py).
WRITES = frozenset({"insert", "upsert", "delete", "alter_collection_properties",
                    "drop_collection_properties", "drop_collection", "rename_collection",
                    "create_collection", "create_index", "drop_index", "flush"})


class Caller:
    """Runs a client call, turning pymilvus/gRPC errors into worded StoreErrors. While a
    writer lock is held (`lease`), every call is fenced by it and its timeout is cut to what
    is left of the lease."""

    def __init__(self, loc: Location, timeout: float | None):
        self.loc = loc
        self.timeout = timeout     # seconds per call on a server; None on Lite
        self.lease = None          # the ServerWriterLock held, if any

    def __call__(self, fn, *args, what: str, fenced: bool = True, **kw):
        if self.timeout is not None and "timeout" not in kw:
            kw["timeout"] = max(self.timeout, 30.0)
        lease = self.lease if fenced else None
        if lease is not None:
            left = lease.fence(write=getattr(fn, "__name__", "") in WRITES)
            kw["timeout"] = min(kw.get("timeout") or left, left)
        try:
            return fn(*args, **kw)
        except StoreError:
            raise
        except Exception as e:   # MilvusException, grpc.RpcError, OSError
            if not is_client_error(e):
                raise
            # the call's deadline was the lease's end: past it, this writer's own lease ran out
            # (the process paused, or the call slow), which is not a server that did not answer
            if lease is not None and lease.remaining() <= 0:
                raise lease.ran_out_during(what) from None
            raise unavailable(self.loc, e, what) from None


def is_client_error(e) -> bool:
    """Whether e came from pymilvus, gRPC or the network (not a bug of ours)."""
    try:
        from pymilvus import MilvusException
        if isinstance(e, MilvusException):
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import grpc
        if isinstance(e, grpc.RpcError):
            return True
    except ImportError:  # pragma: no cover
        pass
    return isinstance(e, (OSError, ConnectionError, TimeoutError))


def close_quietly(client) -> None:
    """Close a client that may already be broken (the server gone)."""
    try:
        client.close()
    except Exception:   # noqa: BLE001,S110  (nothing to do about a failing close)
        pass
