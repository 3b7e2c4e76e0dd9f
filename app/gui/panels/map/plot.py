"""The scatter of the corpus map: fast at 100k points.

One item per cluster (app/gui/panels/map/points.py: one pre-rendered dot stamped at every point, the
per-point work all NumPy; a ScatterPlotItem with a brush per point renders and looks up every
symbol on its own). Hover and click find the nearest point with one vectorised NumPy pass in screen pixels,
not pyqtgraph's per-point hit tests; a lasso selects the points inside it (even-odd rule).
"""
from __future__ import annotations

import textwrap

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal

from app.gui.panels.map.points import ClusterPoints
from app.gui.widgets.plot_legend import legend_below

POINT_PX = 5                # symbol size of a sentence
HOVER_PX = 8                # the pointer must be this close to a point to pick it
LASSO_STEP_PX = 3           # a lasso vertex every few pixels of mouse travel
TIP_WIDTH = 70              # characters per line in the hover box
LEGEND_ROWS = 4             # rows of the legend under the map; more clusters add columns
# Qualitative colours (Tableau 10); more clusters cycle through pyqtgraph's hues.
PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")


VALUE_BINS = 8              # colouring by a value: its range in this many shades (one item each)
UNFIRED = "#d9d9d9"         # a sentence whose value is 0 (a feature that never fires on it)


def cluster_colour(c: int, n: int):
    return pg.mkColor(PALETTE[c]) if n <= len(PALETTE) else pg.intColor(c, n, maxValue=220)


def nearest_row(xy: np.ndarray, x: float, y: float, px_w: float, px_h: float,
                radius_px: float = HOVER_PX) -> int:
    """Index of the point nearest (x, y) measured in screen pixels (px_w, px_h: data units per
    pixel), or -1 when none is within radius_px."""
    if xy is None or len(xy) == 0:
        return -1
    d2 = ((xy[:, 0] - x) / px_w) ** 2 + ((xy[:, 1] - y) / px_h) ** 2
    row = int(np.argmin(d2))
    return row if d2[row] <= radius_px ** 2 else -1


def inside_polygon(xy: np.ndarray, polygon: np.ndarray) -> np.ndarray:
    """Rows of xy (n, 2) inside the closed polygon (m, 2), even-odd rule, vectorised."""
    if len(polygon) < 3 or len(xy) == 0:
        return np.zeros(0, np.int64)
    lo, hi = polygon.min(axis=0), polygon.max(axis=0)
    cand = np.flatnonzero(np.all((xy >= lo) & (xy <= hi), axis=1))   # bounding box first
    x, y = xy[cand, 0], xy[cand, 1]
    inside = np.zeros(len(cand), bool)
    x1, y1 = polygon[:, 0], polygon[:, 1]
    x2, y2 = np.roll(x1, -1), np.roll(y1, -1)
    for ax, ay, bx, by in zip(x1, y1, x2, y2):
        crosses = (ay > y) != (by > y)
        if not crosses.any():
            continue
        with np.errstate(divide="ignore", invalid="ignore"):
            x_cross = ax + (bx - ax) * (y - ay) / (by - ay)
        inside ^= crosses & (x < x_cross)
    return cand[inside]


class MapViewBox(pg.ViewBox):
    """A ViewBox whose left-drag draws a lasso while lasso mode is on (else it pans)."""

    def __init__(self, on_lasso):
        super().__init__()
        self.lasso_mode = False
        self._on_lasso = on_lasso
        self._path: list = []
        self._curve = pg.PlotCurveItem(pen=pg.mkPen("#333333", width=1.5, style=Qt.PenStyle.DashLine))
        self._curve.setZValue(30)
        self.addItem(self._curve, ignoreBounds=True)

    def mouseDragEvent(self, ev, axis=None):
        if not self.lasso_mode or ev.button() != Qt.MouseButton.LeftButton:
            super().mouseDragEvent(ev, axis)
            return
        ev.accept()
        if ev.isStart():
            self._path = []
        p = self.mapSceneToView(ev.scenePos())
        last = self._path[-1] if self._path else None
        px_w, px_h = self.viewPixelSize()
        if last is None or abs(p.x() - last[0]) / px_w + abs(p.y() - last[1]) / px_h >= LASSO_STEP_PX:
            self._path.append((p.x(), p.y()))
        ring = np.array(self._path + self._path[:1], float)
        self._curve.setData(ring[:, 0], ring[:, 1])
        if ev.isFinish():
            self._curve.setData([], [])
            self._on_lasso(np.array(self._path, float))
            self._path = []


