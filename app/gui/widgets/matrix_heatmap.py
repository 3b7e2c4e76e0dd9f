"""A heatmap of any matrix (a step's values, a position table, a cosine matrix): labelled rows
and columns, a diverging colour map for signed values, the exact number on hover.

    hm = MatrixHeatmap(parent, row_title="token", col_title="dimension")
    hm.show_matrix(values, row_labels, col_labels, title="Q")
"""
from __future__ import annotations

import html

import numpy as np

from app.gui.widgets.heatmap import HeatmapWidget

SIGNED_COLORMAP = "CET-D1"        # blue - white - red: 0 is white, the sign is the hue


def as_matrix(values) -> np.ndarray:
    """Any step's values as rows x columns: a vector is one row, higher ranks keep their first axis."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 0:
        return v.reshape(1, 1)
    if v.ndim == 1:
        return v.reshape(1, -1)
    return v.reshape(v.shape[0], -1)


def color_levels(m: np.ndarray, signed: bool) -> tuple[float, float]:
    """Colour scale over the finite values (masked scores hold -inf or -1e30 for masked keys).
    Signed matrices of many numbers are scaled to their 99.5th |percentile|: a few outlier
    dimensions (common in trained encoders) would otherwise wash every other cell out to white."""
    finite = m[np.isfinite(m) & (np.abs(m) < 1e29)]
    if not finite.size:
        return 0.0, 1.0
    if signed:
        magnitudes = np.abs(finite)
        top = float(np.percentile(magnitudes, 99.5) if finite.size > 200 else magnitudes.max()) or 1.0
        return -top, top
    return min(0.0, float(finite.min())), float(finite.max())


class MatrixHeatmap(HeatmapWidget):
    """A HeatmapWidget for any matrix of a step: tokens (or positions) on the rows, dimensions or
    tokens on the columns, a diverging colour map for signed values, the number on hover."""

    def __init__(self, parent=None, row_title="token", col_title="dimension", value_name="value"):
        super().__init__(parent, row_title=row_title, col_title=col_title)
        self.value_name = value_name
        for axis in (self.left_axis, self.top_axis):
            axis.enableAutoSIPrefix(False)        # labels, not quantities: never "token (x0.001)"
        self.colorbar.getAxis("right").setLabel(value_name, color=self.fg.name())

    def set_titles(self, row_title: str, col_title: str, value_name: str = "value") -> None:
        self.left_axis.setLabel(row_title, color=self.fg.name())
        self.top_axis.setLabel(col_title, color=self.fg.name())
        self.colorbar.getAxis("right").setLabel(value_name, color=self.fg.name())
        self.value_name = value_name

    def show_matrix(self, values, row_labels, col_labels=None, title: str = "", signed=None) -> None:
        m = as_matrix(values)
        rows = list(row_labels) if row_labels is not None and len(row_labels) == m.shape[0] \
            else [str(i) for i in range(m.shape[0])]
        cols = list(col_labels) if col_labels is not None and len(col_labels) == m.shape[1] \
            else [str(j) for j in range(m.shape[1])]
        signed = bool((m[np.isfinite(m)] < 0).any()) if signed is None else signed
        lo, hi = color_levels(m, signed)
        shown = np.where(np.isfinite(m) & (m > -1e29), m, lo)     # masked cells drawn at the bottom
        self.set_colormap(SIGNED_COLORMAP if signed else "Blues")
        # a vector is one row: let the view fit it (the base class never zooms below 3 x 3 cells)
        self.plot.vb.setLimits(minXRange=min(3, m.shape[1]), minYRange=min(3, m.shape[0]))
        self.raw = m
        self.set_matrix(shown, rows, cols, title=title, levels=(lo, hi))

    def cell_values(self) -> np.ndarray:
        raw = getattr(self, "raw", None)
        return raw if raw is not None and raw.shape == self.matrix.shape else self.matrix

    def tooltip_text(self, i: int, j: int) -> str:
        v = float(getattr(self, "raw", self.matrix)[i, j])
        return (f"{self.left_axis.labelText or 'row'} <b>{html.escape(self.row_labels[i])}</b> (row {i})<br>"
                f"{self.top_axis.labelText or 'column'} <b>{html.escape(self.col_labels[j])}</b> "
                f"(column {j})<br>{html.escape(self.value_name)} <b>{v:.6g}</b>")
