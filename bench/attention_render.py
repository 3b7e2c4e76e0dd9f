"""How fast the attention views draw: 6 layers x 12 heads at 128 tokens (DistilBERT-sized).

    QT_QPA_PLATFORM=offscreen .venv/bin/python bench/attention_render.py [--tokens 128] [--repeat 7]
        [--markdown docs/benchmarks/attention.md]

Timed, each the median of --repeat runs, from "new attentions arrive" to "pixels painted"
(``QWidget.grab()`` forces a full synchronous paint of the widget):

* grid (mosaic)  - app/gui/panels/attention/head_grid.HeadGrid: all heads as one RGBA ImageItem mosaic
* grid (naive)   - baseline: one pg.PlotWidget + ImageItem per head in a QGridLayout
                   (72 plots), updated in place; its one-off construction time is shown apart
* one head       - app/gui/widgets/heatmap.HeatmapWidget: 128 x 128 matrix with token labels + colour bar
* core maths     - core/inspect/attention_maps: rollout through all layers, hide specials, mean

Random softmax rows stand in for a model's attentions: drawing cost does not depend on
the values. The budget from issue #6 is 300 ms for the grid.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import pyqtgraph as pg  # noqa: E402
from PySide6 import QtWidgets  # noqa: E402

from app.gui.panels.attention.head_grid import HeadGrid  # noqa: E402
from app.gui.widgets.heatmap import HeatmapWidget, colormap  # noqa: E402
from core.inspect import attention_maps as A  # noqa: E402

BUDGET_MS = 300.0


def guard_none_refcount():
    """PySide6 6.12.0 on CPython 3.11 drops a reference to None on many void Qt calls
    (setText, setPos, update, ...) and to True/False on some others; after ~16k such calls
    CPython aborts ("none_dealloc" / "bool_dealloc"). A benchmark makes hundreds of thousands,
    so pad those refcounts here (they are immortal from Python 3.12, where this is a no-op)."""
    if sys.version_info < (3, 12) and platform.python_implementation() == "CPython":
        import ctypes
        for obj in (None, True, False):
            ctypes.c_ssize_t.from_address(id(obj)).value += 1 << 40
SIZE = (1200, 700)


def fake_attentions(L, H, T, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(L, H, T, T)).astype(np.float32) * 2.5
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def tokens_for(T):
    return ["[CLS]"] + [f"word{i}" for i in range(T - 2)] + ["[SEP]"]


def timed(fn, repeat):
    times = []
    for r in range(repeat):
        t = time.perf_counter()
        fn(r)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times), min(times), max(times)


class NaiveGrid(QtWidgets.QWidget):
    """The obvious way: a PlotWidget per head."""

    def __init__(self, L, H):
        super().__init__()
        lay = QtWidgets.QGridLayout(self)
        lay.setSpacing(2)
        lay.setContentsMargins(0, 0, 0, 0)
        self.images = []
        cmap = colormap("Blues")
        for l in range(L):
            for h in range(H):
                w = pg.PlotWidget()
                w.hideAxis("left")
                w.hideAxis("bottom")
                w.invertY(True)
                w.setMouseEnabled(False, False)
                img = pg.ImageItem(axisOrder="row-major")
                img.setColorMap(cmap)
                w.addItem(img)
                lay.addWidget(w, l, h)
                self.images.append(img)

    def set_attentions(self, a):
        L, H = a.shape[:2]
        for i, img in enumerate(self.images):
            m = a[i // H, i % H]
            img.setImage(m, levels=(0.0, float(m.max())))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--markdown", type=Path, default=None, help="write the results as a markdown file")
    args = ap.parse_args(argv)
    L, H, T, R = args.layers, args.heads, args.tokens, args.repeat

    guard_none_refcount()
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    sets = [fake_attentions(L, H, T, seed=s) for s in range(3)]
    tokens = tokens_for(T)
    rows = []

    # grid: mosaic
    t = time.perf_counter()
    grid = HeadGrid()
    grid.resize(*SIZE)
    grid.show()
    app.processEvents()

    def grid_once(r):
        grid.set_attentions(sets[r % 3], tokens)
        grid.grab()
    grid_once(0)
    mosaic_first_ms = (time.perf_counter() - t) * 1000
    mosaic = timed(grid_once, R)
    rows.append(("grid, mosaic (HeadGrid)", mosaic))

    # grid: naive baseline
    t = time.perf_counter()
    naive = NaiveGrid(L, H)
    naive.resize(*SIZE)
    naive.show()
    app.processEvents()

    def naive_once(r):
        naive.set_attentions(sets[r % 3])
        naive.grab()
    naive_once(0)
    naive_first_ms = (time.perf_counter() - t) * 1000
    naive_t = timed(naive_once, R)
    rows.append((f"grid, naive ({L * H} PlotWidgets)", naive_t))
    rows.insert(0, ("grid, mosaic: first display (build + draw)", (mosaic_first_ms,) * 3))
    rows.insert(2, (f"grid, naive: first display (build {L * H} plots + draw)", (naive_first_ms,) * 3))
    naive.close()

    # one head, with labels
    hm = HeatmapWidget()
    hm.resize(900, 800)
    hm.show()
    app.processEvents()

    def head_once(r):
        hm.set_matrix(sets[r % 3][r % L, r % H], tokens, title="Layer 1, head 1")
        hm.grab()
    head_once(0)
    head = timed(head_once, R)
    rows.append(("one head + labels + colour bar", head))

    small = fake_attentions(1, 1, 32)[0, 0]
    hm.set_show_values(True)

    def values_once(r):
        hm.set_matrix(small * (1 + r * 1e-3), tokens_for(32))
        hm.grab()
    values = timed(values_once, R)
    assert hm.values_item.drawn == 32 * 32
    rows.append(("one head, 32 tokens, numbers in all 1024 cells", values))
    hm.set_show_values(False)

    # core maths
    keep = A.keep_indices(tokens, hide_special=True)
    core_roll = timed(lambda r: A.rollout_layers(sets[r % 3]), R)
    core_hide = timed(lambda r: A.hide(sets[r % 3], keep, renormalise=True), R)
    rows.append(("core: rollout through all layers", core_roll))
    rows.append(("core: hide [CLS]/[SEP] on all heads (renormalised)", core_hide))

    ratio = naive_t[0] / mosaic[0]
    lines = [
        f"# Attention views: render time ({L} layers x {H} heads, {T} tokens)",
        "",
        "Measured by `bench/attention_render.py` (`QT_QPA_PLATFORM=offscreen`; every time is from new",
        "attentions to pixels painted by `QWidget.grab()`, median of "
        f"{R} runs). Machine: {platform.machine()}, {os.cpu_count()} CPUs ({platform.python_version()},"
        f" PySide6 {__import__('PySide6').__version__}, pyqtgraph {pg.__version__}); shared with other jobs.",
        "",
        "| what | median ms | min | max |",
        "|---|---:|---:|---:|",
    ]
    for name, (med, lo, hi) in rows:
        lines.append(f"| {name} | {med:.1f} | {lo:.1f} | {hi:.1f} |")
    lines += [
        "",
        f"* Grid budget (issue #6): {BUDGET_MS:.0f} ms. Mosaic: **{mosaic[0]:.1f} ms** "
        f"({'within' if mosaic[0] <= BUDGET_MS else 'OVER'} budget).",
        f"* Mosaic vs naive baseline, new attentions on an open grid: **{ratio:.1f}x faster**; "
        f"first display (build + draw): **{naive_first_ms / mosaic_first_ms:.0f}x faster** "
        f"({mosaic_first_ms:.0f} ms vs {naive_first_ms:.0f} ms: building {L * H} PlotItems is the naive "
        "approach's real cost).",
        f"* One head at {T} tokens with labels: **{head[0]:.1f} ms**.",
        "",
        "Where the mosaic wins: the first display (one `ImageItem`, one texture, one paint; colour",
        "mapping is one numpy lookup over all heads) and memory. Once the naive grid exists, the gap is",
        "small: 1.0x-2.3x across runs on this shared 2-core machine. A side effect that",
        "matters here: every PlotItem makes ~100 void Qt calls, each of which loses a reference to",
        "None under PySide6 6.12.0 + CPython 3.11 (see guard_none_refcount), so 72 of them per view",
        "would walk the app towards a none_dealloc abort.",
        "Heads longer than 96 tokens are block-averaged for the grid (a cell is ~90 px wide on",
        "screen); the one-head view always draws every token. Numbers in cells are drawn by one",
        "item in one paint() (1024 separate TextItems took ~1.5 s).",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(text, encoding="utf-8")
        print(f"wrote {args.markdown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
