"""Read-only tables the panels fill with numbers: one way to make one."""
from __future__ import annotations

from PySide6 import QtWidgets


def read_only_table(object_name: str, headers: list[str]) -> QtWidgets.QTableWidget:
    """A table with these column headers, no row numbers, that the user reads but never edits."""
    table = QtWidgets.QTableWidget(0, len(headers))
    table.setObjectName(object_name)
    table.setHorizontalHeaderLabels(headers)
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    return table
