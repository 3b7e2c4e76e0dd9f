"""The manifest: a small JSON file describing the current snapshot of a store.

It names the FAISS index file of the snapshot and its checksum, the model fingerprint, the
dimension, metric, index kind and parameters, which state of the sentence database the snapshot
covers (generation, count, highest id) and a checksum of itself (manifest_sha256). It is written
last, atomically, so a snapshot exists exactly when the manifest points to it.
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .durability import atomic_write
from .errors import StoreCorrupted

FORMAT = "encoderscope-store"
FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
CHECKSUM_KEY = "manifest_sha256"   # sha256 of the manifest's other fields (canonical JSON)


class UnsupportedFormat(StoreCorrupted):
    """A store written by another Encoderscope format version: not damage, never repaired."""


def _self_checksum(d: dict) -> str:
    body = {k: v for k, v in d.items() if k != CHECKSUM_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


@dataclass
class Manifest:
    fingerprint: dict
    dim: int
    index_kind: str
    index_params: dict = field(default_factory=dict)
    index_file: str | None = None
    index_bytes: int = 0
    index_sha256: str | None = None
    count: int = 0
    max_id: int = 0
    generation: int = 0
    metric: str = "cosine"
    written: float = 0.0
    format: str = FORMAT
    format_version: int = FORMAT_VERSION

    def to_json(self) -> bytes:
        d = asdict(self)
        d[CHECKSUM_KEY] = _self_checksum(d)
        return (json.dumps(d, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, raw: bytes, path: Path) -> "Manifest":
        hint = (f"; the sentences are safe in the database: `encoderscope info --repair --store "
                f"{path.parent}` rebuilds the manifest and index from them")
        try:
            d = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise StoreCorrupted(
                f"the manifest {path} is damaged or truncated ({e}); it is not valid JSON" + hint,
                path=path) from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise StoreCorrupted(f"{path} is not an Encoderscope store manifest" + hint, path=path)
        if d.get("format_version") != FORMAT_VERSION:
            raise UnsupportedFormat(
                f"the store at {path.parent} has format version {d.get('format_version')}, "
                f"this Encoderscope reads version {FORMAT_VERSION}", path=path)
        stored = d.pop(CHECKSUM_KEY, None)
        if stored is not None and stored != _self_checksum(d):
            raise StoreCorrupted(f"the manifest {path} is damaged: its checksum does not match "
                                 "its contents" + hint, path=path)
        known = set(cls.__dataclass_fields__)
        try:
            return cls(**{k: v for k, v in d.items() if k in known})
        except TypeError as e:
            raise StoreCorrupted(f"the manifest {path} is incomplete ({e})" + hint,
                                 path=path) from None


def read_manifest(folder: Path) -> Manifest | None:
    path = Path(folder) / MANIFEST_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
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
