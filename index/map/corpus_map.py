"""The corpus map: every sentence of a store placed in 2-D (index.map.projection), grouped by
k-means and each group named by its distinctive words (index.map.clusters).

    m = build_map(store, clusters=8)     # UMAP where installed, else PCA; reads store.iter_batches
    write_map_csv("map.csv", m)                           # id, x, y, cluster, text
    m.summary()                                           # what `encoderscope map --json` prints

Works for every Store (FAISS or Milvus): only the public iter_batches is used.
"""
from __future__ import annotations

import csv
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import Cancelled, InputError
from index.map.clusters import distinctive_words, kmeans
from index.map.projection import UMAP_MIN_POINTS, default_method, fit_projection
from index.map.quality import NeighbourRecall, neighbour_recall
from index.store.errors import EmptyStore

DEFAULT_CLUSTERS = 8
DEFAULT_SEED = 0
CSV_HEADER = ("id", "x", "y", "cluster", "text")
READ_BATCH = 2000


@dataclass
class MapCluster:
    id: int                        # 0 = the largest cluster
    size: int                      # sentences in it
    words: list                    # its most distinctive words, best first

    @property
    def label(self) -> str:
        return ", ".join(self.words) if self.words else "(no distinctive words)"

    def to_dict(self) -> dict:
        return {"id": self.id, "size": self.size, "label": self.label}


@dataclass
class CorpusMap:
    ids: np.ndarray                # (n,) int64 store ids, in store (id) order
    texts: list                    # (n,) the sentences
    xy: np.ndarray                 # (n, 2) float32 map coordinates
    cluster: np.ndarray            # (n,) int32 cluster of each sentence
    clusters: list                 # MapCluster per cluster id
    projection: object             # fitted PcaProjection / UmapProjection (.project(vectors))
    notes: list = field(default_factory=list)    # things the user should know (k reduced, ...)
    seconds: dict = field(default_factory=dict)  # read / project / cluster / label timings
    quality: NeighbourRecall | None = None       # how well the 2-D picture keeps neighbours

    @property
    def method(self) -> str:
        return self.projection.method

    @property
    def explained_variance(self):
        """PCA: share of the variance on each axis (list of 2); UMAP: None."""
        ev = self.projection.explained_variance
        return None if ev is None else [float(v) for v in ev]

    def __len__(self) -> int:
        return len(self.ids)

    def summary(self) -> dict:
        """The `encoderscope map --json` object."""
        return {"count": len(self), "method": self.method,
                "explained_variance": self.explained_variance,
                "neighbours": self.quality.to_dict() if self.quality is not None else None,
                "clusters": [c.to_dict() for c in self.clusters]}

    def describe_quality(self) -> str:
        """The map's honesty in one line: neighbours kept (and, for PCA, the variance shown)."""
        parts = []
        ev = self.explained_variance
        if ev:
            parts.append(f"the axes carry {ev[0]:.1%} + {ev[1]:.1%} of the variance")
        if self.quality is not None:
            parts.append(self.quality.describe())
        return "; ".join(parts)


def read_vectors(store, progress=None, cancel=None, batch: int = READ_BATCH):
    """(ids (n,) int64, vectors (n, D) float32, texts) of every row, through iter_batches."""
    total = store.count()
    ids, vecs, texts = [], [], []
    done = 0
    for part_ids, part_vecs, records in store.iter_batches(batch=batch, vectors=True):
        _check_cancel(cancel)
        ids.append(np.asarray(part_ids, np.int64))
        vecs.append(np.asarray(part_vecs, np.float32))
        texts += [r["text"] for r in records]
        done += len(records)
        _report(progress, done, total, f"Reading the vectors: {done:,}/{total:,}")
    if not ids:
        return np.zeros(0, np.int64), np.zeros((0, store.dim), np.float32), []
    return np.concatenate(ids), np.concatenate(vecs), texts


def cluster_count(n: int, asked: int | None) -> tuple[int, list]:
    """(k to use, notes): asked (default DEFAULT_CLUSTERS), at most one cluster per sentence."""
    k = DEFAULT_CLUSTERS if asked is None else int(asked)
    if k < 1:
        raise InputError("the number of clusters must be at least 1", fix={"kind": "clusters"})
    if k > n:
        return n, [(f"{k} clusters asked for but the corpus has {n} sentence"
                    f"{'s' if n != 1 else ''}: made {n} clusters (one per sentence)")]
    return k, []


