"""The SAE's quality table on held-out tokens, as the anchors report it: each measure with its
interval beside its floors (the site replaced by its mean; by zero), so "good" has a scale.

    view = QualityView()
    view.run_requested.connect(...)          # Evaluate pressed
    view.show_report(report)                 # a core.features.quality.QualityReport
"""
from __future__ import annotations

import math

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.tables import read_only_table

HEADERS = ["Measure", "SAE", "interval", "mean floor", "zero floor", "better"]
EXPLAIN = ("Normalised MSE is the fraction of the activations' variance the reconstruction misses; L0 the "
           "features firing per token; dead and dense the features that never fire and that fire on most "
           "tokens. A feature silent on all n tokens fires on fewer than 3/n of them (95 %, the rule of three); "
           "“dead at n/2 tokens” measures disjoint halves of the tokens, with the spread one half-size sample "
           "shows: with more tokens, fewer features look dead. The spliced cosine and recall@10 put the "
           "reconstruction back into the network. The floors are what replacing the site by its mean, or by "
           "zero, scores: an SAE is good as far as it beats them.")


def _number(value) -> str:
    if value is None:
        return "–"
    value = float(value)
    if math.isnan(value):
        return "n/a"
    return f"{value:.4g}"


class QualityView(QtWidgets.QWidget):
    run_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        bar = QtWidgets.QHBoxLayout()
        self.run_button = QtWidgets.QPushButton("Evaluate")
        self.run_button.setObjectName("features_quality_run")
        self.run_button.setToolTip("Measure the open SAE on its held-out tokens of the chosen sentences")
        self.run_button.clicked.connect(self.run_requested)
        bar.addWidget(self.run_button)
        self.caption = QtWidgets.QLabel("")
        self.caption.setObjectName("features_quality_caption")
        bar.addWidget(self.caption, 1)
        layout.addLayout(bar)
        self.table = read_only_table("features_quality", HEADERS)
        self.table.horizontalHeader().setStretchLastSection(True)
        layout.addWidget(self.table, 1)
        explain = QtWidgets.QLabel(EXPLAIN)
        explain.setWordWrap(True)
        layout.addWidget(explain)

    def show_report(self, report) -> None:
        self.caption.setText(f"{report.site} · {report.split}: {report.n_sentences:,} sentences, "
                             f"{report.n_tokens:,} tokens · 95 % bootstrap intervals; the dead fraction: "
                             "a rule-of-three bound on each silent feature's rate, and its spread at n/2 tokens")
        self.table.setRowCount(0)
        for row in report.rows:
            n = self.table.rowCount()
            self.table.insertRow(n)
            lo, hi = row.interval if row.interval is not None else (None, None)
            floors = row.floors or {}
            bound = getattr(row, "bound", None)
            span = (f"{_number(lo)} – {_number(hi)}" if lo is not None
                    else f"each < {_number(bound)}" if bound is not None else "–")
            cells = [row.name, _number(row.value), span,
                     _number(floors.get("mean")), _number(floors.get("zero")), row.better]
            for column, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if 0 < column < len(cells) - 1:          # numbers right, words left
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(f"{row.meaning} ({row.better} is better)")
                self.table.setItem(n, column, item)
        self.table.resizeColumnsToContents()

    def clear(self) -> None:
        self.caption.setText("")
        self.table.setRowCount(0)
