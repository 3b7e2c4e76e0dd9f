"""The intervention's effect on the shipped benchmarks (Spearman on the pairs, recall@10 and MRR
on the queries) and on one query's ranking over the open store: which hits move, by how many.

    view = MetricsView()
    view.measure_requested / view.ranking_requested(query) / view.cancel_requested
    view.show_metrics([MetricEffect, ...]); view.show_ranking(query, rows); view.clear(note)
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.run_bar import RunBar
from app.gui.widgets.tables import read_only_table

EXAMPLE_QUERY = "a pet sleeping in the sun"
EMPTY_WORDS = ("Press Measure to compare the shipped benchmarks with and without the intervention; type a "
               "query and press Rank to see which of its hits move.")
RANKING_COLUMNS = ("before", "after", "moved", "score", "text")


def _item(text: str, align_right: bool = False, color: str | None = None) -> QtWidgets.QTableWidgetItem:
    item = QtWidgets.QTableWidgetItem(text)
    if align_right:
        item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter)
    if color:
        item.setForeground(QtGui.QColor(color))
    return item


class MetricsView(QtWidgets.QWidget):
    measure_requested = QtCore.Signal()
    ranking_requested = QtCore.Signal(str)
    cancel_requested = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.run_bar = RunBar("Measure", "metrics")
        self.measure_button, self.progress, self.cancel_button = (self.run_bar.run_button, self.run_bar.progress,
                                                                  self.run_bar.cancel_button)
        self.measure_button.setToolTip("Spearman on the shipped eval pairs; recall@10 and MRR of the shipped queries "
                                       "over the sample corpus — with and without the intervention")
        self.measure_button.clicked.connect(self.measure_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        outer.addWidget(self.run_bar)
        self.table = read_only_table("metric_effects", ["metric", "before", "after", "difference"])
        self.table.setMaximumHeight(130)
        outer.addWidget(self.table)
        self.note = QtWidgets.QLabel()
        self.note.setWordWrap(True)
        self.note.setObjectName("metrics_note")
        outer.addWidget(self.note)

        about = QtWidgets.QLabel("<b>Search ranking</b> of a query over the open corpus: only the query is "
                                 "re-embedded under the intervention (the stored vectors stay)")
        about.setWordWrap(True)
        outer.addWidget(about)
        row = QtWidgets.QHBoxLayout()
        self.query_edit = long_line_edit(EXAMPLE_QUERY, "A query", "ranking_query", on_enter=self._ask_ranking)
        self.rank_button = QtWidgets.QPushButton("Rank")
        self.rank_button.clicked.connect(self._ask_ranking)
        row.addWidget(self.query_edit, 1)
        row.addWidget(self.rank_button)
        outer.addLayout(row)
        self.ranking = QtWidgets.QTableWidget(0, len(RANKING_COLUMNS))
        self.ranking.setObjectName("ranking_effects")
        self.ranking.setHorizontalHeaderLabels(list(RANKING_COLUMNS))
        self.ranking.horizontalHeaderItem(3).setToolTip("The hit's cosine with the query under the intervention "
                                                       "(with the clean query, if it left the top k)")
        self.ranking.verticalHeader().setVisible(False)
        self.ranking.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.ranking.horizontalHeader().setStretchLastSection(True)
        outer.addWidget(self.ranking, 1)
        self.set_running(False)
        self.clear()

    def _ask_ranking(self) -> None:
        self.ranking_requested.emit(self.query_edit.text())

    def set_running(self, running: bool, message: str = "") -> None:
        self.run_bar.set_running(running, message)
        self.rank_button.setEnabled(not running)

    def on_progress(self, done: int, total: int, message: str) -> None:
        self.run_bar.on_progress(done, total, message)

    def clear(self, note: str = "") -> None:
        self.table.setRowCount(0)
        self.ranking.setRowCount(0)
        self.note.setText(note or EMPTY_WORDS)

    def clear_ranking(self) -> None:
        """Another corpus model: its store's ranking is not this one's."""
        self.ranking.setRowCount(0)

    def show_metrics(self, metrics, patched: bool = False) -> None:
        self.table.setRowCount(len(metrics))
        for r, m in enumerate(metrics):
            worse = m.difference < 0
            for c, text in enumerate((m.name, f"{m.before:.4f}", f"{m.after:.4f}", f"{m.difference:+.4f}")):
                self.table.setItem(r, c, _item(text, c > 0, ("#c0392b" if worse else "#1e7b34") if c == 3 else None))
        self.table.resizeColumnsToContents()
        # said only when something is patched: the metrics then leave the patch out
        self.note.setText("Patch sites belong to one sentence: the metrics measure the other switches."
                          if patched else "")

    def show_ranking(self, changes) -> None:
        """index.corpus.intervene_ranking.RankingChanges: the top k after (with each one's place before),
        then the hits of the top k before that left it. Ranks from 1; "—": deeper than searched."""
        rows = list(changes.hits) + list(changes.left)
        self.ranking.setRowCount(len(rows))
        for r, hit in enumerate(rows):
            gone = r >= len(changes.hits)
            moved = hit.moved
            if gone:
                shown, color = "left the top k", "#c0392b"
            elif hit.rank_before is None or hit.rank_before > changes.k:
                shown, color = "new in the top k", "#1e7b34"
            else:
                shown = "·" if moved == 0 else f"{'↑' if moved > 0 else '↓'}{abs(moved)}"
                color = None if not moved else ("#1e7b34" if moved > 0 else "#c0392b")
            score = hit.score_after if hit.score_after is not None else hit.score_before
            cells = ("—" if hit.rank_before is None else str(hit.rank_before),
                     "—" if hit.rank_after is None else str(hit.rank_after), shown,
                     "—" if score is None else f"{score:.4f}", hit.text)
            for c, text in enumerate(cells):
                self.ranking.setItem(r, c, _item(text, c < 2 or c == 3, color if c == 2 else None))
        self.ranking.resizeColumnsToContents()
        moved = sum(1 for h in changes.hits if h.moved)
        self.note.setText(f"“{html.escape(changes.query)}”: {moved} of the top {changes.k} moved, "
                          f"{len(changes.entered)} entered, {len(changes.left)} left · the query's vector keeps "
                          f"cosine {changes.cosine:.4f} with the original")

    def ranking_rows(self) -> list[tuple[str, str, str, str]]:
        """(before, after, moved, text) of each row, as shown."""
        return [tuple(self.ranking.item(r, c).text() for c in (0, 1, 2, 4)) for r in range(self.ranking.rowCount())]

    def ranking_scores(self) -> list[str]:
        return [self.ranking.item(r, 3).text() for r in range(self.ranking.rowCount())]
