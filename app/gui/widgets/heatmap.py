"""A reusable token x token heatmap: pyqtgraph ImageItem + ColorBarItem + token labels.

    hm = HeatmapWidget()
    hm.set_matrix(matrix, row_labels, col_labels, title="Layer 3, head 5")
    hm.hovered.connect(lambda i, j, v: ...)      # query row i, key column j, weight v
    hm.cell_clicked.connect(lambda i, j: ...)
    hm.set_show_values(True)                     # numbers in the cells (small matrices)
    hm.save_png(path)

Rows are queries (top to bottom), columns are keys (left to right), as in the attention
matrix ``A[i, j]`` = how much query i attends to key j. Token labels sit on the left (rows)
and on top (columns, written vertically); when the tokens do not fit, every k-th one is
labelled and zooming in (mouse wheel) brings the others back.
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.widgets.cell_format import CellFormat
from app.gui.widgets.plot_title import fitted_title
from app.gui.widgets.token_axis import TokenAxis

COLORMAPS = {"Blues": "blues", "Viridis": "viridis", "Inferno": "inferno", "Magma": "magma",
             "Greys": "CET-L1"}
# ColorBrewer "Blues" (as in matplotlib): white for 0, deep blue for the largest weight.
BLUES = ["#f7fbff", "#deebf7", "#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b"]
DEFAULT_COLORMAP = "Blues"
MIN_CELL_PX_FOR_VALUES = 22   # numbers are written in cells at least this many pixels wide (zoom in)
TOOLTIP_STAYS_MS = 600_000    # a cell's tooltip stays while the mouse rests on it (Qt's default: ~10 s)


def colormap(name: str) -> pg.ColorMap:
    key = COLORMAPS.get(name, name)
    if key == "blues":
        return pg.ColorMap(np.linspace(0, 1, len(BLUES)), [QtGui.QColor(c) for c in BLUES], name="Blues")
    cmap = pg.colormap.get(key)
    if key == "CET-L1":     # light-to-dark reads better on a light theme: 0 = white
        cmap = cmap.reverse() if _starts_dark(cmap) else cmap
    return cmap


def _starts_dark(cmap: pg.ColorMap) -> bool:
    c = cmap.map(np.array([0.0]), mode="float")[0]
    return float(np.dot(c[:3], [0.299, 0.587, 0.114])) < 0.5


def palette_colors(widget: QtWidgets.QWidget | None = None) -> tuple[QtGui.QColor, QtGui.QColor]:
    """(background, foreground) from the application palette, so plots follow light/dark themes."""
    pal = widget.palette() if widget is not None else QtWidgets.QApplication.palette()
    return pal.color(QtGui.QPalette.ColorRole.Base), pal.color(QtGui.QPalette.ColorRole.Text)


class CellValues(pg.GraphicsObject):
    """Every cell's number, drawn by ONE item in one paint() call (1000s of TextItems would take
    seconds). Only visible cells at least MIN_CELL_PX_FOR_VALUES wide are written, so zooming
    into a long text brings its numbers in."""

    def __init__(self):
        super().__init__()
        self.values = np.zeros((0, 0), np.float32)
        self.dark = np.zeros((0, 0), bool)
        self.format = CellFormat(decimals=2)
        self.drawn = 0
        self.drawn_texts: dict[tuple[int, int], str] = {}   # (row, column) -> the text last painted
        self.setZValue(10)

    def set_values(self, values: np.ndarray, dark: np.ndarray) -> None:
        self.prepareGeometryChange()
        self.values, self.dark = values, dark
        self.format = CellFormat.for_matrix(values)
        self.update()

    def too_small(self) -> bool:
        """Whether the cells are drawn too small to hold a number (the view must say so)."""
        vb = self.getViewBox()
        if vb is None or not self.values.size:
            return False
        r, size = vb.viewRect(), vb.size()
        if r.width() <= 0 or r.height() <= 0:
            return False
        return min(size.width() / r.width(), size.height() / r.height()) < MIN_CELL_PX_FOR_VALUES

    def boundingRect(self):
        rows, cols = self.values.shape
        return QtCore.QRectF(-0.5, -0.5, cols, rows)

    def paint(self, p, *args):
        self.drawn = 0
        self.drawn_texts = {}
        rows, cols = self.values.shape
        vb = self.getViewBox()
        if not rows or vb is None:
            return
        t = p.transform()
        cell_w, cell_h = abs(t.m11()), abs(t.m22())
        if min(cell_w, cell_h) < MIN_CELL_PX_FOR_VALUES:
            return
        r = vb.viewRect()
        j0, j1 = max(0, int(np.floor(r.left() + 0.5))), min(cols - 1, int(np.ceil(r.right() - 0.5)))
        i0, i1 = max(0, int(np.floor(r.top() + 0.5))), min(rows - 1, int(np.ceil(r.bottom() - 0.5)))
        p.save()
        p.resetTransform()
        font = QtGui.QFont()
        font.setPixelSize(int(max(8, min(13, cell_h * 0.42, cell_w * 0.3))))
        p.setFont(font)
        white, black = QtGui.QColor("white"), QtGui.QColor("#111111")
        align = int(QtCore.Qt.AlignmentFlag.AlignCenter)
        for i in range(i0, i1 + 1):
            for j in range(j0, j1 + 1):
                text = self.format.text(self.values[i, j])
                c = t.map(QtCore.QPointF(j, i))
                p.setPen(white if self.dark[i, j] else black)
                p.drawText(QtCore.QRectF(c.x() - cell_w / 2, c.y() - cell_h / 2, cell_w, cell_h), align, text)
                self.drawn += 1
                self.drawn_texts[i, j] = text
        p.restore()


MARK_LO = 0.24      # a marked cell's cross spans its corner from here (cell units) to the frame


class HeatmapWidget(pg.GraphicsLayoutWidget):
    """One attention matrix: rows = queries, columns = keys, with token labels and a colour bar."""

    hovered = QtCore.Signal(int, int, float)     # row, column, value (-1, -1, nan when leaving)
    cell_clicked = QtCore.Signal(int, int)
    arrow_key = QtCore.Signal(int)               # Qt.Key_Left/Right/Up/Down, for layer/head stepping

    def __init__(self, parent=None, colormap_name: str = DEFAULT_COLORMAP, row_title="query",
                 col_title="key"):
        bg, fg = palette_colors(parent)
        super().__init__(parent, border=False)
        self.setBackground(bg)
        self.fg = fg
        self.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.positions: list[int] = []      # each row's token index in the whole sentence (hidden tokens skipped)
        self.show_values = False
        self._hover = (-1, -1)

        self.left_axis = TokenAxis("left")
        self.top_axis = TokenAxis("top")
        for ax in (self.left_axis, self.top_axis):
            ax.setPen(pg.mkPen(fg))
            ax.setTextPen(pg.mkPen(fg))
            ax.enableAutoSIPrefix(False)          # tokens, not quantities: never "query (x0.001)"
        self.plot = self.addPlot(row=0, col=0, axisItems={"left": self.left_axis, "top": self.top_axis})
        self.plot.showAxes((True, True, False, False), showValues=(True, True, False, False))
        self.plot.invertY(True)
        self.plot.setDefaultPadding(0.0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(False)
        self.plot.vb.setMouseEnabled(x=True, y=True)
        self.plot.vb.setLimits(minXRange=3, minYRange=3)
        title_style = {"color": fg.name(), "size": "10pt"}
        fitted_title(self.plot)                 # a long title shrinks or wraps, never widens the plot
        self.plot.setTitle("", **title_style)
        self._title_style = title_style
        self.left_axis.setLabel(row_title, color=fg.name())
        self.top_axis.setLabel(col_title, color=fg.name())

        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setTransform(QtGui.QTransform().translate(-0.5, -0.5))   # cell (i, j) centred on (j, i)
        self.plot.addItem(self.image)
        self.values_item = CellValues()
        self.values_item.hide()
        self.plot.addItem(self.values_item, ignoreBounds=True)
        self.cmap_name = colormap_name
        self.colorbar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=colormap(colormap_name), width=14,
                                        interactive=False, pen=pg.mkPen(fg),
                                        colorMapMenu=False)
        self.colorbar.setImageItem(self.image)
        self.colorbar.getAxis("right").setPen(pg.mkPen(fg))
        self.colorbar.getAxis("right").setTextPen(pg.mkPen(fg))
        self.colorbar.getAxis("right").enableAutoSIPrefix(False)
        self.colorbar.getAxis("right").setLabel("weight", color=fg.name())
        # as wide as its tick numbers and title need: a fixed width dropped "−0.0004" and overlapped the title
        self.colorbar.getAxis("right").setWidth(None)
        self.addItem(self.colorbar, row=0, col=1)

        # hover + click
        self.cursor = QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        cpen = pg.mkPen("#d62728", width=2)
        cpen.setCosmetic(True)
        self.cursor.setPen(cpen)
        self.cursor.setZValue(20)
        self.cursor.hide()
        self.plot.addItem(self.cursor, ignoreBounds=True)
        self.row_band = QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        self.row_band.setPen(QtGui.QPen(QtCore.Qt.PenStyle.NoPen))
        self.row_band.setBrush(QtGui.QColor(214, 39, 40, 28))
        self.row_band.setZValue(15)
        self.row_band.hide()
        self.plot.addItem(self.row_band, ignoreBounds=True)
        self.marks = QtWidgets.QGraphicsPathItem()      # cells marked (an attention edge cut): a cross
        mpen = pg.mkPen("#111111", width=2)
        mpen.setCosmetic(True)
        self.marks.setPen(mpen)
        self.marks.setZValue(18)
        self.plot.addItem(self.marks, ignoreBounds=True)
        self.marked: list[tuple[int, int]] = []
        self.click_hint = ""                            # said in the tooltip: what a click does
        self.placeholder = pg.TextItem("", color=fg.name(), anchor=(0.5, 0.5))
        self.plot.addItem(self.placeholder, ignoreBounds=True)
        self.plot.vb.setRange(xRange=(-0.5, 0.5), yRange=(-0.5, 0.5), padding=0)
        # said under the plot while Numbers is on but the cells are too small to write them in
        self.values_hint = pg.LabelItem("", color=fg.name(), size="9pt")
        self._hint_shown = False
        self.plot.vb.sigRangeChanged.connect(self._range_changed)
        self.mouse_proxy = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=60, slot=self._mouse_moved)
        self.scene().sigMouseClicked.connect(self._mouse_clicked)

    def sizeHint(self) -> QtCore.QSize:
        """Its minimum height, not QGraphicsView's (its scene's, i.e. its own last size): on a
        page that scrolls, that hint made the page a little taller at each step shown and never
        gave the height back, so a 13 x 13 matrix that fits needed a scroll. The layout's stretch
        gives the rest of the height."""
        hint = super().sizeHint()
        return QtCore.QSize(hint.width(), max(self.minimumHeight(), 120))

    # ---- data -----------------------------------------------------------------------------
    def set_matrix(self, matrix, row_labels, col_labels=None, title: str = "", levels=None,
                   positions=None) -> None:
        """``positions``: each row's (and column's) index in the whole sentence when some tokens
        are hidden, so that a token keeps its number whether [CLS]/[SEP] are shown or not."""
        m = np.asarray(matrix, dtype=np.float32)
        col_labels = list(row_labels if col_labels is None else col_labels)
        if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
            raise ValueError(f"matrix {m.shape} does not match {len(row_labels)} x {len(col_labels)} labels")
        self.matrix = m
        self.positions = [int(p) for p in positions] if positions is not None else list(range(m.shape[0]))
        self.placeholder.setText("")
        self.row_labels = [str(t) for t in row_labels]
        self.col_labels = [str(t) for t in col_labels]
        self.left_axis.set_labels(self.row_labels)
        self.top_axis.set_labels(self.col_labels)
        self.plot.setTitle(title, **self._title_style)
        if not title:
            self.plot.setTitle(None)          # no title, no empty 30 px row: the rows get the height
        if m.size:
            lo, hi = levels if levels is not None else (0.0, float(np.nanmax(m)))
            hi = hi if hi > lo else lo + 1e-6
        else:
            lo, hi = 0.0, 1.0
        self.image.setImage(m if m.size else np.zeros((1, 1), np.float32), autoLevels=False)
        self.colorbar.setLevels((lo, hi))
        rows, cols = m.shape
        # zoom stops at 3 cells, or the whole matrix when it has fewer (one column fills the plot)
        self.plot.vb.setLimits(xMin=-0.5, xMax=max(cols, 1) - 0.5, yMin=-0.5, yMax=max(rows, 1) - 0.5,
                               minXRange=min(3, max(cols, 1)), minYRange=min(3, max(rows, 1)))
        self.plot.vb.setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0)
        self._set_hover(-1, -1, emit=False)
        self.set_marks([])
        self._update_values()

    def set_marks(self, cells) -> None:
        """A frame round each (row, column) of ``cells``, with a small cross in its top-right corner
        (those outside the matrix are skipped): the cell's number stays readable in the middle."""
        rows, cols = self.matrix.shape
        self.marked = [(i, j) for i, j in cells if 0 <= i < rows and 0 <= j < cols]
        path = QtGui.QPainterPath()
        for i, j in self.marked:
            for (x0, y0), (x1, y1) in (((MARK_LO, -0.42), (0.42, -MARK_LO)), ((MARK_LO, -MARK_LO), (0.42, -0.42))):
                path.moveTo(j + x0, i + y0)
                path.lineTo(j + x1, i + y1)
            path.addRect(QtCore.QRectF(j - 0.45, i - 0.45, 0.9, 0.9))
        self.marks.setPath(path)

    def set_placeholder(self, text: str) -> None:
        """A message in the middle of the empty plot (before the first matrix)."""
        self.placeholder.setText(text)
        self.placeholder.setPos(0, 0)

    def set_colormap(self, name: str) -> None:
        self.cmap_name = name
        self.colorbar.setColorMap(colormap(name))
        self._update_values()

    def levels(self) -> tuple[float, float]:
        return tuple(float(v) for v in self.colorbar.levels())

    def drawn_matrix(self) -> np.ndarray:
        """The array the ImageItem is drawing (for tests and exports)."""
        return np.asarray(self.image.image)

    # ---- numbers in cells ---------------------------------------------------------------------
    def set_show_values(self, on: bool) -> None:
        self.show_values = bool(on)
        self._update_values()

    def values_shown(self) -> bool:
        return self.values_item.isVisible() and self.values_item.drawn > 0

    def _update_values(self) -> None:
        m = self.matrix
        on = self.show_values and m.size > 0
        self.values_item.setVisible(on)
        if on:
            lo, hi = self.levels()
            rgb = colormap(self.cmap_name).map(np.clip((m - lo) / max(hi - lo, 1e-12), 0, 1).ravel(),
                                               mode="float")[:, :3]
            dark = (rgb @ np.array([0.299, 0.587, 0.114])).reshape(m.shape) < 0.55
            self.values_item.set_values(self.cell_values(), dark)
        self._refresh_values_hint()

    def cell_values(self) -> np.ndarray:
        """The numbers written in the cells: the matrix itself (a subclass may draw colours from a
        cleaned copy and write the raw values, −∞ included)."""
        return self.matrix

    def values_too_small(self) -> bool:
        """Numbers are on but the cells are too small to write them in (zoom in)."""
        return getattr(self, "show_values", False) and self.values_item.too_small()

    def _refresh_values_hint(self) -> None:
        if not hasattr(self, "values_hint"):
            return                          # a resize while __init__ still builds the plot
        show = self.values_too_small()
        if show == self._hint_shown:
            return
        self._hint_shown = show
        if show:
            self.values_hint.setText(f"Cells are under {MIN_CELL_PX_FOR_VALUES} px: too small for numbers. "
                                     "Zoom in (mouse wheel) or hover a cell to read it.")
            self.addItem(self.values_hint, row=1, col=0, colspan=2)
        else:
            self.removeItem(self.values_hint)

    def _range_changed(self, *_):
        self._refresh_values_hint()

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        self._refresh_values_hint()

    def close(self):
        # the scene's items are deleted next: nothing may ask them for their size after that
        self.plot.vb.sigRangeChanged.disconnect(self._range_changed)
        if not self._hint_shown:
            self.values_hint.deleteLater()
        del self.values_hint
        return super().close()

    # ---- hover / click ------------------------------------------------------------------------
    def cell_at(self, scene_pos) -> tuple[int, int]:
        if not self.matrix.size or not self.plot.sceneBoundingRect().contains(scene_pos):
            return -1, -1
        p = self.plot.vb.mapSceneToView(scene_pos)
        i, j = int(round(p.y())), int(round(p.x()))
        if 0 <= i < self.matrix.shape[0] and 0 <= j < self.matrix.shape[1]:
            return i, j
        return -1, -1

    def tooltip_text(self, i: int, j: int) -> str:
        v = float(self.matrix[i, j])
        return (f"query <b>{html.escape(self.row_labels[i])}</b> (token {self.positions[i]})<br>"
                f"key <b>{html.escape(self.col_labels[j])}</b> (token {self.positions[j]})<br>"
                f"weight <b>{v:.4f}</b>"
                + (" · <b>cut</b>" if (i, j) in self.marked else "")
                + (f"<br><i>{self.click_hint}</i>" if self.click_hint else ""))

    def _mouse_moved(self, evt) -> None:
        pos = evt[0]
        i, j = self.cell_at(pos)
        self._set_hover(i, j)
        if i >= 0:
            gp = self.mapToGlobal(self.mapFromScene(pos))
            QtWidgets.QToolTip.showText(gp + QtCore.QPoint(14, 10), self.tooltip_text(i, j), self,
                                        QtCore.QRect(), TOOLTIP_STAYS_MS)
        else:
            QtWidgets.QToolTip.hideText()

    def hover(self, i: int, j: int) -> None:
        """Programmatic hover (keyboard, tests)."""
        self._set_hover(i, j)

    def _set_hover(self, i: int, j: int, emit: bool = True) -> None:
        if (i, j) == self._hover:
            return
        self._hover = (i, j)
        if i >= 0:
            self.cursor.setRect(QtCore.QRectF(j - 0.5, i - 0.5, 1, 1))
            self.cursor.show()
            self.row_band.setRect(QtCore.QRectF(-0.5, i - 0.5, self.matrix.shape[1], 1))
            self.row_band.show()
        else:
            self.cursor.hide()
            self.row_band.hide()
        self.left_axis.set_highlight(i if i >= 0 else None)
        self.top_axis.set_highlight(j if j >= 0 else None)
        if emit:
            self.hovered.emit(i, j, float(self.matrix[i, j]) if i >= 0 else float("nan"))

    def _mouse_clicked(self, ev) -> None:
        if ev.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        i, j = self.cell_at(ev.scenePos())
        if i >= 0:
            self.cell_clicked.emit(i, j)

    def viewportEvent(self, ev):
        # the cell's tooltip is shown on mouse moves; QGraphicsView's own tooltip event (a resting
        # mouse, ~1 s later) asks the scene, whose items have none, and would hide it
        if ev.type() == QtCore.QEvent.Type.ToolTip:
            return True
        return super().viewportEvent(ev)

    def leaveEvent(self, ev):
        self._set_hover(-1, -1)
        super().leaveEvent(ev)

    def keyPressEvent(self, ev):
        if ev.key() in (QtCore.Qt.Key.Key_Left, QtCore.Qt.Key.Key_Right, QtCore.Qt.Key.Key_Up,
                        QtCore.Qt.Key.Key_Down) and not ev.modifiers():
            self.arrow_key.emit(int(ev.key()))
            ev.accept()
            return
        if ev.key() == QtCore.Qt.Key.Key_Home:
            self.reset_zoom()
            ev.accept()
            return
        super().keyPressEvent(ev)

    def reset_zoom(self) -> None:
        rows, cols = self.matrix.shape
        self.plot.vb.setRange(xRange=(-0.5, cols - 0.5), yRange=(-0.5, rows - 0.5), padding=0)

    def mouseDoubleClickEvent(self, ev):
        self.reset_zoom()
        super().mouseDoubleClickEvent(ev)

    # ---- export ---------------------------------------------------------------------------
    def save_png(self, path, scale: float = 2.0) -> bool:
        """The view as drawn (labels, colour bar, title), at ``scale`` x the screen size."""
        size = self.size()
        img = QtGui.QImage(int(size.width() * scale), int(size.height() * scale),
                           QtGui.QImage.Format.Format_ARGB32)
        img.fill(self.backgroundBrush().color())
        painter = QtGui.QPainter(img)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing)
        self.render(painter, QtCore.QRectF(img.rect()), self.viewport().rect())
        painter.end()
        return img.save(str(path), "PNG")
