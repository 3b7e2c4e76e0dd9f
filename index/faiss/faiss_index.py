"""The FAISS side of the store: index kinds, search settings, snapshot files.

Everything FAISS-specific lives here; store.py only calls this small class.

Kinds (all cosine = inner product on L2-normalised vectors, wrapped in IndexIDMap2 so FAISS ids
are the SQLite sentence ids):
  flat  exact search (IndexFlatIP), the default
  hnsw  approximate graph search (IndexHNSWFlat); a removal marks the id deleted (searches skip
        it through an IDSelector), updates and too many deleted ids rebuild the graph
  sq8   exact scan over 8-bit scalar-quantised codes (IndexScalarQuantizer QT_8bit), 4x smaller
  ivf   inverted lists (IVF, HNSW coarse quantiser) of compact codes (8-bit up to 384-d, 1-bit
        RaBitQ fast-scan above), the candidates re-ranked by their fp16 vectors (IndexRefine
        over an fp16 IndexScalarQuantizer; files written before hold exact ones,
        IndexRefineFlat): ~1-2 ms at 1M vectors, built in a minute or two; removals are marked
        like HNSW's, updates rebuild it
The scores a kind gives are its own (sq8 and fp16 ones approximate); the store checks every hit
against the vector its database holds and reports that exact cosine (index/faiss/snapshot.py).
Long builds (ivf, hnsw) add in chunks: build() reports progress between chunks and stops
between them when cancelled, leaving whatever index the caller held untouched.
"""
from __future__ import annotations

import errno
import math
import os

import faiss
import numpy as np

from core.errors import Cancelled

# Each constant's measurements: docs/benchmarks/search.md, "Why the FAISS constants have their values".
KINDS = ("flat", "hnsw", "sq8", "ivf")
REQUESTS = KINDS + ("auto",)
# "auto" is exact up to this many vectors (a query over 200k x 768 takes ~65 ms), ivf from here on.
AUTO_IVF_THRESHOLD = 200_000
AUTO_KIND = "ivf"
# Kinds that mark removed ids instead of deleting them; an update or too many marks rebuild the index.
MARKING_KINDS = ("hnsw", "ivf")
DEFAULT_PARAMS = {
    "flat": {},
    # ef_search "auto": 256 below 500k vectors, 1024 from there on (recall@10 ~0.965 at both sizes).
    "hnsw": {"M": 32, "ef_construction": 80, "ef_search": "auto"},
    "sq8": {"qtype": "QT_8bit"},
    # nlist "auto": IVF_LISTS_PER_SQRT * sqrt(n) lists (see nlist_for). nprobe "auto": the
    # value calibrated at build time (see calibrate_nprobe), else IVF_PROBE_FRACTION of the
    # lists. codes "auto": "sq8" up to IVF_SQ8_MAX_DIM, "rabitq" above (see IVF_CODES).
    # k_factor "auto": the scan keeps k * IVF_K_FACTOR[codes] candidates for the re-rank.
    "ivf": {"nlist": "auto", "nprobe": "auto", "k_factor": "auto", "codes": "auto"},
}
# The codes the ivf lists hold: the index_factory suffix and the IVF class it makes.
IVF_CODES = {"sq8": ("SQ8", "IndexIVFScalarQuantizer"),
             "rabitq": ("RaBitQfs", "IndexIVFRaBitQFastScan")}
# 8-bit codes up to this width (fast enough at 384-d, not at 768-d), 1-bit RaBitQ above.
IVF_SQ8_MAX_DIM = 384
# Candidates kept per hit for the re-rank: 8-bit codes rank well, 1-bit ones coarsely.
IVF_K_FACTOR = {"sq8": 4, "rabitq": 96}
# The re-rank reads fp16 rows: half the memory of exact ones, the same recall; scores move <= 2^-11.
IVF_REFINE_QTYPE = faiss.ScalarQuantizer.QT_fp16
IVF_FP16_SCORE_ERROR = 2.0 ** -11
# ~4 sqrt(n) lists: the classic balance between scanning the centroids and scanning the lists.
IVF_LISTS_PER_SQRT = 4
# build() raises nprobe until its calibration queries reach this recall@10 (the 0.95 goal + margin).
IVF_TARGET_RECALL = 0.97
IVF_CALIBRATION_QUERIES = 100
IVF_MIN_NPROBE = 4
# nprobe grows in steps of sqrt(2): a query's time grows with it, so stop near the target.
IVF_NPROBE_STEP = math.sqrt(2)
# ... or until a step gains less than this: then the codes, not the lists, limit recall.
IVF_PLATEAU_GAIN = 0.002
# Before any calibration (an index filled by add() rather than build()): this fraction of the lists.
IVF_PROBE_FRACTION = 1 / 16
# k-means on a sample of this size, for this many iterations: the same recall as more, far faster.
IVF_TRAIN_SAMPLE = 32_768
IVF_TRAIN_ITERATIONS = 10
# The coarse quantiser is a small HNSW graph over the centroids (assigning 1M vectors is the add's cost).
IVF_QUANTIZER_M = 32
# Vectors added per chunk by build(): progress and cancel are checked between chunks.
BUILD_CHUNK = 50_000

