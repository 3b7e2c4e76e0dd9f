"""What a vector means: the model's weights (by hash), its network (config and tokenizer files,
by hash), the pooling, the width, normalisation and the precision policy.

Stores keep a fingerprint with their vectors and refuse vectors or queries of another model.
No torch here: reading a store's fingerprint must not load a deep-learning library.
"""
from __future__ import annotations

import hashlib
import json
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
    # Config and tokenizer files (network_hash) and the precision rule (PRECISION_POLICY).
    # Empty in fingerprints written before they were recorded: such a store cannot tell, and
    # `info --check` re-embeds a sample of its texts instead.
    network_sha256: str = ""
    precision_policy: str = ""
    # The sha256 of a whitening transform (core/evaluate/whitening.py) applied after pooling: then dim is
    # the whitened width. Empty for the model's own vectors (and left out of the dict then).
    whitening: str = ""

    def to_dict(self) -> dict:
        d = asdict(self)
        if not self.whitening:
            del d["whitening"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Fingerprint:
        return cls(model=d["model"], weights_sha256=d["weights_sha256"], pooling=d["pooling"],
                   dim=int(d["dim"]), normalized=bool(d.get("normalized", True)),
                   network_sha256=str(d.get("network_sha256") or ""),
                   precision_policy=str(d.get("precision_policy") or ""),
                   whitening=str(d.get("whitening") or ""))

    def compatible(self, other: Fingerprint) -> bool:
        # The name is for people; the same weights under another name are the same model.
        # Whitened vectors and the model's own are never comparable: both or neither, the same.
        if (self.weights_sha256, self.pooling, self.dim, self.normalized, self.whitening) != \
                (other.weights_sha256, other.pooling, other.dim, other.normalized, other.whitening):
            return False
        return all(a == b or not a or not b for a, b in (
            (self.network_sha256, other.network_sha256),
            (self.precision_policy, other.precision_policy)))

    def describe(self) -> str:
        network = f", config+tokenizer {self.network_sha256[:12]}" if self.network_sha256 else ""
        whitened = f", whitened {self.whitening[:12]}" if self.whitening else ""
        return (f"{self.model} ({self.pooling} pooling, {self.dim}-d{whitened}, weights "
                f"{self.weights_sha256[:12]}{network})")


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


# Everything in a model folder besides the weights that changes what a text becomes: the
# network's config (ours or transformers') and the tokenizer's files.
NETWORK_FILES = ("config.json", "encoderscope.json", "tokenizer.json", "vocab.txt", "vocab.json",
                 "merges.txt", "spiece.model", "tokenizer.model", "sentencepiece.bpe.model",
                 "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
# Fields that name or date a config without changing the network.
_CONFIG_NOISE = ("_name_or_path", "transformers_version", "torch_dtype", "dtype")


def network_hash(folder: Path) -> str:
    """sha256 over the folder's config and tokenizer files (names and contents; configs by
    their fields, without names and library versions)."""
    h = hashlib.sha256(b"encoderscope-network/1")
    for name in NETWORK_FILES:
        path = Path(folder) / name
        if not path.is_file():
            continue
        data = path.read_bytes()
        if name in ("config.json", "encoderscope.json"):
            data = _config_bytes(name, data)
        h.update(f"|{name}|{len(data)}|".encode())
        h.update(data)
    return h.hexdigest()


def _config_bytes(name: str, data: bytes) -> bytes:
    try:
        cfg = json.loads(data)
    except ValueError:
        return data
    if not isinstance(cfg, dict):
        return data
    if name == "encoderscope.json":     # training notes beside the config change no vector
        cfg = {"config": cfg.get("config"), "mlm_head": cfg.get("mlm_head")}
    cfg = {k: v for k, v in cfg.items() if k not in _CONFIG_NOISE}
    return json.dumps(cfg, sort_keys=True).encode()
