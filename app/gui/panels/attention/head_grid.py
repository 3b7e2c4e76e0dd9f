"""All heads at once: a layers x heads grid of small attention maps (BertViz's "model view").

Drawn as ONE ImageItem holding a mosaic of the L*H maps (colour-mapped to RGBA in numpy, with
background-coloured gutters between them), rather than one PlotWidget per head: a single
texture upload and one paint, however many heads there are. See bench/attention_render.py.

    grid = HeadGrid()
    grid.set_attentions(attentions, tokens)      # (L, H, T, T)
    grid.head_clicked.connect(lambda layer, head: ...)
    grid.set_selected(layer, head)
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.widgets.heatmap import DEFAULT_COLORMAP, colormap, palette_colors

MAX_CELL = 96      # a head wider than this many tokens is block-averaged down to it for the grid
GUTTER_FRACTION = 0.08


def downsample(a: np.ndarray, size: int) -> np.ndarray:
    """Block-average the last two axes (T, T) down to at most ``size`` x ``size``."""
    T = a.shape[-1]
    if T <= size:
        return a
    f = -(-T // size)                        # ceil(T / size): block side
    n = -(-T // f)
    pad = n * f - T
    if pad:
        a = np.pad(a, [(0, 0)] * (a.ndim - 2) + [(0, pad), (0, pad)])
        # mean over the real entries only: divide by the count of non-padding cells per block
        ones = np.pad(np.ones((T, T), np.float32), [(0, pad), (0, pad)])
        counts = ones.reshape(n, f, n, f).sum(axis=(1, 3))
    else:
        counts = float(f * f)
    shape = a.shape[:-2] + (n, f, n, f)
    return a.reshape(shape).sum(axis=(-3, -1)) / counts


def mosaic_rgba(attentions: np.ndarray, lut: np.ndarray, background, per_head: bool = True,
                max_cell: int = MAX_CELL) -> tuple[np.ndarray, int, int]:
    """(L, H, T, T) -> RGBA uint8 mosaic (rows = layers, columns = heads), cell size, gutter.

    ``per_head``: scale each head to its own maximum (shows the pattern of weak heads too);
    otherwise one scale 0..max over all heads.
    """
    a = np.asarray(attentions, dtype=np.float32)
    L, H, T, _ = a.shape
    cells = downsample(a, max_cell)
    c = cells.shape[-1]
    g = max(1, int(round(c * GUTTER_FRACTION)))
    if per_head:
        top = cells.max(axis=(-2, -1), keepdims=True)
    else:
        top = np.full((1, 1, 1, 1), cells.max())
    top = np.where(top > 0, top, 1.0)
    idx = np.clip(cells / top * (len(lut) - 1) + 0.5, 0, len(lut) - 1).astype(np.intp)
    rgba = lut[idx]                                                   # (L, H, c, c, 4)
    out = np.empty((L, c + g, H, c + g, 4), dtype=np.uint8)
    out[...] = np.asarray(background, dtype=np.uint8)
    out[:, :c, :, :c] = rgba.transpose(0, 2, 1, 3, 4)
    out = out.reshape(L * (c + g), H * (c + g), 4)[: L * (c + g) - g, : H * (c + g) - g]
    return np.ascontiguousarray(out), c, g


class HeadGrid(pg.GraphicsLayoutWidget):
    head_clicked = QtCore.Signal(int, int)       # layer, head (0-based)
    head_hovered = QtCore.Signal(int, int)       # -1, -1 when leaving

    def __init__(self, parent=None, colormap_name: str = DEFAULT_COLORMAP):
        bg, fg = palette_colors(parent)
        super().__init__(parent, border=False)
        self.setBackground(bg)
        self.bg, self.fg = bg, fg
        self.cmap_name = colormap_name
        self.per_head = True
        self.attentions = np.zeros((0, 0, 0, 0), np.float32)
        self.tokens: list[str] = []
        self.cell = self.gutter = 0
        self.selected = (-1, -1)
        self._hover = (-1, -1)
        self._top_links = None

        self.plot = self.addPlot(row=0, col=0)
        self.plot.showAxes((True, True, False, False), showValues=(True, True, False, False), size=28)
        for side in ("left", "top"):
            ax = self.plot.getAxis(side)
            ax.setPen(pg.mkPen(fg))
            ax.setTextPen(pg.mkPen(fg))
            ax.setStyle(tickLength=0)
        self.plot.getAxis("left").setLabel("layer", color=fg.name())
        self.plot.getAxis("top").setLabel("head", color=fg.name())
        self.plot.invertY(True)
        self.plot.setAspectLocked(True)
        self.plot.setDefaultPadding(0.0)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.vb.setMouseEnabled(x=False, y=False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.plot.vb.sigResized.connect(self._tick)     # a narrower grid labels fewer heads
        for side in ("left", "top"):
            self.plot.getAxis(side).enableAutoSIPrefix(False)   # numbers of heads, never "(x0.001)"

        def outline(color, width, z):
            item = QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
            pen = pg.mkPen(color, width=width)
            pen.setCosmetic(True)
            item.setPen(pen)
            item.setZValue(z)
            item.hide()
            self.plot.addItem(item, ignoreBounds=True)
            return item

        self.hover_box = outline("#ff7f0e", 2, 10)
        self.select_box = outline("#d62728", 3, 11)
        self.scene().sigMouseClicked.connect(self._clicked)
        self.mouse_proxy = pg.SignalProxy(self.scene().sigMouseMoved, rateLimit=60, slot=self._moved)
        self.setMouseTracking(True)

    # ---- data ----------------------------------------------------------------------------------
    def set_attentions(self, attentions, tokens=None) -> None:
        a = np.asarray(attentions, dtype=np.float32)
        if a.ndim != 4:
            raise ValueError(f"attentions must be (layers, heads, T, T), not {a.shape}")
        self.attentions = a
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(a.shape[-1])]
        self._top_links = None
        self._redraw()

    def set_per_head_scale(self, on: bool) -> None:
        self.per_head = bool(on)
        self._redraw()

    def set_colormap(self, name: str) -> None:
        self.cmap_name = name
        self._redraw()

    def grid_shape(self) -> tuple[int, int]:
        """(layers, heads) shown."""
        return self.attentions.shape[:2] if self.attentions.ndim == 4 else (0, 0)

    def cell_count(self) -> int:
        L, H = self.grid_shape()
        return L * H

    def _redraw(self) -> None:
        a = self.attentions
        if a.size == 0:
            self.image.clear()
            return
        L, H = a.shape[:2]
        lut = colormap(self.cmap_name).getLookupTable(0.0, 1.0, 256, alpha=True)
        bg = (self.bg.red(), self.bg.green(), self.bg.blue(), 255)
        rgba, self.cell, self.gutter = mosaic_rgba(a, lut, bg, per_head=self.per_head)
        self.image.setImage(rgba, autoLevels=False, levels=None)
        self.plot.vb.setRange(xRange=(0, rgba.shape[1]), yRange=(0, rgba.shape[0]), padding=0.01)
        self._tick()
        self._place(self.select_box, *self.selected)
        self._place(self.hover_box, -1, -1)

    def tick_every(self) -> tuple[int, int]:
        """(layers, heads): label every k-th one, so that numbers never touch ("9101112")."""
        L, H = self.grid_shape()
        if not L or not self.cell:
            return 1, 1
        step = self.cell + self.gutter
        vb = self.plot.vb
        (x0, x1), (y0, y1) = vb.viewRange()
        px_x = step * vb.width() / max(x1 - x0, 1e-9)
        px_y = step * vb.height() / max(y1 - y0, 1e-9)
        fm = self.fontMetrics()
        wide = fm.horizontalAdvance(str(H)) + 6
        tall = fm.height()
        return (max(1, int(np.ceil(tall / max(px_y, 1e-9)))), max(1, int(np.ceil(wide / max(px_x, 1e-9)))))

    def _tick(self, *_):
        L, H = self.grid_shape()
        if not L:
            return
        step = self.cell + self.gutter
        every_l, every_h = self.tick_every()
        self.plot.getAxis("left").setTicks(
            [[(l * step + self.cell / 2, str(l + 1)) for l in range(L) if l % every_l == 0], []])
        self.plot.getAxis("top").setTicks(
            [[(h * step + self.cell / 2, str(h + 1)) for h in range(H) if h % every_h == 0], []])

    # ---- picking ---------------------------------------------------------------------------------
    def cell_rect(self, layer: int, head: int) -> QtCore.QRectF:
        step = self.cell + self.gutter
        return QtCore.QRectF(head * step - 0.5, layer * step - 0.5, self.cell + 1, self.cell + 1)

    def head_at(self, scene_pos) -> tuple[int, int]:
        L, H = self.grid_shape()
        if not L or not self.plot.vb.sceneBoundingRect().contains(scene_pos):
            return -1, -1
        p = self.plot.vb.mapSceneToView(scene_pos)
        step = self.cell + self.gutter
        x, y = p.x(), p.y()
        h, l = int(x // step), int(y // step)
        if 0 <= l < L and 0 <= h < H and x - h * step <= self.cell and y - l * step <= self.cell:
            return l, h
        return -1, -1

    def scene_pos_of(self, layer: int, head: int) -> QtCore.QPointF:
        """Scene position of a head's centre (for tests and keyboard navigation)."""
        r = self.cell_rect(layer, head)
        return self.plot.vb.mapViewToScene(r.center())

    def set_selected(self, layer: int, head: int) -> None:
        self.selected = (layer, head)
        self._place(self.select_box, layer, head)

    def _place(self, box, layer, head) -> None:
        L, H = self.grid_shape()
        if 0 <= layer < L and 0 <= head < H:
            box.setRect(self.cell_rect(layer, head))
            box.show()
        else:
            box.hide()

    def top_link(self, layer: int, head: int) -> tuple[str, str, float]:
        """The head's strongest off-diagonal link (query, key, weight)."""
        if self._top_links is None:
            a = self.attentions.copy()
            T = a.shape[-1]
            a[..., np.arange(T), np.arange(T)] = -1
            flat = a.reshape(a.shape[0], a.shape[1], -1)
            self._top_links = flat.argmax(-1), flat.max(-1)
        idx, val = self._top_links
        i, j = divmod(int(idx[layer, head]), self.attentions.shape[-1])
        return self.tokens[i], self.tokens[j], float(val[layer, head])

    def tooltip_text(self, layer: int, head: int) -> str:
        q, k, v = self.top_link(layer, head)
        return (f"<b>Layer {layer + 1}, head {head + 1}</b><br>strongest link: "
                f"{html.escape(q)} → {html.escape(k)} ({v:.2f})<br><i>click to open it large</i>")

    def _moved(self, evt) -> None:
        pos = evt[0]
        l, h = self.head_at(pos)
        if (l, h) != self._hover:
            self._hover = (l, h)
            self._place(self.hover_box, l, h)
            self.head_hovered.emit(l, h)
        if l >= 0:
            gp = self.mapToGlobal(self.mapFromScene(pos))
            QtWidgets.QToolTip.showText(gp + QtCore.QPoint(14, 10), self.tooltip_text(l, h), self)
        else:
            QtWidgets.QToolTip.hideText()

    def _clicked(self, ev) -> None:
        if ev.button() != QtCore.Qt.MouseButton.LeftButton:
            return
        l, h = self.head_at(ev.scenePos())
        if l >= 0:
            self.set_selected(l, h)
            self.head_clicked.emit(l, h)

    def leaveEvent(self, ev):
        self._hover = (-1, -1)
        self._place(self.hover_box, -1, -1)
        super().leaveEvent(ev)

    def save_png(self, path, scale: float = 2.0) -> bool:
        size = self.size()
        img = QtGui.QImage(int(size.width() * scale), int(size.height() * scale),
                           QtGui.QImage.Format.Format_ARGB32)
        img.fill(self.bg)
        painter = QtGui.QPainter(img)
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        self.render(painter, QtCore.QRectF(img.rect()), self.viewport().rect())
        painter.end()
        return img.save(str(path), "PNG")
