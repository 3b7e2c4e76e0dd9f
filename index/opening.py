"""Opening the right store implementation for a location (index.store.location parses it): the one
module above the engines that names them all.

`open_store(location, ...)` returns a `index.store.base.Store`; everything above the store (CLI, app,
migrate) uses only that. Nothing here imports pymilvus or faiss until a store is opened.
"""
from __future__ import annotations

from core.errors import InputError
from index.store.location import LITE_MANIFEST, parse_location


def describe_location(location) -> str:
    """A short human description of a location, without any secret (for messages, titles)."""
    return parse_location(location).describe()


def store_exists(location) -> bool:
    """Whether a store is already there (a server is asked only when opening)."""
    loc = parse_location(location)
    if loc.kind == "faiss":
        from index.faiss.sentences import DB_NAME
        from index.faiss.torn import torn_at_creation
        return (loc.path / DB_NAME).exists() and not torn_at_creation(loc.path)
    if loc.kind == "lite":
        return (loc.path / LITE_MANIFEST).exists()
    return True


def store_named_by(source):
    """The Location of the store `source` names (a FAISS folder or its database file, milvus-lite:,
    a server), or None when it names no store (a text file, a missing path, nothing)."""
    text = str(source).strip()
    if not text:
        return None
    loc = parse_location(text)
    if loc.is_milvus:
        return loc
    from index.faiss.sentences import DB_NAME
    if loc.path.name == DB_NAME:
        return parse_location(loc.path.parent)
    return loc if loc.path.is_dir() and (loc.path / DB_NAME).is_file() else None


def refuse_whitening(location) -> None:
    """InputError for a whitened store anywhere but a FAISS folder (the one engine that keeps
    the transform beside its index)."""
    loc = parse_location(location)
    if loc.kind != "faiss":
        raise InputError(f"{loc.describe()} cannot be whitened: a whitening transform is kept "
                         "beside a FAISS store's index, and Milvus stores have no place for it yet; "
                         "use a FAISS store folder for whitened vectors")


def open_store(location=None, *, writable: bool = True, create: bool = False, fingerprint=None,
               index: str = "auto", index_params: dict | None = None, **kw):
    """Open the store at `location` (see the module docstring) -> index.store.base.Store.

    writable=False opens for searching only; create=True creates a missing
    store for `fingerprint` (needs a writable open). fingerprint: the model the caller will add
    and search with; another model raises index.store.errors.ModelMismatch on every implementation.
    whitening= (FAISS only; create): a core.evaluate.whitening.Whitening the new store applies.
    Other keywords go to the implementation (FAISS: repair, ivf_threshold, check; Milvus:
    timeout, token).
    """
    loc = parse_location(location)
    if loc.kind == "faiss":
        from index.faiss.store import VectorStore
        return VectorStore.open(loc.path, writable=writable, create=create,
                                fingerprint=fingerprint, index=index, index_params=index_params,
                                **kw)
    from index.store.whitening import is_whitened
    if kw.pop("whitening", None) is not None or is_whitened(fingerprint):
        refuse_whitening(loc)
    from index.milvus import MilvusStore
    return MilvusStore.open(loc, writable=writable, create=create, fingerprint=fingerprint,
                            index=index, index_params=index_params, **kw)
