"""BERT-whitening (Su et al., 2021, "Whitening Sentence Representations for Better Semantics
and Faster Retrieval"): move a corpus's sentence vectors to mean 0 and identity covariance.

From the corpus's vectors X (n, D): the mean mu, the covariance C = (X - mu)^T (X - mu) / n and
its SVD C = U diag(s) U^T give W = U diag(1/sqrt(s)); a vector x becomes (x - mu) W[:, :k] (the
first k directions carry the most variance, so keeping k < D also shrinks the vectors), then it
is L2-normalised for cosine search. The transform is kept as safetensors (mean, matrix) and
named by the sha256 of its numbers, so a store can prove on open that the file is the one its
vectors were made with.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from core.errors import EncoderscopeError, InputError

FORMAT = "encoderscope-whitening/1"
# A direction whose variance is below this share of the largest one is noise: whitening would
# blow it up by 1/sqrt(s).
MIN_VARIANCE_SHARE = 1e-10


class WhiteningFileError(EncoderscopeError):
    """A whitening file that cannot be read, or whose numbers are not the ones expected."""


@dataclass(frozen=True)
class Whitening:
    """x -> unit((x - mean) @ matrix): the fitted transform."""
    mean: np.ndarray      # (D,) float64: the corpus's mean vector
    matrix: np.ndarray    # (D, k) float64: U diag(1/sqrt(s)), first k columns

    @property
    def input_dim(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def dims(self) -> int:
        return int(self.matrix.shape[1])

    def whiten(self, vectors) -> np.ndarray:
        """(n, k) float64: centred and whitened, not normalised (identity covariance on the
        corpus it was fitted on)."""
        x = np.asarray(vectors, np.float64)
        if x.ndim == 1:
            x = x[None, :]
        if x.shape[1] != self.input_dim:
            raise InputError(f"whitening expects {self.input_dim}-d vectors, not {x.shape[1]}-d")
        return (x - self.mean) @ self.matrix

    def apply(self, vectors) -> np.ndarray:
        """(n, k) float32 unit vectors: whitened, then L2-normalised (what a store keeps)."""
        w = self.whiten(vectors)
        norms = np.linalg.norm(w, axis=1, keepdims=True)
        return np.ascontiguousarray(w / np.where(norms == 0, 1.0, norms), dtype=np.float32)

    def digest(self) -> str:
        """sha256 of the numbers (format, shapes, float64 bytes): the transform's identity."""
        h = hashlib.sha256(FORMAT.encode())
        for a in (self.mean, self.matrix):
            a = np.ascontiguousarray(a, dtype="<f8")
            h.update(repr(a.shape).encode())
            h.update(a.tobytes())
        return h.hexdigest()


def fit_whitening(vectors, dims: int | None = None) -> Whitening:
    """The whitening of ``vectors`` (n, D), keeping the first ``dims`` directions (by default
    every direction the vectors vary in: D, or fewer when the corpus spans fewer). An
    InputError when ``dims`` asks for more directions than the corpus spans."""
    x = np.asarray(vectors, np.float64)
    if x.ndim != 2 or len(x) < 2:
        raise InputError("whitening needs at least two sentence vectors")
    n, d = x.shape
    if dims is not None and not 1 <= int(dims) <= d:
        raise InputError(f"the whitening dimensions must be between 1 and {d} (the model's width), not {dims}")
    if not np.all(np.isfinite(x)):
        raise InputError("whitening was given vectors with NaN or infinite values")
    mean = x.mean(axis=0)
    centred = x - mean
    cov = centred.T @ centred / n
    u, s, _ = np.linalg.svd(cov)
    usable = int(np.sum(s > MIN_VARIANCE_SHARE * max(s[0], np.finfo(float).tiny)))
    k = usable if dims is None else int(dims)
    if usable == 0 or k > usable:
        raise InputError(
            f"whitening {k or d} dimensions needs as many directions of variance, but these {n} "
            f"sentence vectors span only {usable} (never more than one fewer than the sentences): "
            f"fit it on more sentences, or keep fewer dimensions (at most {usable})")
    return Whitening(mean, u[:, :k] / np.sqrt(s[:k]))


def save_whitening(path, w: Whitening) -> None:
    """Write ``w`` as safetensors (mean, matrix; its digest in the metadata)."""
    from safetensors.numpy import save as save_bytes

    from core.files.atomic import atomic_write
    data = save_bytes({"mean": np.ascontiguousarray(w.mean, "<f8"),
                       "matrix": np.ascontiguousarray(w.matrix, "<f8")},
                      metadata={"format": FORMAT, "sha256": w.digest()})
    atomic_write(Path(path), [data])


def load_whitening(path, expected_sha256: str | None = None) -> Whitening:
    """The transform in ``path``; WhiteningFileError when it cannot be read, is malformed, or its
    numbers' digest is not ``expected_sha256``."""
    from safetensors import SafetensorError
    from safetensors.numpy import load
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise WhiteningFileError(f"the whitening file {path} is missing") from None
    except OSError as e:
        raise WhiteningFileError(f"the whitening file {path} cannot be read ({e.strerror or e})") from None
    try:
        tensors = load(raw)
    except (SafetensorError, ValueError, OverflowError) as e:
        raise WhiteningFileError(f"the whitening file {path} is damaged (not readable safetensors: {e})") from None
    mean, matrix = tensors.get("mean"), tensors.get("matrix")
    if (mean is None or matrix is None or mean.ndim != 1 or matrix.ndim != 2
            or matrix.shape[0] != mean.shape[0] or not matrix.shape[1]
            or not (np.all(np.isfinite(mean)) and np.all(np.isfinite(matrix)))):
        raise WhiteningFileError(f"the whitening file {path} is damaged (its mean and matrix are "
                                 "missing, misshapen or not finite)")
    w = Whitening(mean.astype(np.float64), matrix.astype(np.float64))
    if expected_sha256 is not None and w.digest() != expected_sha256:
        raise WhiteningFileError(f"the whitening file {path} is not the transform the vectors were "
                                 f"made with (its numbers hash to {w.digest()[:12]}, expected "
                                 f"{expected_sha256[:12]})")
    return w
