"""The FAISS side of the store: index kinds, search settings, snapshot files.

Everything FAISS-specific lives here; store.py only calls this small class.

Kinds (all cosine = inner product on L2-normalised vectors, wrapped in IndexIDMap2 so FAISS ids
are the SQLite sentence ids):
  flat  exact search (IndexFlatIP), the default
  hnsw  approximate graph search (IndexHNSWFlat); a removal marks the id deleted (searches skip
        it through an IDSelector), updates and too many deleted ids rebuild the graph
  sq8   exact scan over 8-bit scalar-quantised codes (IndexScalarQuantizer QT_8bit), 4x smaller
"""
from __future__ import annotations

import errno
import os

import faiss
import numpy as np

KINDS = ("flat", "hnsw", "sq8")
REQUESTS = KINDS + ("auto",)
# "auto" stays exact until the store holds this many vectors, then switches to HNSW.
AUTO_HNSW_THRESHOLD = 200_000
DEFAULT_PARAMS = {
    "flat": {},
    # ef_search "auto": 256 below 500k vectors, 1024 from there on. Measured recall@10 on
    # clustered 768-d vectors: 100k 0.965 at 256 (128: 0.91); 1M 0.965 at 1024 (256: 0.86-0.88).
    "hnsw": {"M": 32, "ef_construction": 80, "ef_search": "auto"},
    "sq8": {"qtype": "QT_8bit"},
}
# faiss-cpu 1.15 ships distance_compute_blas_threshold = 128000: below that many queries a flat
# search scans with its own SIMD loop instead of one BLAS matrix product. Measured on 100k x 768
# (docs/benchmarks/search.md): batches of 16 ran 13-20x faster through BLAS (172 vs 8-13 q/s),
# batches of 256 the same either way, a single query 2.5x slower through BLAS (gemv). So
# batches of >= BLAS_THRESHOLD queries use BLAS, single queries the SIMD loop.
BLAS_THRESHOLD = 4
# Threads for a single query: one. Waking an OpenMP team costs more than it gains, badly so on
# a busy machine: flat 5k x 768 1.3 ms on one thread vs 17 ms on two; flat 1M x 768 330 ms vs
# 864 ms; HNSW 1M 3.3 ms vs 4.3 ms (docs/benchmarks/search.md). Batches use all threads.
SINGLE_QUERY_THREADS = 1


_INNER = {"flat": "IndexFlatIP", "hnsw": "IndexHNSWFlat", "sq8": "IndexScalarQuantizer"}
# FAISS turns a failed fwrite into a RuntimeError with the C library's text in it.
_ERRNO_TEXTS = [(c, os.strerror(c)) for c in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                               errno.EACCES, errno.EIO)]


def configure_faiss(blas_threshold: int | None = BLAS_THRESHOLD) -> None:
    if blas_threshold is not None:
        faiss.cvar.distance_compute_blas_threshold = int(blas_threshold)


configure_faiss()


def resolve_kind(request: str, count: int, threshold: int = AUTO_HNSW_THRESHOLD) -> str:
    if request == "auto":
        return "hnsw" if count >= threshold else "flat"
    if request not in KINDS:
        raise ValueError(f"unknown index kind {request!r}; choose one of {', '.join(REQUESTS)}")
    return request


