"""The corpus map at 10k and 100k points: projection, k-means, labels, first draw, pan/zoom
redraw and hover lookup, each next to a peer measured in the same run.

Vectors are synthetic: clustered 384-d unit vectors (tests/test_store_support.clustered, the
structure of sentence embeddings: topics -> clusters -> points), with made-up three-word texts.
Drawing does not depend on where vectors come from; the projection and k-means depend only on
their shape. Peers:
  projection   np.linalg.svd of the centred matrix (the textbook PCA; our covariance + eigh)
  drawing      one ScatterPlotItem with a brush per point (the obvious way; ours: one item
               per cluster with a cached brush, app/gui/panels/map/plot.py)
  hover        ScatterPlotItem.pointsAt on that item (ours: one vectorised NumPy pass)
A frame is QWidget.grab() of the 1100 x 700 plot (offscreen Qt: everything is painted); its CPU
time (time.process_time) is also shown: on a shared machine the wall time includes waiting
for a core, the CPU time is the work itself.

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/map.py [--sizes 10000 100000] [--umap]

`--neighbours` instead compares the 2-D methods on what the map is for, keeping neighbours: each
method at each size in a fresh Python (so numba's compilation and the imports are counted),
its time, kNN recall (index/map/quality.py: the share of each point's 10 nearest by cosine that
are also its 10 nearest in 2-D, 1,000 points sampled) and, up to 10k points, scikit-learn's
trustworthiness. Methods that are not installed are listed as such (openTSNE, PaCMAP: not
dependencies of Encoderscope; `pip install openTSNE pacmap` to compare them).

    .venv/bin/python bench/map.py --neighbours [--sizes 10000 100000] [--methods pca umap ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402 - after the Qt platform is chosen

DIM = 384
CLUSTERS = 8
FRAMES = 12
WORDS = ["planet", "moon", "orbit", "coffee", "morning", "cup", "train", "station", "delay", "guitar", "song",
         "stage", "river", "bridge", "city", "market", "bread", "cheese", "museum", "painting", "garden", "flower",
         "storm", "rain"]


def timed(fn, *args, repeat=1):
    """(median seconds, last result) of fn(*args)."""
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn(*args)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def svd_projection(x):
    xc = x.astype(np.float64) - x.mean(axis=0, dtype=np.float64)
    _, _, vt = np.linalg.svd(xc, full_matrices=False)
    return xc @ vt[:2].T


def frames(app, plot) -> list[tuple]:
    """(wall, CPU) seconds per frame over pans and zooms of the plot's view."""
    vb = plot.getViewBox()
    out = []
    for i in range(FRAMES):
        if i % 3 == 2:
            vb.scaleBy((0.85, 0.85))
        else:
            vb.translateBy(x=0.02 * (1 if i % 2 else -1), y=0.01)
        t0, c0 = time.perf_counter(), time.process_time()
        plot.grab()
        out.append((time.perf_counter() - t0, time.process_time() - c0))
        app.processEvents()
    return out


def draw_ours(app, xy, cluster, labels):
    from app.gui.panels.map.plot import MapPlot
    plot = MapPlot()
    plot.resize(1100, 700)
    plot.show()
    app.processEvents()
    t0, c0 = time.perf_counter(), time.process_time()
    plot.set_points(xy, cluster, labels)
    plot.grab()
    return plot, (time.perf_counter() - t0, time.process_time() - c0)


def draw_naive(app, xy, cluster):
    import pyqtgraph as pg

    from app.gui.panels.map.plot import cluster_colour
    plot = pg.PlotWidget(background="w")
    plot.resize(1100, 700)
    plot.show()
    app.processEvents()
    t0 = time.perf_counter()
    brushes = [pg.mkBrush(cluster_colour(int(c), CLUSTERS)) for c in cluster]
    item = pg.ScatterPlotItem(x=xy[:, 0], y=xy[:, 1], size=5, pen=None, brush=brushes)
    plot.addItem(item)
    plot.autoRange()
    plot.grab()
    first = time.perf_counter() - t0
    return plot, item, first


def hover_ours(plot, probes):
    from app.gui.panels.map.plot import nearest_row
    px_w, px_h = plot.vb.viewPixelSize()
    return [nearest_row(plot.xy, x, y, px_w, px_h) for x, y in probes]


def hover_naive(item, probes):
    from PySide6.QtCore import QPointF
    return [item.pointsAt(QPointF(float(x), float(y))) for x, y in probes]