class MapPlot(pg.PlotWidget):
    """The map scatter. Rows are positions in the arrays given to set_points."""

    hovered = Signal(int)          # row under the pointer, -1 for none
    clicked = Signal(int)          # row clicked, -1 for empty space
    lassoed = Signal(object)       # np.ndarray of rows inside a finished lasso

    def __init__(self, parent=None):
        vb = MapViewBox(self.lasso)
        super().__init__(parent, viewBox=vb, background="w")
        self.vb = vb
        self.setObjectName("map_plot")
        self.setMenuEnabled(False)
        self.hideButtons()
        self.legend = legend_below(self, labelTextSize="8pt")       # under the map: never over a point
        self.xy = np.zeros((0, 2), np.float32)
        self.cluster_items: list = []
        self.cluster_labels: list = []    # each cluster's name, written at its middle on the map
        self.value_items: list = []       # colouring by a value (a feature): one item per shade
        self._hover_row = -1
        self.lassoed_marks = ClusterPoints(np.zeros((0, 2)), "#444444", 9, ring=True)
        self.selected = pg.ScatterPlotItem(size=13, pen=pg.mkPen("#000000", width=2), brush=None)
        self.hits = pg.ScatterPlotItem(size=11, pen=pg.mkPen("#d62728", width=2), brush=None)
        self.query = pg.ScatterPlotItem(size=20, symbol="star", pen=pg.mkPen("#000000", width=1),
                                        brush=pg.mkBrush("#ffd400"))
        self.tip = pg.TextItem(anchor=(0, 1), color="#000000", fill=pg.mkBrush(255, 255, 240, 235),
                               border=pg.mkPen("#888888"))
        for z, item in enumerate((self.lassoed_marks, self.hits, self.selected, self.query, self.tip)):
            item.setZValue(20 + z)
            self.vb.addItem(item, ignoreBounds=True)
        self.tip.hide()
        self.scene().sigMouseMoved.connect(self._on_move)
        self.scene().sigMouseClicked.connect(self._on_click)

    # ---- data -------------------------------------------------------------------------------
    def set_points(self, xy: np.ndarray, cluster: np.ndarray, labels: list) -> None:
        """Draw xy (n, 2) coloured by cluster; labels[c] names cluster c in the legend."""
        self.clear_points()
        self.xy = np.asarray(xy, np.float32)
        n = len(labels)
        order = np.argsort(cluster, kind="stable")
        bounds = np.searchsorted(cluster[order], np.arange(n + 1))
        for c in range(n):
            rows = order[bounds[c]:bounds[c + 1]]
            item = ClusterPoints(self.xy[rows], cluster_colour(c, n), POINT_PX)
            item.rows = rows               # which map rows it draws (hidden via the legend)
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            self.vb.addItem(item)
            self.cluster_items.append(item)
            self.legend.addItem(item, labels[c])
            self._name_cluster(item, labels[c], cluster_colour(c, n))
        self.legend.setColumnCount(max(4, -(-n // LEGEND_ROWS)))     # every cluster is named
        self.vb.autoRange(padding=0.04)

    def _name_cluster(self, item, name: str, colour) -> None:
        """The cluster's name on the map, at the median of its points (the legend alone sat over
        the points and named them far from where they are); hidden with the cluster."""
        if not len(item.rows):
            return
        label = pg.TextItem(str(name), anchor=(0.5, 0.5), color="#111111",
                            fill=pg.mkBrush(255, 255, 255, 190), border=pg.mkPen(colour, width=2))
        label.setPos(*np.median(self.xy[item.rows], axis=0).tolist())
        label.setZValue(15)
        label.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
        self.vb.addItem(label, ignoreBounds=True)
        item.visibleChanged.connect(lambda i=item, t=label: t.setVisible(i.isVisible()))
        self.cluster_labels.append(label)

    def set_values(self, values) -> None:
        """Colour the points by ``values`` (n,), 0 grey and the largest the darkest shade, in place of
        the clusters; None: the clusters again."""
        for item in self.value_items:
            self.vb.removeItem(item)
        self.value_items = []
        on = values is not None and len(values) == len(self.xy)
        for item in self.cluster_items + self.cluster_labels:
            item.setVisible(not on)
        self.legend.setVisible(not on)
        if not on:
            return
        values = np.asarray(values, np.float32)
        top = float(values.max(initial=0.0))
        shade = np.zeros(len(values), np.int64) if top <= 0 else np.ceil(values / top * VALUE_BINS).astype(np.int64)
        colours = pg.colormap.get("CET-L8")     # light to dark: the strongest stands out
        for b in range(VALUE_BINS + 1):
            rows = np.flatnonzero(shade == b)
            if not len(rows):
                continue
            colour = pg.mkColor(UNFIRED) if b == 0 else colours.map(0.25 + 0.75 * b / VALUE_BINS, mode="qcolor")
            item = ClusterPoints(self.xy[rows], colour, POINT_PX)
            item.rows = rows
            item.setAcceptedMouseButtons(Qt.MouseButton.NoButton)
            item.setZValue(b)                      # the strongest on top
            self.vb.addItem(item)
            self.value_items.append(item)

    def clear_points(self) -> None:
        self.set_values(None)
        for item in self.cluster_items + self.cluster_labels:
            self.vb.removeItem(item)
        self.cluster_items, self.cluster_labels = [], []
        self.legend.clear()
        self.xy = np.zeros((0, 2), np.float32)
        self.mark_lassoed([])
        for item in (self.selected, self.hits, self.query):
            item.setData([], [])
        self.tip.hide()
        self._hover_row = -1

    def mark_selected(self, row: int) -> None:
        self._mark(self.selected, [row] if row >= 0 else [])

    def mark_lassoed(self, rows) -> None:
        """Ring the rows of a lasso selection (one item: fast for many rows)."""
        self.vb.removeItem(self.lassoed_marks)
        rows = np.asarray(rows, np.int64)
        self.lassoed_marks = ClusterPoints(self.xy[rows], "#444444", 9, ring=True)
        self.lassoed_marks.setZValue(20)
        self.vb.addItem(self.lassoed_marks, ignoreBounds=True)

    def mark_hits(self, rows) -> None:
        self._mark(self.hits, rows)

    def mark_query(self, xy) -> None:
        """Put the query's star at xy (2,), or remove it (None)."""
        if xy is None:
            self.query.setData([], [])
        else:
            self.query.setData([float(xy[0])], [float(xy[1])])

    def _mark(self, item, rows) -> None:
        rows = np.asarray(list(rows), np.int64)
        item.setData(self.xy[rows, 0], self.xy[rows, 1]) if len(rows) else item.setData([], [])

    # ---- pointer ------------------------------------------------------------------------------
    def visible_rows(self):
        """Rows of the clusters shown (a legend click hides one), or None when all are."""
        if all(item.isVisible() for item in self.cluster_items):
            return None
        parts = [item.rows for item in self.cluster_items if item.isVisible()]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def row_at(self, scene_pos) -> int:
        """The row drawn at a scene position (within HOVER_PX), or -1."""
        if not self.vb.sceneBoundingRect().contains(scene_pos):
            return -1
        p = self.vb.mapSceneToView(scene_pos)
        px_w, px_h = self.vb.viewPixelSize()
        rows = self.visible_rows()
        if rows is None:
            return nearest_row(self.xy, p.x(), p.y(), px_w, px_h)
        found = nearest_row(self.xy[rows], p.x(), p.y(), px_w, px_h)
        return int(rows[found]) if found >= 0 else -1

    def scene_pos_of(self, row: int) -> QPointF:
        """Where row is drawn, in scene coordinates (for tests and the hover box)."""
        return self.vb.mapViewToScene(QPointF(float(self.xy[row, 0]), float(self.xy[row, 1])))

    def show_tip(self, row: int, text: str) -> None:
        if row < 0:
            self.tip.hide()
            return
        x, y = float(self.xy[row, 0]), float(self.xy[row, 1])
        room = self.vb.sceneBoundingRect().width() - 8
        width = TIP_WIDTH
        while True:                           # narrower lines where the plot is narrower than the box
            self.tip.setText("\n".join(textwrap.wrap(text, width)[:6]))
            if width <= 12 or self.tip.textItem.boundingRect().width() <= room:
                break
            width = int(width * 0.85)
        view = self.vb.viewRect()             # open the box towards the middle of the view
        self.tip.setAnchor((1 if x > view.center().x() else 0, 1 if y < view.center().y() else 0))
        self.tip.setPos(x, y)
        self.tip.show()
        self._keep_tip_inside()

    def tip_scene_rect(self):
        """The hover box as drawn, in scene coordinates."""
        return self.tip.mapRectToScene(self.tip.boundingRect())

    def _keep_tip_inside(self) -> None:
        """A box opened towards the middle can still be wider than the room on that side (a long
        sentence, a small window): slide it back inside the plot, never cut off."""
        self.tip.updateTransform(force=True)
        box, area = self.tip_scene_rect(), self.vb.sceneBoundingRect()
        dx = max(area.left() - box.left(), 0.0) or -max(box.right() - area.right(), 0.0)
        dy = max(area.top() - box.top(), 0.0) or -max(box.bottom() - area.bottom(), 0.0)
        if dx or dy:
            anchor = self.vb.mapViewToScene(self.tip.pos())
            self.tip.setPos(self.vb.mapSceneToView(anchor + QPointF(dx, dy)))
            self.tip.updateTransform(force=True)

    def _on_move(self, scene_pos) -> None:
        row = self.row_at(scene_pos)
        if row != self._hover_row:
            self._hover_row = row
            self.hovered.emit(row)

    def _on_click(self, ev) -> None:
        if ev.button() == Qt.MouseButton.LeftButton and not ev.double():
            self.clicked.emit(self.row_at(ev.scenePos()))

    def lasso(self, polygon: np.ndarray) -> None:
        rows = self.visible_rows()
        if rows is None:
            self.lassoed.emit(inside_polygon(self.xy, polygon))
        else:
            self.lassoed.emit(np.sort(rows[inside_polygon(self.xy[rows], polygon)]))