class FaissIndex:
    """An IndexIDMap2 over one of KINDS, plus what is needed to rebuild and save it."""

    def __init__(self, kind: str, dim: int, params: dict | None = None, index=None):
        if kind not in KINDS:
            raise ValueError(f"unknown index kind {kind!r}")
        self.kind = kind
        self.dim = int(dim)
        self.params = {**DEFAULT_PARAMS[kind], **(params or {})}
        self.index = index if index is not None else self._new()
        self.deleted: set[int] = set()   # HNSW only: ids removed but still in the graph
        self._search_params = None
        self._apply_search_params()

    # -- construction -----------------------------------------------------------------------
    def _new(self):
        d = self.dim
        if self.kind == "flat":
            inner = faiss.IndexFlatIP(d)
        elif self.kind == "hnsw":
            inner = faiss.IndexHNSWFlat(d, int(self.params["M"]), faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = int(self.params["ef_construction"])
        else:
            inner = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        return faiss.IndexIDMap2(inner)

    def ef_search(self) -> int:
        ef = self.params.get("ef_search", "auto")
        if ef == "auto":
            return 256 if self.index.ntotal < 500_000 else 1024
        return int(ef)

    def _apply_search_params(self):
        if self.kind == "hnsw":
            inner = faiss.downcast_index(self.index.index)
            ef = self.ef_search()
            if inner.hnsw.efSearch != ef:
                inner.hnsw.efSearch = ef
                self._search_params = None

    @property
    def supports_update(self) -> bool:
        """Can a vector be replaced in place (same id)? HNSW graphs can't drop a node."""
        return self.kind != "hnsw"

    @property
    def is_trained(self) -> bool:
        return bool(self.index.is_trained)

    @property
    def ntotal(self) -> int:
        """Live vectors (deleted HNSW nodes not counted)."""
        return int(self.index.ntotal) - len(self.deleted)

    @property
    def stored(self) -> int:
        return int(self.index.ntotal)

    def all_ids(self) -> np.ndarray:
        return faiss.vector_to_array(self.index.id_map).astype(np.int64)

    def ids(self) -> np.ndarray:
        ids = self.all_ids()
        if self.deleted:
            ids = ids[~np.isin(ids, np.fromiter(self.deleted, np.int64, len(self.deleted)))]
        return ids

    def train(self, vectors: np.ndarray) -> None:
        if not self.index.is_trained and len(vectors):
            self.index.train(vectors)
            self.params["trained_on"] = int(len(vectors))

    # -- changes ----------------------------------------------------------------------------
    def add(self, ids, vectors) -> None:
        if len(ids) == 0:
            return
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        if not self.index.is_trained:
            self.train(vectors)
        self.index.add_with_ids(vectors, np.ascontiguousarray(ids, dtype=np.int64))

    def remove(self, ids) -> int:
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if self.kind != "hnsw":
            return int(self.index.remove_ids(ids))
        present = set(ids[np.isin(ids, self.all_ids())].tolist()) - self.deleted
        self.deleted |= present
        self._search_params = None
        return len(present)

    @classmethod
    def build(cls, kind, dim, params, ids, vectors) -> "FaissIndex":
        params = {k: v for k, v in (params or {}).items() if k != "trained_on"}
        fi = cls(kind, dim, params)
        if len(ids):
            fi.train(vectors)
            fi.add(ids, vectors)
        return fi

    # -- search -----------------------------------------------------------------------------
    def search(self, queries: np.ndarray, k: int):
        """queries: (nq, dim) float32, normalised. Returns (scores, ids), -1 ids for no hit."""
        nq = len(queries)
        k = max(1, min(int(k), max(self.ntotal, 1)))
        if self.ntotal == 0:
            return np.zeros((nq, 0), np.float32), np.zeros((nq, 0), np.int64)
        self._apply_search_params()
        params = self._params()
        if nq == 1 and SINGLE_QUERY_THREADS:
            # nthreads-var is per OpenMP thread: this changes nothing for other Python threads.
            old = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(SINGLE_QUERY_THREADS)
            try:
                return self.index.search(queries, k, params=params)
            finally:
                faiss.omp_set_num_threads(old)
        return self.index.search(queries, k, params=params)

    def _params(self):
        if not self.deleted:
            return None
        if self._search_params is None:
            dead = np.fromiter(sorted(self.deleted), np.int64, len(self.deleted))
            batch = faiss.IDSelectorBatch(dead)
            sel = faiss.IDSelectorNot(batch)
            p = faiss.SearchParametersHNSW()
            p.efSearch = self.ef_search()
            p.sel = sel
            p._keep = (batch, sel, dead)   # the C++ objects reference these
            self._search_params = p
        return self._search_params

    # -- files ------------------------------------------------------------------------------
    def reconstruct(self, ids) -> np.ndarray:
        """The vectors the index holds for `ids` (decoded: approximate for sq8)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        if len(ids) == 0:
            return np.zeros((0, self.dim), np.float32)
        return self.index.reconstruct_batch(ids)

    def write(self, path) -> None:
        """Write the index file; a failed write (disk full...) raises OSError with its errno
        (FAISS reports it as a RuntimeError carrying the C library's message)."""
        try:
            faiss.write_index(self.index, os.fspath(path))
        except RuntimeError as e:
            msg = str(e)
            code = next((c for c, text in _ERRNO_TEXTS if text in msg), errno.EIO)
            raise OSError(code, os.strerror(code), os.fspath(path)) from None

    @classmethod
    def read(cls, path, kind, dim, params) -> "FaissIndex":
        """Read an index file; ValueError when it is not the IndexIDMap2 over `kind` of
        dimension `dim` that the manifest describes."""
        index = faiss.read_index(os.fspath(path))
        if not isinstance(index, faiss.IndexIDMap2):
            index = faiss.downcast_index(index)
        if not isinstance(index, faiss.IndexIDMap2):
            raise ValueError(f"expected an IndexIDMap2, found {type(index).__name__}")
        if index.d != int(dim):
            raise ValueError(f"index dimension {index.d} differs from the manifest's {dim}")
        inner = type(faiss.downcast_index(index.index)).__name__
        if inner != _INNER[kind]:
            raise ValueError(f"the file holds {inner}, the manifest says {kind} ({_INNER[kind]})")
        return cls(kind, dim, params, index=index)

    def describe(self) -> str:
        inner = type(faiss.downcast_index(self.index.index)).__name__
        return f"{self.kind} (IndexIDMap2 over {inner}, inner product on normalised vectors)"
