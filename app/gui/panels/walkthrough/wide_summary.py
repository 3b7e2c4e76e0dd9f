"""A wide matrix (384 or 1,536 columns) in words: per token its length, a typical |value|, and
the dimensions that carry the most, beside the heatmap whose colours are too fine to read.

    table = WideSummaryTable()
    table.set_step(step)           # hidden for narrow matrices
"""
from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from core.walkthrough.numbers import is_wide, wide_summary

TOP = 3     # dimensions listed per token


class WideSummaryTable(QtWidgets.QTableWidget):
    """token | ‖x‖ | mean |x| | its TOP dimensions by |value|."""

    def __init__(self, parent=None):
        super().__init__(0, 4, parent)
        self.setObjectName("walkthrough_wide_summary")
        self.setHorizontalHeaderLabels(["token", "‖x‖", "mean |x|", f"top {TOP} dimensions by |value|"])
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.horizontalHeader().setStretchLastSection(True)
        self.setMinimumHeight(140)
        self.summary = None
        self.hide()

    def sizeHint(self) -> QtCore.QSize:
        # its minimum: on a page that scrolls, a taller hint took the height the step's heatmap
        # above needed to show whole at 1200×780 (the page's stretch still gives it any room left)
        return QtCore.QSize(super().sizeHint().width(), self.minimumHeight())

    def set_step(self, step) -> None:
        values = np.asarray(step.values)
        if not is_wide(values):
            self.summary = None
            self.hide()
            return
        s = self.summary = wide_summary(values, TOP)
        labels = list(step.row_labels)
        self.setRowCount(len(s.norms))
        for r in range(len(s.norms)):
            tops = ",  ".join(f"d{d} {v:+.3g}" for d, v in zip(s.top_dims[r], s.top_values[r]))
            cells = (f"{r} {labels[r]}" if values.ndim == 2 else str(labels[0]), f"{s.norms[r]:.4g}",
                     f"{s.mean_abs[r]:.3g}", tops)
            for c, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if c in (1, 2):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.setItem(r, c, item)
        self.resizeColumnsToContents()
        self.setToolTip(f"{values.shape[-1]} columns are too many to read as colours: each token's length "
                        f"‖x‖, its mean |value|, and the {TOP} dimensions with the largest |value| "
                        "(d = dimension, counted from 0)")
        self.show()
