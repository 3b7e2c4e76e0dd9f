"""A virtualised table of the corpus: only ids and texts in memory, filtered without a proxy.

100k rows: the view asks only for the visible rows; filtering is one pass over a lowercase copy
of the texts (a few ms), done by the panel after a short debounce.
"""
from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

COLUMNS = ("ID", "Sentence")


class CorpusModel(QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self._ids: list[int] = []
        self._texts: list[str] = []
        self._lower: list[str] | None = None       # lowercase texts, built on first filter
        self._visible: np.ndarray | None = None   # rows (into _ids) shown; None = all
        self._filter = ""

    # ---- data -------------------------------------------------------------------------------
    def set_rows(self, ids, texts) -> None:
        self.beginResetModel()
        self._ids = list(ids)
        self._texts = list(texts)
        self._lower = None
        self._visible = self._compute(self._filter)
        self.endResetModel()

    def append_rows(self, ids, texts) -> None:
        ids = [int(i) for i in ids]
        if not ids:
            return
        if self._filter:
            self._extend(ids, texts)
            self.set_filter(self._filter, force=True)
            return
        first = len(self._ids)
        self.beginInsertRows(QModelIndex(), first, first + len(ids) - 1)
        self._extend(ids, texts)
        self.endInsertRows()

    def _extend(self, ids, texts):
        self._ids.extend(ids)
        self._texts.extend(texts)
        if self._lower is not None:
            self._lower.extend(t.lower() for t in texts)

    def remove_ids(self, ids) -> None:
        gone = set(int(i) for i in ids)
        if not gone:
            return
        keep = [k for k, i in enumerate(self._ids) if i not in gone]
        self.beginResetModel()
        self._ids = [self._ids[k] for k in keep]
        self._texts = [self._texts[k] for k in keep]
        self._lower = None
        self._visible = self._compute(self._filter)
        self.endResetModel()

    def set_filter(self, text: str, force: bool = False) -> None:
        text = text.strip().lower()
        if text == self._filter and not force:
            return
        self.beginResetModel()
        self._filter = text
        self._visible = self._compute(text)
        self.endResetModel()

    def _compute(self, text: str):
        if not text:
            return None
        if self._lower is None:
            self._lower = [t.lower() for t in self._texts]
        return np.fromiter((k for k, t in enumerate(self._lower) if text in t), dtype=np.int64)

    def _row(self, r: int) -> int:
        return r if self._visible is None else int(self._visible[r])

    def id_at(self, r: int) -> int:
        return self._ids[self._row(r)]

    def text_at(self, r: int) -> str:
        return self._texts[self._row(r)]

    def total(self) -> int:
        return len(self._ids)

    @property
    def filter_text(self) -> str:
        return self._filter

    # ---- Qt API -----------------------------------------------------------------------------
    def rowCount(self, parent=QModelIndex()):
        if parent.isValid():
            return 0
        return len(self._ids) if self._visible is None else len(self._visible)

    def columnCount(self, parent=QModelIndex()):
        return 0 if parent.isValid() else len(COLUMNS)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self._row(index.row())
        if role in (Qt.ItemDataRole.DisplayRole, Qt.ItemDataRole.ToolTipRole):
            return str(self._ids[r]) if index.column() == 0 else self._texts[r]
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() == 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return COLUMNS[section]
        return None
