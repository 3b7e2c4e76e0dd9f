"""The manifest: a small JSON file describing the current snapshot of a store.

It names the FAISS index file of the snapshot and its checksum, the model fingerprint, the
dimension, metric, index kind and parameters, which state of the sentence database the snapshot
covers (store id, generation, count, highest id) and a checksum of itself (manifest_sha256). It
is written last, atomically, so a snapshot exists exactly when the manifest points to it.

Format 2 requires the self-checksum and the store id (the database's, so another store's
manifest and index are recognised as foreign). Format 3 (this code) is format 2 for a store whose
vectors live in the vector log (index/faiss/vector_log.py): older Encoderscope refuses it instead
of reading rows without their vectors. Format 1 and 2 manifests (older Encoderscope) are still
read, a format 1 checksum optional, and are replaced by format 3 on a writer's open.
"""
from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from index.faiss.faiss_index import KINDS
from index.store.durability import atomic_write, read_regular
from index.store.errors import StoreCorrupted

FORMAT = "encoderscope-store"
FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)       # 1: before store ids and required checksums; 2: before the vector log
MANIFEST_NAME = "manifest.json"
CHECKSUM_KEY = "manifest_sha256"    # sha256 of the manifest's other fields (canonical JSON)
MAX_MANIFEST_BYTES = 1 << 20        # a real manifest is about 1 KiB
INDEX_KINDS = KINDS                 # what a manifest may name: the FAISS index kinds
_HEX64 = re.compile(r"[0-9a-f]{64}")
_INDEX_FILE = re.compile(r"index-\d{10}\.faiss")


class UnsupportedFormat(StoreCorrupted):
    """A store written by another Encoderscope format version: not damage, never repaired."""


def _self_checksum(d: dict) -> str:
    body = {k: v for k, v in d.items() if k != CHECKSUM_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


@dataclass
class Manifest:
    fingerprint: dict                 # the model the vectors come from (index.store.fingerprint)
    dim: int                          # vector dimension
    index_kind: str                   # flat | hnsw | sq8
    index_params: dict = field(default_factory=dict)   # FAISS settings of that kind
    index_file: str | None = None     # index-<generation>.faiss in the store folder (None: a flat
                                      # index, built from the vector log on open; format 3)
    index_bytes: int = 0              # its size
    index_sha256: str | None = None   # its checksum
    count: int = 0                    # live vectors in the snapshot
    max_id: int = 0                   # highest sentence id the snapshot covers
    generation: int = 0               # database generation the snapshot covers
    store_id: str | None = None       # the database's store id (None: a format 1 manifest)
    metric: str = "cosine"
    encoders: list | None = None      # backend + precision of each encoder that embedded (None: not recorded)
    written: float = 0.0              # time.time() of the save
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        d = asdict(self)
        d[CHECKSUM_KEY] = _self_checksum(d)
        return (json.dumps(d, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, path: Path) -> Manifest:
        """Parse and validate; any damage raises StoreCorrupted (remedy "repair"), a manifest of
        another format version UnsupportedFormat."""
        def bad(why: str) -> StoreCorrupted:
            return StoreCorrupted(f"the manifest {path} is {why}; the sentences are safe in the "
                                  "database, and repairing the store rebuilds the manifest and "
                                  "index from them", path=path, remedy="repair")
        try:
            d = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
            raise bad(f"damaged or truncated ({e}): it is not valid JSON") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise bad("not an Encoderscope store manifest")
        version = d.get("format_version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise UnsupportedFormat(
                f"the store at {path.parent} has format version {version!r}; this Encoderscope "
                f"reads versions {', '.join(map(str, READABLE_VERSIONS))}", path=path)
        stored = d.pop(CHECKSUM_KEY, None)
        if stored is None and version >= 2:
            raise bad("damaged: its checksum is missing")
        if stored is not None and stored != _self_checksum(d):
            raise bad("damaged: its checksum does not match its contents")
        problem = _invalid_field(d, version)
        if problem:
            raise bad(f"incomplete or damaged ({problem})")
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


def _is_int(v, low=0) -> bool:
    return type(v) is int and v >= low


def _invalid_field(d: dict, version: int) -> str | None:
    """What is wrong with a parsed manifest's fields, or None."""
    checks = {
        "fingerprint": lambda v: isinstance(v, dict) and "dim" in v,
        "dim": lambda v: _is_int(v, 1),
        "index_kind": lambda v: v in INDEX_KINDS,
        "index_params": lambda v: isinstance(v, dict),
        "index_file": lambda v: isinstance(v, str) and _INDEX_FILE.fullmatch(v) is not None,
        "index_bytes": _is_int,
        "index_sha256": lambda v: isinstance(v, str) and _HEX64.fullmatch(v) is not None,
        "count": _is_int,
        "max_id": _is_int,
        "generation": _is_int,
        "metric": lambda v: v == "cosine",
    }
    if version >= 2:
        checks["store_id"] = lambda v: isinstance(v, str) and 8 <= len(v) <= 64
    if version >= 3 and d.get("index_kind") == "flat" and d.get("index_file") is None:
        # a flat index is the vector log itself: built from the database on open, no file
        checks["index_file"] = lambda v: v is None
        checks["index_sha256"] = lambda v: v is None
        checks["index_bytes"] = lambda v: v == 0
    for key, ok in checks.items():
        if key not in d:
            return f"no {key}"
        if not ok(d[key]):
            return f"invalid {key}: {str(d[key])[:40]!r}"
    if "written" in d and not isinstance(d["written"], (int, float)):
        return "invalid written"
    return None


def read_manifest(folder: Path) -> Manifest | None:
    """The manifest of the store at `folder`, None when there is none yet. Only a regular file
    is read (a FIFO or a folder in its place raises StoreCorrupted, never blocks)."""
    path = Path(folder) / MANIFEST_NAME
    raw = read_regular(path, MAX_MANIFEST_BYTES, "manifest")
    if raw is None:
        return None
    return Manifest.from_json(raw, path)


def write_manifest(folder: Path, manifest: Manifest) -> None:
    manifest.written = time.time()
    atomic_write(Path(folder) / MANIFEST_NAME, manifest.to_json())


def sha256_file(path: Path, chunk: int = 1 << 22) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()
