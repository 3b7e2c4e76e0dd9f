"""Search results as a table: rank, score (drawn as a bar), sentence."""
from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

from app.gui.widgets.score_delegate import SCORE_ROLE

COLUMNS = ("Rank", "Score", "Sentence")


class ResultsModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.hits: list = []   # index.store.base.Hit (score, id, text, metadata)

    def set_hits(self, hits) -> None:
        self.beginResetModel()
        self.hits = list(hits)
        self.endResetModel()

    def hit(self, row: int):
        return self.hits[row] if 0 <= row < len(self.hits) else None

    def rowCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(self.hits)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        hit, col = self.hits[index.row()], index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return str(index.row() + 1)
            if col == 1:
                return f"{hit.score:.3f}"
            return hit.text
        if role == SCORE_ROLE and col == 1:
            return float(hit.score)
        if role == Qt.ItemDataRole.ToolTipRole:
            return f"#{hit.id} · cosine {hit.score:.4f}\n{hit.text}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col == 0:
            return int(Qt.AlignmentFlag.AlignCenter)
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None