# Batches of at least this many queries scan through BLAS; single queries through FAISS's SIMD loop.
BLAS_THRESHOLD = 4
# A single query runs on one thread: waking an OpenMP team costs more than it gains.
SINGLE_QUERY_THREADS = 1
# ... except on ivf's 8-bit lists, which a single query scans on all threads.
IVF_PARALLEL_LIST_CODES = ("sq8",)




# The index each kind wraps, by class name (ivf: fp16 re-rank rows, or exact ones in older files).
_INNER = {"flat": ("IndexFlatIP",), "hnsw": ("IndexHNSWFlat",), "sq8": ("IndexScalarQuantizer",),
          "ivf": ("IndexRefine", "IndexRefineFlat")}
# FAISS turns a failed fwrite into a RuntimeError with the C library's text in it.
_ERRNO_TEXTS = [(c, os.strerror(c)) for c in (errno.ENOSPC, errno.EDQUOT, errno.EROFS,
                                               errno.EACCES, errno.EIO)]


def configure_faiss(blas_threshold: int | None = BLAS_THRESHOLD) -> None:
    if blas_threshold is not None:
        faiss.cvar.distance_compute_blas_threshold = int(blas_threshold)


configure_faiss()


def resolve_kind(request: str, count: int, threshold: int = AUTO_IVF_THRESHOLD) -> str:
    if request == "auto":
        return AUTO_KIND if count >= threshold else "flat"
    if request not in KINDS:
        raise ValueError(f"unknown index kind {request!r}; choose one of {', '.join(REQUESTS)}")
    return request