def run_size(app, n, with_umap, draw_only=False) -> dict:
    from index.map.clusters import distinctive_words, kmeans
    from index.map.corpus_map import map_vectors
    from index.map.projection import fit_pca, fit_umap
    from tests.support.store_backends import clustered
    rng = np.random.default_rng(0)
    x = clustered(n, DIM, seed=0)
    texts = [" ".join(rng.choice(WORDS, 3)) for _ in range(n)]
    r = {"n": n}
    if draw_only:
        from index.map.corpus_map import CorpusMap, MapCluster
        from index.map.projection import PcaProjection
        m = CorpusMap(np.arange(n), texts, fit_pca(x).project(x), kmeans(x, CLUSTERS, 0), [],
                      PcaProjection(None, None, None))
        m.clusters = [MapCluster(c, 0, [str(c)]) for c in range(int(m.cluster.max()) + 1)]
        return draw_size(app, r, m, [c.label for c in m.clusters], rng)
    r["pca"], pca = timed(lambda: fit_pca(x).project(x), repeat=3)
    r["svd"], ref = timed(svd_projection, x, repeat=1 if n > 20_000 else 3)
    r["pca_err"] = float(np.abs(np.abs(pca) - np.abs(ref)).max())
    r["kmeans"], assign = timed(kmeans, x, CLUSTERS, 0)
    r["labels"], words = timed(distinctive_words, texts, assign, int(assign.max()) + 1)
    r["map"], m = timed(lambda: map_vectors(np.arange(n), x, texts, clusters=CLUSTERS))
    if with_umap:
        r["umap"], _ = timed(fit_umap, x)
    labels = [", ".join(w) for w in words]
    return draw_size(app, r, m, labels, rng)


def draw_size(app, r, m, labels, rng) -> dict:
    plot, (r["first"], r["first_cpu"]) = draw_ours(app, m.xy, m.cluster, labels)
    walls, cpus = zip(*frames(app, plot))
    r["redraw"], r["redraw_cpu"] = statistics.median(walls), statistics.median(cpus)
    lo, hi = m.xy.min(axis=0), m.xy.max(axis=0)
    probes = rng.uniform(lo, hi, size=(50, 2))
    t, _ = timed(hover_ours, plot, probes)
    r["hover"] = t / len(probes)
    plot.close()

    naive, item, r["first_naive"] = draw_naive(app, m.xy, m.cluster)
    r["redraw_naive"] = statistics.median(wall for wall, _ in frames(app, naive))
    t, _ = timed(hover_naive, item, probes[:10])
    r["hover_naive"] = t / 10
    naive.close()
    app.processEvents()
    return r


NEIGHBOUR_METHODS = ("pca", "umap", "umap-parallel", "opentsne", "pacmap")
TRUST_MAX = 10_000      # trustworthiness holds two n x n distance matrices: only up to this size


def fit_method(method: str, x: np.ndarray) -> np.ndarray:
    """(n, 2) coordinates of x by one candidate method, seeded where the method allows it."""
    if method == "pca":
        from index.map.projection import fit_pca
        return fit_pca(x).project(x)
    if method == "umap":                 # what the app runs: seeded, hence one thread
        from index.map.projection import fit_umap
        return fit_umap(x).reducer.embedding_
    if method == "umap-parallel":        # no seed: every core, a different picture each run
        import umap
        return umap.UMAP(n_neighbors=15, metric="cosine", n_jobs=-1).fit_transform(x)
    if method == "opentsne":
        from openTSNE import TSNE
        return np.asarray(TSNE(metric="cosine", n_jobs=-1, random_state=0).fit(x))
    if method == "pacmap":
        import pacmap
        return pacmap.PaCMAP(n_components=2, distance="angular", random_state=0).fit_transform(x)
    raise ValueError(method)


def sample_corpus_vectors() -> np.ndarray:
    """Real sentence embeddings: the bundled sample corpus (576 sentences) by minilm, mean pooling."""
    from core.encoder.backends import get_backend
    texts = [t for t in (ROOT / "assets" / "sample_corpus.txt").read_text(encoding="utf-8").splitlines() if t]
    return np.asarray(get_backend("minilm", "scratch", device="cpu").embed(texts, pooling="mean"), np.float32)


def one_method(method: str, n: int) -> dict:
    """Time and neighbour quality of one method at one size (run in its own process); n = 0:
    the sample corpus's real embeddings."""
    import json

    from index.map.quality import neighbour_recall
    from tests.support.store_backends import clustered
    x = sample_corpus_vectors() if n == 0 else clustered(n, DIM, seed=0)
    n = len(x)
    t0, c0 = time.perf_counter(), time.process_time()
    try:
        xy = fit_method(method, x)
    except ImportError as e:
        return print(json.dumps({"method": method, "n": n, "missing": str(e)}))
    r = {"method": method, "n": n, "seconds": time.perf_counter() - t0, "cpu": time.process_time() - c0,
         "recall": neighbour_recall(x, xy).recall}
    if n <= TRUST_MAX:
        from sklearn.manifold import trustworthiness
        r["trust"] = float(trustworthiness(x, xy, n_neighbors=10, metric="cosine"))
    print(json.dumps(r))


