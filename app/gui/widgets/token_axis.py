"""An axis whose ticks are token labels: every token when they fit, every k-th one otherwise
(zooming in brings the others back); long tokens are elided, one position can be highlighted."""
from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6 import QtCore, QtGui

MAX_LABEL_CHARS = 16
MAX_EXTENT_PX = 130         # pixels the label side may take at most


def elide(text: str, n: int = MAX_LABEL_CHARS) -> str:
    text = str(text)
    return text if len(text) <= n else text[: n - 1] + "…"


class TokenAxis(pg.AxisItem):
    """An axis whose ticks are token labels at integer positions 0..n-1.

    Shows as many labels as fit without overlapping (every k-th one, k a power-of-two-ish
    stride); horizontal axes write their labels vertically so long tokens fit.
    """

    def __init__(self, orientation: str, vertical_text: bool | None = None, **kw):
        super().__init__(orientation, **kw)
        self.labels: list[str] = []
        self.vertical_text = orientation in ("top", "bottom") if vertical_text is None else vertical_text
        self.highlight: int | None = None
        self.max_extent = MAX_EXTENT_PX
        self.max_chars = MAX_LABEL_CHARS    # characters a label keeps before "…"
        self.setStyle(tickLength=-4, tickTextOffset=4, autoExpandTextSpace=False)

    def _bold_metrics(self, font=None) -> QtGui.QFontMetrics:
        """The hovered label is drawn bold, wider than the others: room is measured in bold."""
        bold = QtGui.QFont(font or self.style["tickFont"] or QtGui.QFont())
        bold.setBold(True)
        return QtGui.QFontMetrics(bold)

    def set_labels(self, labels) -> None:
        fm = self._bold_metrics()
        # at most MAX_LABEL_CHARS, and never wider than the axis keeps room for (wide glyphs)
        self.labels = [fm.elidedText(elide(t, self.max_chars), QtCore.Qt.TextElideMode.ElideRight,
                                     self.max_extent - 14)
                       for t in labels]
        widest = max((fm.horizontalAdvance(t) for t in self.labels), default=10)
        extent = min(self.max_extent, widest + 14)
        if self.style.get("showValues", True) and self.labelText:
            extent += fm.height() + 6      # room for the axis title ("query" / "key")
        if self.orientation in ("left", "right"):
            self.setWidth(extent)
        else:
            self.setHeight(extent if self.vertical_text else fm.height() + 10)
        self.picture = None
        self.update()

    def tickValues(self, minVal, maxVal, size):
        return [] if not self.labels else super().tickValues(minVal, maxVal, size)

    def set_highlight(self, index: int | None) -> None:
        if index != self.highlight:
            self.highlight = index
            self.picture = None
            self.update()

    # --- geometry shared by draw specs and tests -----------------------------------------
    def _mapping(self):
        bounds = self.mapRectFromParent(self.geometry())
        dif = self.range[1] - self.range[0]
        if self.orientation in ("left", "right"):
            scale = -bounds.height() / dif if dif else 1.0
            offset = self.range[0] * scale - bounds.height()
        else:
            scale = bounds.width() / dif if dif else 1.0
            offset = self.range[0] * scale
        return bounds, scale, offset

    def visible_labels(self, pixels_per_label: float | None = None) -> list[int]:
        """Indices of the labels drawn at the current zoom."""
        n = len(self.labels)
        if not n:
            return []
        lo, hi = sorted(self.range)
        first, last = max(0, math.ceil(lo - 0.5)), min(n - 1, math.floor(hi + 0.5))
        if last < first:
            return []
        _, scale, _ = self._mapping()
        per = abs(scale) if pixels_per_label is None else pixels_per_label
        fm = QtGui.QFontMetrics(self.style["tickFont"] or QtGui.QFont())
        need = fm.height() * 1.05
        stride = 1 if per <= 0 else max(1, math.ceil(need / per))
        if stride > 1:                       # a round stride keeps labels stable while panning
            stride = next(s for s in (2, 3, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128, 256, 10**9)
                          if s >= stride)
        start = first + (-first) % stride
        return list(range(start, last + 1, stride))

    def generateDrawSpecs(self, p):
        if not self.labels:                  # nothing to label yet: just the axis line
            bounds = self.mapRectFromParent(self.geometry())
            line = ((bounds.topRight(), bounds.bottomRight()) if self.orientation == "left"
                    else (bounds.bottomLeft(), bounds.bottomRight()))
            return (self.pen(), *line), [], []
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        bounds, scale, offset = self._mapping()
        pen = self.pen()
        if self.orientation == "left":
            span = (bounds.topRight(), bounds.bottomRight())
            stop = bounds.right()
        elif self.orientation == "right":
            span = (bounds.topLeft(), bounds.bottomLeft())
            stop = bounds.left()
        elif self.orientation == "top":
            span = (bounds.bottomLeft(), bounds.bottomRight())
            stop = bounds.bottom()
        else:
            span = (bounds.topLeft(), bounds.topRight())
            stop = bounds.top()
        axis_spec = (pen, span[0], span[1])
        fm = self._bold_metrics(p.font())
        h = fm.height()
        gap = 4
        ticks, texts = [], []
        for i in self.visible_labels():
            x = i * scale - offset
            text = self.labels[i]
            w = fm.horizontalAdvance(text) + 2
            if self.orientation == "left":
                ticks.append((pen, QtCore.QPointF(stop, x), QtCore.QPointF(stop - 3, x)))
                rect = QtCore.QRectF(stop - gap - w - 2, x - h / 2, w, h)
                flags = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter
            elif self.orientation == "right":
                ticks.append((pen, QtCore.QPointF(stop, x), QtCore.QPointF(stop + 3, x)))
                rect = QtCore.QRectF(stop + gap, x - h / 2, w, h)
                flags = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter
            else:
                sign = -1 if self.orientation == "top" else 1
                ticks.append((pen, QtCore.QPointF(x, stop), QtCore.QPointF(x, stop + sign * 3)))
                if self.vertical_text:
                    # the first and last labels stay whole inside the axis (a narrow first column put
                    # half of "0" past the plot's left edge, where it was clipped)
                    x = min(max(x, bounds.left() + h / 2), bounds.right() - h / 2)
                    rect = QtCore.QRectF(x, stop + sign * gap, w, h)     # anchor; rotated when drawn
                    flags = QtCore.Qt.AlignmentFlag.AlignLeft | QtCore.Qt.AlignmentFlag.AlignVCenter
                else:
                    y = stop - gap - h if sign < 0 else stop + gap
                    rect = QtCore.QRectF(x - w / 2, y, w, h)
                    flags = QtCore.Qt.AlignmentFlag.AlignCenter
            texts.append((rect, flags, text, i == self.highlight))
        return axis_spec, ticks, texts

    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        if not self.labels:
            return super().drawPicture(p, axisSpec, tickSpecs, textSpecs)
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setRenderHint(p.RenderHint.TextAntialiasing, True)
        pen, p1, p2 = axisSpec
        p.setPen(pen)
        p.drawLine(p1, p2)
        for tpen, a, b in tickSpecs:
            p.setPen(tpen)
            p.drawLine(a, b)
        font = QtGui.QFont(self.style["tickFont"] or p.font())
        bold = QtGui.QFont(font)
        bold.setBold(True)
        p.setClipRect(self.boundingRect().toAlignedRect())
        for rect, flags, text, hl in textSpecs:
            p.setFont(bold if hl else font)
            p.setPen(pg.mkPen("#d62728") if hl else self.textPen())
            if self.vertical_text and self.orientation in ("top", "bottom"):
                p.save()
                h = rect.height()
                p.translate(rect.x(), rect.y())
                if self.orientation == "top":
                    p.rotate(-90)          # text runs upwards from the axis
                    p.drawText(QtCore.QRectF(0, -h / 2, rect.width(), h), int(flags), text)
                else:
                    p.rotate(90)           # text runs downwards from the axis
                    p.drawText(QtCore.QRectF(0, -h / 2, rect.width(), h), int(flags), text)
                p.restore()
            else:
                p.drawText(rect, int(flags), text)
