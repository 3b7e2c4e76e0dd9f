"""One cluster of the corpus map as a single graphics item: every point is the same pre-rendered
dot, stamped with one QPainter.drawPixmapFragments call per paint.

pyqtgraph's ScatterPlotItem does the same stamping, but first looks each point's style up in
its symbol atlas in Python (about 1 s for 100k points before the first frame); here the style
is per item, so the only per-point work is NumPy: map to the screen, cull, fill the fragments.
"""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from pyqtgraph.Qt import internals
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPixmap


def dot_pixmap(colour, size: int, ring: bool = False) -> QPixmap:
    """An antialiased circle of `size` pixels on a transparent square: filled, or a ring."""
    side = size + 2
    pm = QPixmap(side, side)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    if ring:
        p.setPen(pg.mkPen(colour, width=1.2))
        p.setBrush(Qt.BrushStyle.NoBrush)
    else:
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(pg.mkBrush(colour))
    p.drawEllipse(QRectF(1, 1, size, size))
    p.end()
    return pm


class ClusterPoints(pg.GraphicsObject):
    """Points (n, 2) in data coordinates drawn as `size`-pixel dots (or rings) of one colour."""

    def __init__(self, xy: np.ndarray, colour, size: int = 5, ring: bool = False):
        super().__init__()
        self.xy = np.asarray(xy, np.float64).reshape(-1, 2)
        self.size = size
        self.pixmap = dot_pixmap(colour, size, ring)
        # what pyqtgraph's LegendItem reads to draw this item's sample
        self.opts = {"pen": None, "brush": pg.mkBrush(colour), "symbol": "o", "size": size + 3,
                     "antialias": True}
        self._fragments = internals.PrimitiveArray(QPainter.PixmapFragment, 10)
        if len(self.xy):
            self._lo, self._hi = self.xy.min(axis=0), self.xy.max(axis=0)
            self._bounds = QRectF(self._lo[0], self._lo[1], *(self._hi - self._lo))
        else:
            self._bounds = QRectF()

    def getData(self):
        return self.xy[:, 0], self.xy[:, 1]

    def __len__(self) -> int:
        return len(self.xy)

    # ---- what the ViewBox asks for auto-ranging -------------------------------------------------
    def dataBounds(self, ax, frac=1.0, orthoRange=None):
        if not len(self.xy):
            return None, None
        return float(self._lo[ax]), float(self._hi[ax])     # computed once, asked every frame

    def pixelPadding(self) -> float:
        return self.size / 2 + 1

    def boundingRect(self) -> QRectF:
        px = self.pixelLength(pg.Point(1, 0)) or 0.0
        py = self.pixelLength(pg.Point(0, 1)) or 0.0
        pad = self.pixelPadding()
        return self._bounds.adjusted(-pad * px, -pad * py, pad * px, pad * py)

    def viewTransformChanged(self):
        self.prepareGeometryChange()      # the pixel padding in data units changed

    # ---- drawing --------------------------------------------------------------------------------
    def paint(self, p, *_args):
        if not len(self.xy):
            return
        pts = self.xy
        view = self.viewRect()
        if view is not None and not view.contains(self._bounds):   # cull what is out of view
            px = self.pixelLength(pg.Point(1, 0)) or 0.0
            py = self.pixelLength(pg.Point(0, 1)) or 0.0
            pad_x, pad_y = self.size * px, self.size * py
            keep = ((pts[:, 0] >= view.left() - pad_x) & (pts[:, 0] <= view.right() + pad_x)
                    & (pts[:, 1] >= view.top() - pad_y) & (pts[:, 1] <= view.bottom() + pad_y))
            pts = pts[keep]
        if not len(pts):
            return
        t = p.transform()                   # data -> device; affine in a ViewBox
        p.resetTransform()
        self._fragments.resize(len(pts))
        frags = self._fragments.ndarray()
        side = self.pixmap.width()
        frags[:, 0] = pts[:, 0] * t.m11() + pts[:, 1] * t.m21() + t.dx()   # centre of each dot
        frags[:, 1] = pts[:, 0] * t.m12() + pts[:, 1] * t.m22() + t.dy()
        np.clip(frags[:, 0:2], -2.0 ** 30, 2.0 ** 30, out=frags[:, 0:2])    # Qt faults beyond
        frags[:, 2:6] = (0, 0, side, side)          # the whole pixmap
        frags[:, 6:10] = (1.0, 1.0, 0.0, 1.0)       # scale x, scale y, rotation, opacity
        p.drawPixmapFragments(*self._fragments.drawargs(), self.pixmap)
