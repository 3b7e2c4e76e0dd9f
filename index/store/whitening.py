"""A whitened store: its vectors are a model's vectors after BERT-whitening (core/evaluate/whitening.py),
fitted on the corpus when the store was created.

The store's fingerprint names the transform (``whitening``: the sha256 of its numbers) and the
whitened width (``dim``); the transform itself is kept beside the store's index (FAISS:
WHITENING_FILE in the folder) and checked against that sha256 whenever the store is opened. Texts
and the model's own vectors given to a whitened store (ingest, queries, update) go through the
transform; vectors that already carry the store's fingerprint (a migrate copy) are kept as they are.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from core.evaluate.whitening import Whitening, WhiteningFileError, load_whitening, save_whitening
from index.store import fingerprint as fpmod
from index.store.errors import StoreCorrupted

WHITENING_FILE = "whitening.safetensors"


def store_fingerprint(model_fp, w: Whitening) -> dict:
    """The fingerprint of ``model_fp``'s vectors after ``w``."""
    d = fpmod.as_dict(model_fp)
    if int(d["dim"]) != w.input_dim:
        raise ValueError(f"a whitening of {w.input_dim}-d vectors cannot follow a {d['dim']}-d model")
    return {**d, "dim": w.dims, "whitening": w.digest()}


def model_fingerprint(store_fp: dict, w: Whitening) -> dict:
    """The fingerprint the model's own vectors must have to be whitened into a store of ``store_fp``."""
    d = {k: v for k, v in store_fp.items() if k != "whitening"}
    d["dim"] = w.input_dim
    return d


def is_whitened(fp) -> bool:
    return bool(fp and fpmod.as_dict(fp).get("whitening"))


def write(folder: Path, w: Whitening) -> Path:
    path = Path(folder) / WHITENING_FILE
    save_whitening(path, w)
    return path


def load(folder: Path, fp: dict, dim: int) -> Whitening:
    """The transform of a store whose fingerprint is ``fp``, proved to be the one it names;
    StoreCorrupted (saying what to do) when the file is missing, damaged or another one."""
    path = Path(folder) / WHITENING_FILE
    try:
        w = load_whitening(path, expected_sha256=fp["whitening"])
    except WhiteningFileError as e:
        raise StoreCorrupted(
            f"{e}. The store's vectors were whitened with it and its queries must be too, so the "
            f"store cannot be used without it: put the store's own {WHITENING_FILE} back (from a "
            "backup), or build a new whitened store from its texts", path=path, remedy="restore",
            fix={"kind": "whiten_again"}) from None
    if w.dims != dim:
        raise StoreCorrupted(f"the whitening file {path} gives {w.dims}-d vectors but the store holds "
                             f"{dim}-d ones; restore the store's own {WHITENING_FILE} from a backup",
                             path=path, remedy="restore")
    return w


class WhitenedModel:
    """A backend seen through a store's whitening: embed() gives the store's vectors (what
    re-embedding checks compare with the stored ones)."""

    def __init__(self, backend, w: Whitening):
        self.backend, self.whitening = backend, w
        self.model_name = backend.model_name

    def embed(self, texts, pooling="mean", **kw) -> np.ndarray:
        return self.whitening.apply(self.backend.embed(texts, pooling=pooling, **kw))


def describe_whitening(w: Whitening | None, fp: dict, folder=None) -> dict | None:
    """What `info` says of a store's whitening (None: not whitened)."""
    if w is None:
        return None
    out = {"dims": w.dims, "input_dim": w.input_dim, "sha256": fp.get("whitening")}
    if folder is not None:
        out["file"] = str(Path(folder) / WHITENING_FILE)
    return out
