"""A form row of a path field and the button beside it that opens a file dialog."""
from __future__ import annotations

from PySide6 import QtWidgets


def browse_row(field: QtWidgets.QWidget, button_text: str, on_browse) -> QtWidgets.QHBoxLayout:
    """`field` stretched, and a `button_text` button calling `on_browse` at its right."""
    row = QtWidgets.QHBoxLayout()
    button = QtWidgets.QPushButton(button_text)
    button.clicked.connect(on_browse)
    row.addWidget(field, 1)
    row.addWidget(button)
    return row
