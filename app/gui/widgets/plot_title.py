"""A plot title that fits its plot: the font shrinks (down to 8 pt), then the words wrap onto a
second line, then each line is cut with "…" and the whole title goes in the tooltip.

pyqtgraph's title makes the plot at least as wide as its text, so a long title ("probe set
cosines at step 1,000") pushed the plot past its widget's edge, where both were cut.

    fitted_title(plot_item)       # once; then plot_item.setTitle(...) as usual
"""
from __future__ import annotations

import re

import pyqtgraph as pg
from PySide6 import QtCore, QtGui

MIN_PT = 8
TAGS = re.compile(r"<[^>]+>")


def _font(pt: float) -> QtGui.QFont:
    font = QtGui.QFont()
    font.setPointSizeF(pt)
    return font


def fit_lines(text: str, width: float, base_pt: float) -> tuple[list[str], float, bool]:
    """(lines, point size, cut) for ``text`` in ``width`` pixels: one line at the largest size
    that fits, else two lines at the smallest, else lines cut with "…"."""
    plain = TAGS.sub("", text)
    pt = base_pt
    while pt >= MIN_PT:
        if QtGui.QFontMetricsF(_font(pt)).horizontalAdvance(plain) <= width:
            return [plain], pt, False
        pt -= 1
    metrics = QtGui.QFontMetricsF(_font(MIN_PT))
    words, first = plain.split(" "), []
    while words and metrics.horizontalAdvance(" ".join(first + words[:1])) <= width:
        first.append(words.pop(0))
    lines = [" ".join(first), " ".join(words)] if first else [plain]
    cut = any(metrics.horizontalAdvance(line) > width for line in lines)
    lines = [metrics.elidedText(line, QtCore.Qt.TextElideMode.ElideRight, width) for line in lines]
    return [line for line in lines if line], MIN_PT, cut


class FittedTitle(pg.LabelItem):
    """A PlotItem's title label that never widens its plot and fits its text to its width."""

    def __init__(self, **style):
        super().__init__("", **style)
        self.full_text = ""
        self.base_pt = 10.0
        self._fitting = False
        self._fitted_width = -1.0

    def setText(self, text, **args):
        if not hasattr(self, "_fitting"):             # LabelItem.__init__'s own first call
            return super().setText(text, **args)
        if "size" in args:
            self.base_pt = float(str(args["size"]).rstrip("pt") or 10)
        self.full_text = text
        self.opts.update({k: v for k, v in args.items() if k != "size"})
        self._fitted_width = -1.0
        self._fit()

    def _fit(self) -> None:
        width = self.width()
        if self._fitting or width <= 0 or width == self._fitted_width:
            return
        self._fitting = True
        try:
            self._fitted_width = width
            lines, pt, cut = fit_lines(self.full_text, width - 4, self.base_pt)
            text = self.full_text if len(lines) == 1 and not cut and pt == self.base_pt else \
                "<br>".join(line.replace("&", "&amp;").replace("<", "&lt;") for line in lines)
            super().setText(text, size=f"{pt:g}pt")
            self.setToolTip(TAGS.sub("", self.full_text) if cut or len(lines) > 1 else "")
        finally:
            self._fitting = False

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        if ev is not None and hasattr(self, "_fitting"):
            self._fit()

    def updateMin(self):
        # the plot's width decides the title's, never the other way round
        bounds = self.itemRect()
        self.setMinimumWidth(0)
        self.setMinimumHeight(bounds.height())
        self._sizeHint = {
            QtCore.Qt.SizeHint.MinimumSize: (0, bounds.height()),
            QtCore.Qt.SizeHint.PreferredSize: (0, bounds.height()),
            QtCore.Qt.SizeHint.MaximumSize: (-1, -1),
            QtCore.Qt.SizeHint.MinimumDescent: (0, 0),
        }
        self.updateGeometry()


def fitted_title(plot) -> FittedTitle:
    """Replace the title label of ``plot`` (a PlotItem or PlotWidget) with a FittedTitle."""
    item = plot.getPlotItem() if hasattr(plot, "getPlotItem") else plot
    old = item.titleLabel
    if isinstance(old, FittedTitle):
        return old
    label = FittedTitle(**{k: v for k, v in old.opts.items() if k in ("color", "justify")})
    label.full_text = old.text
    item.layout.removeItem(old)
    old.setParentItem(None)
    if old.scene() is not None:
        old.scene().removeItem(old)
    item.layout.addItem(label, 0, 1)
    item.titleLabel = label
    label.setVisible(old.isVisible())
    return label
