"""What a vector means: the model's weights (by hash), the pooling, the width, normalisation.

Stores keep a fingerprint with their vectors and refuse vectors or queries of another model.
No torch here: reading a store's fingerprint must not load a deep-learning library.
"""
from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path

from core.errors import ModelUnavailable


@dataclass(frozen=True)
class Fingerprint:
    """What a vector means: which weights, pooled how, how long, normalised or not."""
    model: str
    weights_sha256: str
    pooling: str
    dim: int
    normalized: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Fingerprint":
        return cls(model=d["model"], weights_sha256=d["weights_sha256"], pooling=d["pooling"],
                   dim=int(d["dim"]), normalized=bool(d.get("normalized", True)))

    def compatible(self, other: "Fingerprint") -> bool:
        # The name is for people; the same weights under another name are the same model.
        return (self.weights_sha256, self.pooling, self.dim, self.normalized) == \
               (other.weights_sha256, other.pooling, other.dim, other.normalized)

    def describe(self) -> str:
        return f"{self.model} ({self.pooling} pooling, {self.dim}-d, weights {self.weights_sha256[:12]})"


_hash_cache: dict = {}


def weights_hash(folder: Path) -> str:
    """sha256 of the weight file: the same folder gives the same identity on either backend."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = folder / name
        if path.is_file():
            st = path.stat()
            key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
            if key not in _hash_cache:
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 22), b""):
                        h.update(chunk)
                _hash_cache[key] = h.hexdigest()
            return _hash_cache[key]
    raise ModelUnavailable(f"{folder} holds no weights to fingerprint")
