"""Errors of the vector store, worded for people (the CLI prints them as `error: ...`)."""
from __future__ import annotations

from core.errors import EncoderscopeError, InputError


class StoreError(EncoderscopeError):
    """Base class of everything the store reports."""


class StoreNotFound(StoreError):
    """No store at the given location (and creating one was not asked for). `location` is where
    one was looked for, so a caller can offer to create it there (the CLI as an ingest command)."""

    def __init__(self, message: str, location=None, fix=None):
        super().__init__(message, fix=fix)
        self.location = location


class StoreCorrupted(StoreError):
    """A store file is damaged, truncated or not what it claims to be.

    `path` names the file; the last good snapshot on disk is left untouched. `remedy` says what
    fixes it, as data for the caller to word (the CLI as a command, the app as an action):
    "repair" (rebuild the index and manifest from the sentence database, which is intact),
    "restore" (the database itself is damaged: restore a backup) or None. `damaged_ids` lists
    the sentence rows that failed their checksum, when that is the damage.
    """

    def __init__(self, message: str, path=None, remedy: str | None = None, damaged_ids=(), fix=None):
        super().__init__(message, fix=fix)
        self.path = path
        self.remedy = remedy
        self.damaged_ids = list(damaged_ids)


class StoreWriteFailed(StoreError):
    """The operating system refused a write (disk full, read-only, I/O error). Nothing that was
    committed or saved before is lost; `errno` is the OS error number, `path` the file."""

    def __init__(self, message: str, path=None, errno: int | None = None):
        super().__init__(message)
        self.path = path
        self.errno = errno


class ModelMismatch(StoreError):
    """Vectors or a query come from another model than the one the store was built with.

    `rebuild`, when re-embedding the store is the way out, says with what, as data for the caller
    to word: {"model", "pooling", "location"}. `again`: the store changed under this writer (its
    message says to run the command again): no other way out to offer."""

    def __init__(self, message: str, store_model=None, other_model=None, rebuild: dict | None = None,
                 again: bool = False):
        super().__init__(message)
        self.store_model = store_model
        self.other_model = other_model
        self.rebuild = rebuild
        self.again = again


class StoreLocked(StoreError):
    """Another process is writing to the store."""

    def __init__(self, message: str, pid=None):
        super().__init__(message)
        self.pid = pid


class DuplicateText(StoreError, InputError):
    """update_text was asked to store a text the store already holds under another id."""


class UnknownId(StoreError, InputError):
    """An id that is not in the store."""


class StoreUnavailable(StoreError):
    """A store server (Milvus) cannot be reached, refused the credentials or timed out."""


class AccessRefused(StoreUnavailable):
    """A store server refused the credentials, or its user lacks a privilege: waiting for the
    server does not help, the administrator or the token does."""


class LiteUnsupported(StoreError, InputError):
    """Milvus Lite does not ship for this platform (Windows). The fix, as data: a FAISS folder
    ("folder") or a Milvus server ("server"), the two kinds of store that work everywhere."""

    def __init__(self, message: str, folder: str, server: str):
        super().__init__(message, fix={"kind": "store_elsewhere", "folder": folder, "server": server})


class WriterLockLost(StoreError):
    """A writer whose lease on a shared store ran out (it stalled) or was taken over: it
    stopped before writing anything more."""


class EmptyStore(InputError):
    """The store holds no sentence: nothing to search or map. `location` is the store, so a
    caller can offer to ingest there."""

    def __init__(self, message: str, location=None, fix=None):
        super().__init__(message, fix=fix)
        self.location = location
