"""Deterministic fake embeddings (numpy only, no torch: subprocess drivers start fast)."""
from __future__ import annotations

import hashlib

import numpy as np


def text_vector(text: str, dim: int, salt: str = "") -> np.ndarray:
    """A unit vector determined by the text: the fake model's embedding."""
    seed = int.from_bytes(hashlib.blake2b((salt + text).encode(), digest_size=8).digest(), "little")
    v = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return v / np.linalg.norm(v)
