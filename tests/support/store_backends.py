"""Shared helpers for the store tests (no tests here): a fake embedder and clustered vectors."""
from __future__ import annotations

import numpy as np

from core.encoder.backends import EmbedStats  # noqa: F401  (re-exported for the tests)
from core.encoder.fingerprint import Fingerprint  # noqa: F401  (re-exported for the tests)
from core.errors import Cancelled, InputError
from tests.support.fake_vectors import text_vector  # noqa: F401  (re-exported for the tests)


def clustered(n, d, n_clusters=200, seed=0, noise=1.0, n_topics=20):
    """Unit vectors with realistic structure: topics -> clusters of Zipf-distributed sizes ->
    points (top-1 cosine ~0.8, random pairs ~0.07, like sentence embeddings)."""
    rng = np.random.default_rng(seed)
    topics = rng.normal(size=(n_topics, d)).astype(np.float32)
    centres = topics[rng.integers(0, n_topics, n_clusters)] + rng.normal(size=(n_clusters, d)).astype(np.float32)
    sizes = rng.zipf(1.5, n_clusters).astype(float).clip(max=1000)
    labels = rng.choice(n_clusters, n, p=sizes / sizes.sum())
    x = centres[labels] + noise * rng.normal(size=(n, d)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32)


class FakeBackend:
    """Deterministic hash embeddings with the Backend API the store uses."""

    def __init__(self, name="fake", dim=32, weights="f" * 64, max_words=None):
        self.model_name = name
        self.dim = dim
        self.weights = weights
        self.max_words = max_words
        self.embedded = 0        # how many texts were embedded
        self.cancel_after = None  # raise Cancelled once this many texts were embedded

    def fingerprint(self, pooling="mean"):
        return Fingerprint(self.model_name, self.weights, pooling, self.dim, True)

    def embed(self, texts, pooling="mean", batch_size=32, progress=None, cancel=None, stats=None):
        texts = list(texts)
        for t in texts:
            if not t.strip():
                raise InputError("empty text")
        if self.cancel_after is not None and self.embedded + len(texts) > self.cancel_after:
            raise Cancelled("cancelled")
        if cancel is not None and (cancel.is_set() if hasattr(cancel, "is_set") else cancel()):
            raise Cancelled("cancelled")
        if stats is not None and self.max_words:
            idx = [i for i, t in enumerate(texts) if len(t.split()) > self.max_words]
            stats.truncated += len(idx)
            stats.truncated_indices.extend(idx)
        self.embedded += len(texts)
        salt = self.weights + pooling
        return np.stack([text_vector(t, self.dim, salt) for t in texts]) if texts else \
            np.zeros((0, self.dim), np.float32)
