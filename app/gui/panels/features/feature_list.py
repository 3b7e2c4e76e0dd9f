"""The feature browser's list: one row per feature (its number, short label, density, largest
activation), sorted by density, largest activation or number, the dead ones left out or shown, or
only the features that fire on a word ("which features fire on *cat*").

    view = FeatureList()
    view.query_changed.connect(lambda sort, filter_dead, word: ...)   # ask the worker for rows
    view.set_rows(rows)                                               # compute.FeatureRow list
    view.feature_chosen.connect(lambda feature: ...)                  # a row clicked (or the first shown)
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.line_edit import long_line_edit

SORTS = (("density", "Density"), ("max", "Largest activation"), ("id", "Number"))
HEADERS = ("Feature", "Label", "Density", "Max")


class FeatureRowsModel(QtCore.QAbstractTableModel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.rows: list = []

    def set_rows(self, rows: list) -> None:
        self.beginResetModel()
        self.rows = list(rows)
        self.endResetModel()

    def rowCount(self, parent=QtCore.QModelIndex()) -> int:   # noqa: N802 - Qt API
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QtCore.QModelIndex()) -> int:   # noqa: N802 - Qt API
        return len(HEADERS)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):   # noqa: N802 - Qt API
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return HEADERS[section]
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return (str(row.feature), row.label, f"{row.density:.2%}", f"{row.max_activation:.3g}")[index.column()]
        if role == Qt.ItemDataRole.TextAlignmentRole and index.column() != 1:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole:
            return (f"Feature {row.feature}: fires on {row.density:.2%} of the tokens, at most "
                    f"{row.max_activation:.4g}; label from its top tokens: {row.label}")
        return None


class FeatureList(QtWidgets.QWidget):
    query_changed = QtCore.Signal(str, bool, str)     # sort, filter dead, word ('' = every feature)
    feature_chosen = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        bar = QtWidgets.QHBoxLayout()
        self.sort = QtWidgets.QComboBox()
        self.sort.setObjectName("features_sort")
        for key, title in SORTS:
            self.sort.addItem(title, key)
        self.sort.setToolTip("The order of the list")
        self.filter_dead = QtWidgets.QCheckBox("Hide dead")
        self.filter_dead.setObjectName("features_filter_dead")
        self.filter_dead.setChecked(True)
        self.filter_dead.setToolTip("Leave out the features that never fired on the indexed sentences")
        bar.addWidget(QtWidgets.QLabel("Sort"))
        bar.addWidget(self.sort)
        bar.addWidget(self.filter_dead)
        layout.addLayout(bar)
        self.word = long_line_edit("", "find features by a word, e.g. cat", "features_find")
        self.word.setToolTip("The features that fire on this word, the strongest first (Enter); empty: every feature")
        layout.addWidget(self.word)
        self.model = FeatureRowsModel(self)
        self.table = QtWidgets.QTableView()
        self.table.setObjectName("features_list")
        self.table.setModel(self.model)
        self.table.verticalHeader().setVisible(False)
        self.table.setWordWrap(False)                       # one line a feature; the tooltip has it all
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.table.selectionModel().currentRowChanged.connect(self._row_changed)
        layout.addWidget(self.table, 1)
        self.note = QtWidgets.QLabel("")
        self.note.setObjectName("features_list_note")
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        self.sort.currentIndexChanged.connect(lambda _i: self.ask())
        self.filter_dead.toggled.connect(lambda _b: self.ask())
        self.word.returnPressed.connect(self.ask)

    def ask(self) -> None:
        self.query_changed.emit(self.sort.currentData(), self.filter_dead.isChecked(), self.word.text().strip())

    def set_rows(self, rows: list) -> None:
        self.model.set_rows(rows)
        word = self.word.text().strip()
        self.note.setText(f"{len(rows):,} features fire on “{word}”" if word else f"{len(rows):,} features")
        if rows:
            self.table.selectRow(0)

    def clear(self, note: str = "") -> None:
        self.model.set_rows([])
        self.note.setText(note)

    def _row_changed(self, current, _previous) -> None:
        if current.isValid() and current.row() < len(self.model.rows):
            self.feature_chosen.emit(self.model.rows[current.row()].feature)