def neighbours_table(sizes, methods) -> int:
    import json
    import subprocess
    rows = []
    for n in sizes:
        for method in methods:
            p = subprocess.run([sys.executable, __file__, "--one", method, str(n)], capture_output=True, text=True)
            line = p.stdout.strip().splitlines()[-1:] or ["{}"]
            row = json.loads(line[0]) if p.returncode == 0 else {"method": method, "n": n,
                                                                  "missing": p.stderr.strip()[-200:]}
            print(row, flush=True)
            rows.append(row)
    print(f"\n2-D maps of synthetic clustered {DIM}-d unit vectors (0: the sample corpus by minilm); "
          f"{os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; time in a fresh Python (imports and numba compilation included)\n")
    print("| method | points | time (s) | CPU (s) | kNN recall@10 | trustworthiness@10 |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        if "missing" in r:
            print(f"| {r['method']} | {r['n']:,} | not installed / failed: {r['missing'][:80]} | | | |")
        else:
            trust = f"{r['trust']:.3f}" if "trust" in r else "n/a (n x n)"
            print(f"| {r['method']} | {r['n']:,} | {r['seconds']:.1f} | {r['cpu']:.1f} | {r['recall']:.3f} | {trust} |")
    return 0


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--one"]:
        return one_method(sys.argv[2], int(sys.argv[3])) or 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--neighbours", action="store_true", help="compare 2-D methods on keeping neighbours")
    ap.add_argument("--methods", nargs="+", default=list(NEIGHBOUR_METHODS), choices=NEIGHBOUR_METHODS)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000],
                    help="points; with --neighbours, 0 = the sample corpus embedded by minilm")
    ap.add_argument("--umap", action="store_true", help="also time UMAP (minutes at 100k)")
    ap.add_argument("--draw-only", action="store_true", help="only the drawing and hover rows")
    args = ap.parse_args(argv)
    if args.neighbours:
        return neighbours_table(args.sizes, args.methods)
    from PySide6.QtWidgets import QApplication
    app = QApplication.instance() or QApplication(sys.argv[:1])
    load0 = os.getloadavg()[0]
    rows = [run_size(app, n, args.umap, args.draw_only) for n in args.sizes]
    def ms(s):
        return f"{s * 1000:,.1f}"
    print(f"\nCorpus map, synthetic clustered {DIM}-d unit vectors, {CLUSTERS} clusters; "
          f"{os.cpu_count()} CPUs, load average {load0:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end\n")
    print("| step (ms) | " + " | ".join(f"{r['n']:,} points" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    lines = [] if args.draw_only else [("PCA (covariance + eigh), fit + project", "pca"),
             ("peer: np.linalg.svd of the centred matrix", "svd"),
             ("k-means (faiss, spherical, 5 restarts)", "kmeans"),
             ("cluster labels (words)", "labels"),
             ("whole map (PCA + k-means + labels)", "map")]
    if args.umap and not args.draw_only:
        lines.append(("UMAP (umap-learn, 1 thread)", "umap"))
    lines += [("first draw, ours (one item per cluster)", "first"),
              ("  the same, CPU time of this process", "first_cpu"),
              ("peer: first draw, one item, a brush per point", "first_naive"),
              ("pan/zoom redraw, ours (median)", "redraw"),
              ("  the same, CPU time of this process", "redraw_cpu"),
              ("peer: pan/zoom redraw, one item", "redraw_naive"),
              ("hover lookup, ours (NumPy nearest)", "hover"),
              ("peer: hover lookup, ScatterPlotItem.pointsAt", "hover_naive")]
    for name, key in lines:
        print(f"| {name} | " + " | ".join(ms(r[key]) for r in rows) + " |")
    for r in rows:
        if "pca" in r:
            print(f"\n{r['n']:,}: PCA vs SVD max |coordinate| difference {r['pca_err']:.1e}; "
                  f"projection ratio SVD/ours {r['svd'] / r['pca']:.1f}x")
        print(f"{r['n']:,}: ratios peer/ours: first draw "
              f"{r['first_naive'] / r['first']:.1f}x, redraw {r['redraw_naive'] / r['redraw']:.1f}x, "
              f"hover {r['hover_naive'] / r['hover']:.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
