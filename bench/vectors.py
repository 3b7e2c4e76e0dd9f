"""The clustered unit vectors both search benchmarks use (bench/search.py for FAISS,
bench/milvus_search.py for Milvus Lite), so they measure the same data; kept apart so that
neither benchmark imports the other's module at load time."""
from __future__ import annotations

import numpy as np


def clustered(n, d, n_clusters=None, seed=0, noise=1.0, n_topics=50, chunk=100_000):
    """Same generator as tests/test_store_support.clustered, chunked for 1M x 768."""
    rng = np.random.default_rng(seed)
    n_clusters = n_clusters or max(200, n // 500)
    topics = rng.normal(size=(n_topics, d)).astype(np.float32)
    centres = topics[rng.integers(0, n_topics, n_clusters)] + rng.normal(size=(n_clusters, d)).astype(np.float32)
    sizes = rng.zipf(1.5, n_clusters).astype(float).clip(max=max(1000, n // 50))
    labels = rng.choice(n_clusters, n, p=sizes / sizes.sum())
    out = np.empty((n, d), np.float32)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        x = centres[labels[s:e]] + noise * rng.standard_normal(size=(e - s, d), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        out[s:e] = x
    return out
