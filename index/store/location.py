"""Where a store lives: the text of a `--store` location parsed into a Location, and nothing
else (no store code here, so the store implementations can import it).

    /some/folder                      our FAISS + SQLite store; a folder created as a Milvus Lite
                                      store is recognised as one
    milvus-lite:/some/folder          embedded Milvus Lite, data in /some/folder/milvus.db
    http(s)://HOST:PORT[/DB][?collection=NAME]
                                      a Milvus Standalone/Distributed server or cluster; the
                                      token comes from $ENCODERSCOPE_MILVUS_TOKEN

Opening the store at a location is index.opening.open_store.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from core.errors import InputError

TOKEN_ENV = "ENCODERSCOPE_MILVUS_TOKEN"
LOCATION_ENV = "ENCODERSCOPE_STORE"       # default store location when none is given
LITE_PREFIX = "milvus-lite:"
LITE_DB_NAME = "milvus.db"                # Milvus Lite data inside a milvus-lite: folder
LITE_MANIFEST = "encoderscope-milvus.json"
DEFAULT_COLLECTION = "encoderscope"       # on a server
LITE_COLLECTION = "sentences"             # in a Lite folder (one store per folder)
DEFAULT_PORT = 19530


@dataclass(frozen=True)
class Location:
    kind: str                    # "faiss" | "lite" | "server"
    path: Path | None = None     # faiss / lite: the folder
    uri: str | None = None       # server: scheme://host:port (no credentials, no path)
    db_name: str = ""            # server: Milvus database ("" = default)
    collection: str = ""         # lite / server: collection name
    text: str = ""               # what the user wrote

    @property
    def is_milvus(self) -> bool:
        return self.kind in ("lite", "server")

    @property
    def lite_db(self) -> Path | None:
        return self.path / LITE_DB_NAME if self.kind == "lite" else None

    def describe(self) -> str:
        if self.kind == "faiss":
            return f"the FAISS store in {self.path}"
        if self.kind == "lite":
            return f"the Milvus Lite store in {self.path}"
        db = f", database {self.db_name}" if self.db_name else ""
        return f"the Milvus server {self.uri}{db} (collection {self.collection})"

    def __str__(self):
        if self.kind == "faiss":
            return str(self.path)
        if self.kind == "lite":
            return f"{LITE_PREFIX}{self.path}"
        out = self.uri + (f"/{self.db_name}" if self.db_name else "")
        if self.collection != DEFAULT_COLLECTION:
            out += f"?collection={self.collection}"
        return out


def _check_collection_name(name: str, where: str) -> str:
    ok = name and (name[0].isalpha() or name[0] == "_") and all(
        c.isalnum() or c == "_" for c in name) and len(name) <= 255
    if not ok:
        raise InputError(f"{where}: collection names are letters, digits and underscores, "
                         f"starting with a letter (got {name!r})")
    return name


def default_store_dir() -> Path:
    """The CLI's store when none is named: <user data folder>/stores/default (see core.paths)."""
    from core.paths import stores_dir
    return stores_dir() / "default"


def parse_location(location) -> Location:
    """A store location (str or Path; None = $ENCODERSCOPE_STORE or the default folder)."""
    if location is None:
        env = os.environ.get(LOCATION_ENV)
        if env:
            location = env
        else:
            return Location("faiss", path=default_store_dir(), text=str(default_store_dir()))
    if isinstance(location, Location):
        return location
    if isinstance(location, Path):
        return _folder(location, str(location))
    text = str(location).strip()
    if not text:
        raise InputError("empty store location: give a folder, milvus-lite:FOLDER or "
                         "http(s)://HOST:PORT")
    low = text.lower()
    if low.startswith(LITE_PREFIX):
        rest = text[len(LITE_PREFIX):]
        rest = rest.removeprefix("//")      # milvus-lite:///abs/path
        if not rest.strip():
            raise InputError(f"{text}: give the folder after milvus-lite:, e.g. "
                             "milvus-lite:~/corpora/news")
        path = Path(rest).expanduser()
        if path.name == LITE_DB_NAME:       # milvus-lite:/x/milvus.db means the folder /x
            path = path.parent
        return _lite(path, text)
    if low.startswith(("http://", "https://", "tcp://", "grpc://")):
        return _server(text)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise InputError(f"{text}: unknown store scheme {scheme!r}; use a folder, "
                         "milvus-lite:FOLDER or http(s)://HOST:PORT")
    return _folder(Path(text), text)


def _folder(path: Path, text: str) -> Location:
    path = path.expanduser()
    try:
        # A Lite folder whose creation was cut off before its manifest was written still has
        # Milvus Lite's data folder (and no FAISS database): it is that Lite store, half-made.
        lite = (path / LITE_MANIFEST).exists() or (
            (path / LITE_DB_NAME).is_dir() and not (path / "store.db").exists())
    except OSError:     # an unreadable folder: opening the store says what is wrong with it
        lite = False
    if lite:            # a folder created with milvus-lite:
        return _lite(path, text)
    return Location("faiss", path=path, text=text)


def _lite(path: Path, text: str) -> Location:
    """A Milvus Lite folder; refused where Milvus Lite does not ship (Windows), offering the two
    stores that work there."""
    if sys.platform == "win32":
        from index.store.errors import LiteUnsupported
        folder = path if not path.exists() else path.with_name(path.name + "-faiss")
        raise LiteUnsupported(f"{text} is a Milvus Lite store, and Milvus Lite does not run on Windows "
                              "(it ships for Linux and macOS only): keep the store in a folder (a "
                              "FAISS store) or on a Milvus server instead",
                              folder=str(folder), server=f"http://localhost:{DEFAULT_PORT}")
    return Location("lite", path=path.absolute(), collection=LITE_COLLECTION, text=text)


def _server(text: str) -> Location:
    parts = urlsplit(text)
    if parts.username or parts.password or "@" in parts.netloc:
        raise InputError(
            "do not put credentials in the store address (they would show in shell history and "
            f"process lists): set {TOKEN_ENV}=user:password (or an API key) in the environment "
            "and give the address without them")
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"{text}: the port is not a number") from None
    host = parts.hostname
    if not host:
        raise InputError(f"{text}: no host name; use http(s)://HOST:PORT")
    scheme = "https" if parts.scheme.lower() == "https" else "http"
    port = port or (443 if scheme == "https" else DEFAULT_PORT)
    segs = [s for s in parts.path.split("/") if s]
    if len(segs) > 1:
        raise InputError(f"{text}: the path names the Milvus database (one segment, e.g. "
                         "http://host:19530/team_db); pick the collection with ?collection=NAME")
    db_name = segs[0] if segs else ""
    q = parse_qs(parts.query)
    for key in q:
        if key != "collection":
            if key.lower() in ("token", "password", "user", "api_key", "apikey"):
                raise InputError(f"do not put credentials in the store address: set {TOKEN_ENV} "
                                 "in the environment instead")
            raise InputError(f"{text}: unknown option {key!r} (only ?collection=NAME)")
    collection = q.get("collection", [DEFAULT_COLLECTION])[-1]
    _check_collection_name(collection, text)
    if db_name:
        _check_collection_name(db_name, text)
    host_part = f"[{host}]" if ":" in host else host
    return Location("server", uri=f"{scheme}://{host_part}:{port}", db_name=db_name,
                    collection=collection, text=text)
