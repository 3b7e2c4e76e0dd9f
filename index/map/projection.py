"""2-D projections of sentence vectors for the corpus map: UMAP (umap-learn, installed with
Encoderscope: the default, as it keeps each sentence's neighbours around it) and PCA (NumPy:
exact and fast, the fallback where umap-learn is missing, and honest about global variance).

PCA is computed from the vectors themselves: centre them, take the two eigenvectors of the
covariance matrix with the largest eigenvalues. Eigenvectors have no sign of their own (v and
-v are both right, and LAPACK may return either), so each axis is turned to point the way its
largest-magnitude loading is positive (the rule scikit-learn's ``svd_flip`` uses): the same
vectors give the same picture on every machine.
"""
from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass

import numpy as np

from core.errors import EncoderscopeError, InputError

METHODS = ("pca", "umap")
UMAP_INSTALL = "pip install 'encoderscope[umap]'"     # the extra in pyproject.toml (also a default dependency)
METHOD_ENV = "ENCODERSCOPE_MAP_METHOD"   # pins the default method (the test suite pins pca: no numba compile)
UMAP_MIN_POINTS = 4         # fewer points than this give UMAP no neighbourhood to learn from
_COV_CHUNK = 8192           # rows added to the covariance at a time (float64, bounded memory)


class MissingExtra(EncoderscopeError):
    """An optional package is needed for what was asked (UMAP: umap-learn)."""


@dataclass
class PcaProjection:
    mean: np.ndarray               # (D,) float64: the centre of the vectors
    components: np.ndarray         # (2, D) float64: unit axes, sign fixed (see module docstring)
    explained_variance: np.ndarray  # (2,) share of the total variance each axis carries (0..1)
    method: str = "pca"

    def project(self, vectors) -> np.ndarray:
        """(n, 2) float32 coordinates of vectors (n, D) on the two axes."""
        x = np.asarray(vectors, dtype=np.float64)
        if x.ndim == 1:
            x = x[None, :]
        return ((x - self.mean) @ self.components.T).astype(np.float32)


@dataclass
class UmapProjection:
    reducer: object                # the fitted umap.UMAP (its transform places new points)
    method: str = "umap"
    explained_variance: None = None

    def project(self, vectors) -> np.ndarray:
        x = np.asarray(vectors, dtype=np.float32)
        if x.ndim == 1:
            x = x[None, :]
        return np.asarray(self.reducer.transform(x), dtype=np.float32)


def covariance(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean (D,), covariance (D, D)) in float64, summed in chunks of rows."""
    n, d = x.shape
    mean = x.mean(axis=0, dtype=np.float64)
    cov = np.zeros((d, d), np.float64)
    for start in range(0, n, _COV_CHUNK):
        part = x[start:start + _COV_CHUNK].astype(np.float64) - mean
        cov += part.T @ part
    return mean, cov / max(n - 1, 1)


def fix_signs(components: np.ndarray) -> np.ndarray:
    """Each row turned so that its largest-magnitude entry is positive (first such on ties)."""
    biggest = components[np.arange(len(components)), np.abs(components).argmax(axis=1)]
    return components * np.where(biggest < 0, -1.0, 1.0)[:, None]


def fit_pca(vectors: np.ndarray) -> PcaProjection:
    """The two principal axes of vectors (n, D), n >= 1."""
    x = np.asarray(vectors, dtype=np.float32)
    mean, cov = covariance(x)
    values, vecs = np.linalg.eigh(cov)                   # ascending eigenvalues
    order = np.argsort(values)[::-1][:2]
    components = np.zeros((2, x.shape[1]), np.float64)  # a 1-d input keeps a zero second axis
    components[:len(order)] = vecs[:, order].T
    total = float(np.trace(cov))
    explained = np.zeros(2)
    if total > 0:
        explained[:len(order)] = np.clip(values[order], 0.0, None) / total
    return PcaProjection(mean, fix_signs(components), explained)


def import_umap():
    try:
        import umap
    except ImportError:
        raise MissingExtra("the UMAP projection needs the optional package umap-learn: install "
                           f"it with {UMAP_INSTALL} (or pip install umap-learn), or project with PCA",
                           fix={"kind": "method", "method": "pca"}) from None
    return umap


def fit_umap(vectors: np.ndarray, seed: int = 0, progress=None, cancel=None) -> UmapProjection:
    """UMAP (cosine metric, 15 neighbours or fewer on a small corpus) with a fixed seed;
    progress(epoch, epochs) as its layout is optimised, and a set `cancel` Event ends it at the
    next epoch with Cancelled."""
    umap = import_umap()
    n = len(vectors)
    if n < UMAP_MIN_POINTS:
        raise InputError(f"UMAP needs at least {UMAP_MIN_POINTS} sentences (the corpus has {n}); "
                         "project with PCA", fix={"kind": "method", "method": "pca"})
    reducer = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), metric="cosine",
                        random_state=seed, n_jobs=1, init="spectral" if n > 10 else "random")
    from index.map.umap_epochs import epoch_hook
    with epoch_hook(umap, progress, cancel):
        reducer.fit(np.asarray(vectors, dtype=np.float32))
    return UmapProjection(reducer)


def umap_available() -> bool:
    return importlib.util.find_spec("umap") is not None


def default_method() -> tuple[str, str]:
    """(method, note): UMAP where umap-learn is installed, else PCA with a note that says why;
    $ENCODERSCOPE_MAP_METHOD chooses another default."""
    pinned = os.environ.get(METHOD_ENV, "").strip().lower()
    if pinned:
        if pinned not in METHODS:
            raise InputError(f"{METHOD_ENV}={pinned!r}: use one of {', '.join(METHODS)}")
        return pinned, ""
    if umap_available():
        return "umap", ""
    return "pca", ("umap-learn is not installed, so the map is PCA (its two axes keep little of the "
                   f"neighbourhoods): {UMAP_INSTALL} for the neighbour-preserving default")


def fit_projection(vectors: np.ndarray, method: str = "pca", seed: int = 0, progress=None, cancel=None):
    """A fitted PcaProjection or UmapProjection; its .project(vectors) gives (n, 2). UMAP
    reports progress(epoch, epochs) and stops at a set `cancel` (see fit_umap)."""
    if method == "pca":
        return fit_pca(vectors)
    if method == "umap":
        return fit_umap(vectors, seed, progress, cancel)
    raise InputError(f"unknown projection {method!r}: use one of {', '.join(METHODS)}")
