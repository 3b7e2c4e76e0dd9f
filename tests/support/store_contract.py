"""The store contract's shared pieces (tests/index/store/test_contract*.py): the stores it runs on,
where each lives, making a store of synthetic vectors, and the numpy reference ranking. Its
fixtures (`store_kind`, `opened`) are in tests/conftest.py."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from index.opening import open_store
from tests.support.store_backends import Fingerprint, clustered

D = 32
FP = Fingerprint("fake", "f" * 64, "mean", D, True)
OTHER = Fingerprint("other-model", "0" * 64, "mean", D, True)


def milvus_available():
    try:
        import milvus_lite  # noqa: F401
        import pymilvus  # noqa: F401
        return True
    except ImportError:
        return False


needs_milvus = pytest.mark.skipif(not milvus_available(), reason="needs the [milvus] extra (pymilvus, milvus-lite)")
KINDS = ["faiss", pytest.param("milvus", marks=needs_milvus)]
SERVER = {}     # "uri" of the session's Milvus server, once a "server" test asked for it


def loc(tmp_path, kind, name="s"):
    if kind == "server":     # a collection of this test's own on the shared server
        tag = hashlib.blake2b(str(tmp_path).encode(), digest_size=6).hexdigest()
        return f"{SERVER['uri']}?collection=t{tag}_{name}"
    return str(tmp_path / name) if kind == "faiss" else f"milvus-lite:{tmp_path / name}"


def open_(opened, location, **kw):
    s = open_store(location, **kw)
    opened.append(s)
    return s


def make(opened, tmp_path, kind, n=0, fp=FP, name="s", seed=0, **kw):
    if kind == "server":
        kw.setdefault("index", "flat")     # the contract's search is exact
    s = open_(opened, loc(tmp_path, kind, name), create=True, fingerprint=fp, **kw)
    x = clustered(n, D, seed=seed) if n else np.zeros((0, D), np.float32)
    if n:
        s.add([f"sentence {i}" for i in range(n)], x)
    return s, x


def brute_force(x, q, k):
    xs = x / np.linalg.norm(x, axis=1, keepdims=True)
    qs = q / np.linalg.norm(q, axis=1, keepdims=True)
    s = qs @ xs.T
    order = np.argsort(-s, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(s, order, axis=1)


def untied(scores, atol=1e-5):
    """Ranks whose score is clearly apart from the neighbours' (their position is defined)."""
    s = np.asarray(scores)
    ok = np.ones(len(s), bool)
    gaps = np.abs(np.diff(s)) < atol
    ok[:-1] &= ~gaps
    ok[1:] &= ~gaps
    return ok