def map_vectors(ids, vectors, texts, method: str | None = None, clusters: int | None = None,
                seed: int = DEFAULT_SEED, progress=None, cancel=None) -> CorpusMap:
    """The map of given rows (what build_map does after reading the store); method None: the
    default (UMAP where installed, else PCA, said in the notes)."""
    n = len(ids)
    if n == 0:
        raise EmptyStore("the store holds no sentences: there is nothing to map (add some first)")
    k, notes = cluster_count(n, clusters)
    if method is None:
        method, why = default_method()
        notes += [why] if why else []
        if method == "umap" and n < UMAP_MIN_POINTS:
            method = "pca"
            notes.append(f"UMAP needs at least {UMAP_MIN_POINTS} sentences: the map is PCA")
    seconds = {}
    t0 = time.perf_counter()
    stage = f"Projecting {n:,} sentences ({method.upper()})"
    # UMAP first finds every sentence's neighbours and a first layout (no progress inside
    # umap-learn for those; a cancel is honoured once they end), then reports its epochs
    _report(progress, 0, 3, f"{stage}: finding each sentence's neighbours" if method == "umap" else stage)
    _check_cancel(cancel)

    def epochs(done, total):
        _report(progress, done, total, f"{stage}: layout epoch {done}/{total}")
    projection = fit_projection(vectors, method, seed, epochs, cancel)
    xy = projection.project(vectors) if method == "pca" else \
        np.asarray(projection.reducer.embedding_, np.float32)
    seconds["project"] = time.perf_counter() - t0
    _check_cancel(cancel)

    t0 = time.perf_counter()
    _report(progress, 1, 3, f"Clustering into {k} groups (k-means)")
    assign = kmeans(vectors, k, seed)
    seconds["cluster"] = time.perf_counter() - t0
    _check_cancel(cancel)

    t0 = time.perf_counter()
    _report(progress, 2, 3, "Naming the clusters")
    k_found = int(assign.max()) + 1        # k-means may leave a cluster empty
    words = distinctive_words(texts, assign, k_found)
    sizes = np.bincount(assign, minlength=k_found)
    seconds["label"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    quality = neighbour_recall(vectors, xy, seed=seed)
    seconds["quality"] = time.perf_counter() - t0
    _report(progress, 3, 3, "Map ready")
    groups = [MapCluster(c, int(sizes[c]), words[c]) for c in range(k_found)]
    if k_found < k:
        notes.append(f"k-means left {k - k_found} of {k} clusters empty")
    return CorpusMap(np.asarray(ids, np.int64), list(texts), xy, assign, groups, projection,
                     notes, seconds, quality)


def build_map(store, method: str | None = None, clusters: int | None = None, seed: int = DEFAULT_SEED,
              progress=None, cancel=None) -> CorpusMap:
    """Read every vector of `store` and map it (progress(done, total, message); cancel: Event)."""
    t0 = time.perf_counter()
    ids, vectors, texts = read_vectors(store, progress, cancel)
    read_s = time.perf_counter() - t0
    m = map_vectors(ids, vectors, texts, method, clusters, seed, progress, cancel)
    m.seconds = {"read": read_s, **m.seconds}
    return m


# ---- CSV ---------------------------------------------------------------------------------------
def write_map_csv(path_or_file, m: CorpusMap) -> None:
    """id, x, y, cluster, text: one row per sentence (csv quoting: any text round-trips)."""
    if hasattr(path_or_file, "write"):
        _write_rows(path_or_file, m)
        return
    from core.files.atomic import atomic_write_with

    def fill(tmp):       # beside the file, then renamed over it: a full disk keeps the old map whole
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            _write_rows(f, m)
    atomic_write_with(Path(path_or_file).expanduser(), fill, durable=False)


def _write_rows(f, m: CorpusMap) -> None:
    w = csv.writer(f)
    w.writerow(CSV_HEADER)
    for id_, (x, y), c, text in zip(m.ids.tolist(), m.xy.tolist(), m.cluster.tolist(), m.texts):
        w.writerow((id_, repr(x), repr(y), c, text))


def read_map_csv(path) -> list[dict]:
    """The rows of a map CSV: {"id": int, "x": float, "y": float, "cluster": int, "text": str}."""
    with open(path, newline="", encoding="utf-8") as f:
        return [{"id": int(r["id"]), "x": float(r["x"]), "y": float(r["y"]),
                 "cluster": int(r["cluster"]), "text": r["text"]} for r in csv.DictReader(f)]


def _report(progress, done, total, message) -> None:
    if progress is not None:
        progress(done, total, message)


def _check_cancel(cancel) -> None:
    if cancel is not None and cancel.is_set():
        raise Cancelled("cancelled")
