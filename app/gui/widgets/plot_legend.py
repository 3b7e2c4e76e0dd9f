"""A plot's legend in a row under its x axis, inside the plot's own layout: it never covers a
curve, whatever the data (pyqtgraph's default legend floats over the view box, in a corner the
curves often reach)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSizeF, Qt
from PySide6.QtWidgets import QSizePolicy

LEGEND_ROW = 4            # PlotItem's layout: title 0, top axis 1, view box 2, bottom axis 3


class LegendRow(pg.LegendItem):
    """A legend laid out by the plot (no anchor over the view box): entries side by side, as many
    to a row as the plot's width holds (a narrow plot gets more rows, never a wider plot)."""

    def __init__(self, columns: int = 4, **kwargs):
        kwargs.setdefault("labelTextColor", "#333")        # on the plots' white background
        super().__init__(offset=None, colCount=columns, **kwargs)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)

    def updateSize(self):
        # the plot's layout sizes and places it: never the floating legend's setGeometry(0, 0, ...)
        self.updateGeometry()

    def entry_width(self) -> float:
        return max((sample.boundingRect().width() + label.itemRect().width() + 2 * self.layout.horizontalSpacing()
                    for sample, label in self.items), default=0.0)

    def sizeHint(self, which, constraint=None):
        hint = super().sizeHint(which, QSizeF() if constraint is None else constraint)
        if which == Qt.SizeHint.MinimumSize:        # one entry a row is enough: the plot need not widen
            return QSizeF(min(hint.width(), self.entry_width()), hint.height())
        return hint

    def setGeometry(self, *args):
        rect = QRectF(*args) if len(args) == 4 else QRectF(args[0])
        if self.items:
            fits = int(rect.width() // max(self.entry_width(), 1.0))
            columns = max(1, min(len(self.items), fits))
            if columns != self.columnCount:
                self.setColumnCount(columns)
        super().setGeometry(rect)


def legend_below(plot, columns: int = 4, **kwargs) -> LegendRow:
    """Give ``plot`` (a PlotWidget or PlotItem) a legend under its x axis; curves plotted with a
    ``name`` are listed in it, as with ``addLegend``."""
    item = plot.getPlotItem() if hasattr(plot, "getPlotItem") else plot
    legend = LegendRow(columns, **kwargs)
    item.layout.addItem(legend, LEGEND_ROW, 1)
    item.legend = legend
    return legend