def nlist_for(n: int) -> int:
    """IVF lists for n vectors: the power of two nearest 4 sqrt(n), with >= 8 vectors a list."""
    want = IVF_LISTS_PER_SQRT * math.sqrt(max(n, 1))
    nlist = 2 ** round(math.log2(want))
    return int(max(1, min(nlist, n // 8)))


class FaissIndex:
    """An IndexIDMap2 over one of KINDS, plus what is needed to rebuild and save it."""

    def __init__(self, kind: str, dim: int, params: dict | None = None, index=None):
        if kind not in KINDS:
            raise ValueError(f"unknown index kind {kind!r}")
        self.kind = kind
        self.dim = int(dim)
        self.params = {**DEFAULT_PARAMS[kind], **(params or {})}
        self.index = index if index is not None else self._new()
        self.deleted: set[int] = set()   # MARKING_KINDS: ids removed but still in the index
        self._search_params = None
        self._apply_search_params()

    # -- construction -----------------------------------------------------------------------
    def _new(self, n: int = 0):
        """An empty index; ivf sizes its lists for n vectors (nlist "auto")."""
        d = self.dim
        if self.kind == "flat":
            inner = faiss.IndexFlatIP(d)
        elif self.kind == "hnsw":
            inner = faiss.IndexHNSWFlat(d, int(self.params["M"]), faiss.METRIC_INNER_PRODUCT)
            inner.hnsw.efConstruction = int(self.params["ef_construction"])
        elif self.kind == "ivf":
            nlist = self.params["nlist"]
            nlist = nlist_for(n) if nlist == "auto" else int(nlist)
            codes = self.params["codes"]
            codes = ("sq8" if d <= IVF_SQ8_MAX_DIM else "rabitq") if codes == "auto" else codes
            if codes not in IVF_CODES:
                raise ValueError(f"unknown ivf codes {codes!r}; choose one of {', '.join(IVF_CODES)}")
            base = faiss.index_factory(d, f"IVF{nlist}_HNSW{IVF_QUANTIZER_M},{IVF_CODES[codes][0]}",
                                       faiss.METRIC_INNER_PRODUCT)
            ivf = faiss.extract_index_ivf(base)
            ivf.cp.niter = IVF_TRAIN_ITERATIONS
            ivf.cp.min_points_per_centroid = 1   # a sample of < 39 per list is fine: no warning
            ivf.cp.max_points_per_centroid = 1 << 30   # the sample is drawn by train()
            rows = faiss.IndexScalarQuantizer(d, IVF_REFINE_QTYPE, faiss.METRIC_INNER_PRODUCT)
            inner = faiss.IndexRefine(base, rows)   # faiss's wrapper keeps both alive
        else:
            inner = faiss.IndexScalarQuantizer(d, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
        return faiss.IndexIDMap2(inner)

    def ef_search(self) -> int:
        ef = self.params.get("ef_search", "auto")
        if ef == "auto":
            return 256 if self.index.ntotal < 500_000 else 1024
        return int(ef)

    def nprobe(self) -> int:
        nprobe = self.params.get("nprobe", "auto")
        nlist = self.nlist()
        if nprobe == "auto":
            nprobe = self.params.get("nprobe_calibrated") or max(
                IVF_MIN_NPROBE, math.ceil(nlist * IVF_PROBE_FRACTION))
        return min(nlist, int(nprobe))

    def calibrate_nprobe(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Set params["nprobe_calibrated"]: the smallest nprobe (in IVF_NPROBE_STEP steps)
        at which stored vectors, as queries, find IVF_TARGET_RECALL of their exact top 10, or
        the last one before recall stops rising (IVF_PLATEAU_GAIN)."""
        n = len(vectors)
        pick = np.sort(np.random.default_rng(1).choice(n, min(n, IVF_CALIBRATION_QUERIES), replace=False))
        queries = np.ascontiguousarray(vectors[pick])
        k = min(10, n)
        _, exact = faiss.knn(queries, vectors, k, metric=faiss.METRIC_INNER_PRODUCT)
        exact_ids = ids[exact]
        nprobe, nlist, best = IVF_MIN_NPROBE, self.nlist(), None   # best: (nprobe, recall)
        while True:
            self.params["nprobe_calibrated"] = nprobe = min(nprobe, nlist)
            _, found = self.search(queries, k)
            hit = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(found.tolist(), exact_ids.tolist())]))
            if best is not None and hit - best[1] < IVF_PLATEAU_GAIN:
                break                        # this step bought nothing: keep the one before
            best = (nprobe, hit)
            if hit >= IVF_TARGET_RECALL or nprobe >= nlist:
                break
            nprobe = round(nprobe * IVF_NPROBE_STEP)
        self.params["nprobe_calibrated"] = best[0]
        self.params["calibrated_recall"] = round(best[1], 4)

    def nlist(self) -> int:
        return int(faiss.extract_index_ivf(self.index.index).nlist)

    def codes(self) -> str:
        """The codes the ivf lists hold, read from the index itself (a file written before
        RaBitQ existed holds 8-bit codes whatever its width)."""
        name = type(faiss.downcast_index(faiss.extract_index_ivf(self.index.index))).__name__
        return next(c for c, (_, cls) in IVF_CODES.items() if cls == name)

    def held_as(self) -> str:
        """What reconstruct() gives back of a stored vector: "exact", "fp16" (its fp16 rounding:
        ivf's re-rank rows) or "sq8" (8-bit codes decoded)."""
        if self.kind == "sq8":
            return "sq8"
        if self.kind == "ivf":
            rows = faiss.downcast_index(faiss.downcast_index(self.index.index).refine_index)
            if isinstance(rows, faiss.IndexScalarQuantizer):
                return "fp16"
        return "exact"

    def k_factor(self) -> float:
        k_factor = self.params.get("k_factor", "auto")
        return float(IVF_K_FACTOR[self.codes()] if k_factor == "auto" else k_factor)

    def _apply_search_params(self):
        if self.kind == "hnsw":
            inner = faiss.downcast_index(self.index.index)
            ef = self.ef_search()
            if inner.hnsw.efSearch != ef:
                inner.hnsw.efSearch = ef
                self._search_params = None

    @property
    def supports_update(self) -> bool:
        """Can a vector be replaced in place (same id)? Not in MARKING_KINDS."""
        return self.kind not in MARKING_KINDS

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
        """Train the quantisers on `vectors` (ivf: a fixed random sample of them, its lists
        sized for len(vectors))."""
        if self.index.is_trained or not len(vectors):
            return
        if self.kind == "ivf":
            self.index = self._new(len(vectors))   # empty: lists sized for these vectors
            self.params["built_for"] = int(len(vectors))
            if len(vectors) > IVF_TRAIN_SAMPLE:
                pick = np.random.default_rng(0).choice(len(vectors), IVF_TRAIN_SAMPLE, replace=False)
                vectors = vectors[np.sort(pick)]
        self.index.train(np.ascontiguousarray(vectors, dtype=np.float32))
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
        if self.kind not in MARKING_KINDS:
            return int(self.index.remove_ids(ids))
        present = set(ids[np.isin(ids, self.all_ids())].tolist()) - self.deleted
        self.deleted |= present
        self._search_params = None
        return len(present)

    @classmethod
    def build(cls, kind, dim, params, ids, vectors, progress=None, cancel=None) -> FaissIndex:
        """A new index over (ids, vectors). progress(done, total) after each chunk; cancel (an
        Event) is checked before each chunk and raises core.errors.Cancelled."""
        params = {k: v for k, v in (params or {}).items()
                  if k not in ("trained_on", "built_for", "nprobe_calibrated", "calibrated_recall")}
        fi = cls(kind, dim, params)
        n = len(ids)
        if n:
            fi.train(vectors)
            for start in range(0, n, BUILD_CHUNK):
                if cancel is not None and cancel.is_set():
                    raise Cancelled(f"index build cancelled after {start:,} of {n:,} vectors")
                end = min(n, start + BUILD_CHUNK)
                fi.add(ids[start:end], vectors[start:end])
                if progress is not None:
                    progress(end, n)
            if kind == "ivf" and fi.params.get("nprobe", "auto") == "auto":
                fi.calibrate_nprobe(np.asarray(ids, np.int64), vectors)
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
        if self.kind == "ivf":
            parallel_lists = nq == 1 and self.codes() in IVF_PARALLEL_LIST_CODES
            faiss.extract_index_ivf(self.index.index).parallel_mode = 1 if parallel_lists else 0
            if parallel_lists:
                return self.index.search(queries, k, params=params)
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
        if self.kind == "ivf":
            return self._ivf_params()
        if not self.deleted:
            return None
        if self._search_params is None:
            batch, sel, dead = self._not_deleted()
            p = faiss.SearchParametersHNSW()
            p.efSearch = self.ef_search()
            p.sel = sel
            p._keep = (batch, sel, dead)   # the C++ objects reference these
            self._search_params = p
        return self._search_params

    def _not_deleted(self):
        dead = np.fromiter(sorted(self.deleted), np.int64, len(self.deleted))
        batch = faiss.IDSelectorBatch(dead)
        return batch, faiss.IDSelectorNot(batch), dead

    def _ivf_params(self):
        """k_factor for the re-rank, nprobe for the scan, and the deleted marks (IndexIDMap2
        translates only a top-level selector, so the IVF scan gets a translated one)."""
        nprobe, k_factor = self.nprobe(), self.k_factor()
        p = self._search_params
        if p is not None and p.k_factor == k_factor and p._nprobe == nprobe:
            return p
        p = faiss.IndexRefineSearchParameters()
        p.k_factor = k_factor
        ivf = faiss.SearchParametersIVF()
        ivf.nprobe = nprobe
        quant = faiss.SearchParametersHNSW()
        quant.efSearch = max(64, 2 * nprobe)     # the graph walk must find nprobe centroids
        ivf.quantizer_params = quant
        keep = [ivf, quant]
        if self.deleted:
            batch, sel, dead = self._not_deleted()
            translated = faiss.IDSelectorTranslated(self.index.id_map, sel)
            ivf.sel = translated
            keep += [batch, sel, dead, translated]
        p.base_index_params = ivf
        p._keep, p._nprobe = keep, nprobe
        self._search_params = p
        return p

    # -- files ------------------------------------------------------------------------------
    def reconstruct(self, ids) -> np.ndarray:
        """The vectors the index holds for `ids`, decoded: see held_as()."""
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
    def read(cls, path, kind, dim, params) -> FaissIndex:
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
        if inner not in _INNER[kind]:
            raise ValueError(f"the file holds {inner}, the manifest says {kind} "
                             f"({' or '.join(_INNER[kind])})")
        if kind == "ivf":
            refine = faiss.downcast_index(index.index)
            base = faiss.downcast_index(refine.base_index)
            if type(base).__name__ not in [cls_name for _, cls_name in IVF_CODES.values()]:
                raise ValueError(f"the ivf file holds {type(base).__name__}, not an IVF over "
                                 f"{' or '.join(IVF_CODES)} codes")
            rows = faiss.downcast_index(refine.refine_index)
            if not (isinstance(rows, faiss.IndexFlat) or (isinstance(rows, faiss.IndexScalarQuantizer)
                                                          and rows.sq.qtype == IVF_REFINE_QTYPE)):
                raise ValueError(f"the ivf file re-ranks with {type(rows).__name__}, not fp16 or "
                                 "exact vectors")
        return cls(kind, dim, params, index=index)

    def describe(self) -> str:
        inner = type(faiss.downcast_index(self.index.index)).__name__
        if self.kind == "ivf":
            inner += (f" over IVF{self.nlist()},{IVF_CODES[self.codes()][0]}, nprobe {self.nprobe()}, "
                      f"k_factor {self.k_factor():g}, re-ranked with {self.held_as()} vectors")
        return f"{self.kind} (IndexIDMap2 over {inner}, inner product on normalised vectors)"
