"""Switch the chosen feature off, or steer it, and see what the search finds: the query embedded with
the feature ablated (its decoder contribution removed at the site, the SAE's error term kept) or
steered (α × its decoder direction added), searched against the open corpus's stored vectors; each
hit with its rank before and after.

    box = EditBox()
    box.run_requested.connect(lambda mode, alpha, query: ...)     # mode: "ablate" | "steer"
    box.show_changes(feature, mode, alpha, changes)                # index's RankingChanges
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.tables import read_only_table


def _rank(rank) -> str:
    return "–" if rank is None else str(rank)


def moved_text(move) -> str:
    if move.rank_before is None:
        return "new"
    if move.moved is None:
        return "–"
    return f"{move.moved:+d}" if move.moved else "="


class EditBox(QtWidgets.QGroupBox):
    run_requested = QtCore.Signal(str, float, str)     # mode, alpha, query

    def __init__(self, parent=None):
        super().__init__("Switch it off or steer it: which hits move", parent)
        self.setObjectName("feature_edit")
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        row = QtWidgets.QHBoxLayout()
        self.query = long_line_edit("", "a query searched in the open corpus", "feature_edit_query")
        self.typed = False                 # the user typed a query: a newly shown feature keeps it
        self.query.textEdited.connect(lambda text: setattr(self, "typed", bool(text.strip())))
        self.query.setToolTip("Embedded with the feature edited at the SAE's site and searched against the "
                              "corpus's stored vectors (they stay as the clean model made them)")
        self.alpha = QtWidgets.QDoubleSpinBox()
        self.alpha.setObjectName("feature_edit_alpha")
        self.alpha.setRange(-1000.0, 1000.0)
        self.alpha.setDecimals(2)
        self.alpha.setValue(5.0)
        self.alpha.setPrefix("α ")
        self.alpha.setToolTip("Steer: α × the feature's decoder direction added at every token")
        self.ablate_button = QtWidgets.QPushButton("Ablate")
        self.ablate_button.setObjectName("feature_ablate")
        self.ablate_button.setToolTip("Remove this feature's contribution at the site (the SAE's error term "
                                      "kept, so nothing else changes)")
        self.steer_button = QtWidgets.QPushButton("Steer")
        self.steer_button.setObjectName("feature_steer")
        row.addWidget(self.query, 1)
        row.addWidget(self.ablate_button)
        row.addWidget(self.alpha)
        row.addWidget(self.steer_button)
        layout.addLayout(row)
        self.summary = QtWidgets.QLabel("")
        self.summary.setObjectName("feature_edit_summary")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.table = read_only_table("feature_edit_hits", ["after", "before", "moved", "hit"])
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)   # ten hits in view
        self.table.setMinimumHeight(120)
        layout.addWidget(self.table, 1)
        self.ablate_button.clicked.connect(lambda: self._ask("ablate"))
        self.steer_button.clicked.connect(lambda: self._ask("steer"))
        self.query.returnPressed.connect(lambda: self._ask("ablate"))

    def _ask(self, mode: str) -> None:
        self.run_requested.emit(mode, float(self.alpha.value()), self.query.text().strip())

    def set_running(self, running: bool) -> None:
        self.ablate_button.setEnabled(not running)
        self.steer_button.setEnabled(not running)

    def say(self, text: str, error: bool = False) -> None:
        self.summary.setText(f"<span style='color:#b00020'>{html.escape(text)}</span>" if error else text)

    def show_changes(self, feature: int, mode: str, alpha: float, changes) -> None:
        what = f"feature {feature} ablated" if mode == "ablate" else f"feature {feature} steered by α = {alpha:+g}"
        moved = sum(1 for h in changes.hits if h.rank_before != h.rank_after)     # the entered ones too, once
        self.summary.setText(f"“{html.escape(changes.query)}” with {what}: the query vector's cosine with the "
                             f"clean one is {changes.cosine:.4f}; {moved} of the top {changes.k} moved, "
                             f"{len(changes.entered)} entered, {len(changes.left)} left")
        self.table.setRowCount(0)
        for move in list(changes.hits) + list(changes.left):
            r = self.table.rowCount()
            self.table.insertRow(r)
            cells = (_rank(move.rank_after), _rank(move.rank_before), moved_text(move), move.text)
            for c, text in enumerate(cells):
                self.table.setItem(r, c, QtWidgets.QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
