"""Labels the panels share."""
from __future__ import annotations

from PySide6 import QtWidgets
from PySide6.QtCore import Qt


def rich_label(object_name: str, text: str = "") -> QtWidgets.QLabel:
    """A word-wrapped label of rich text (a panel's info or status line)."""
    label = QtWidgets.QLabel(text)
    label.setObjectName(object_name)
    label.setTextFormat(Qt.TextFormat.RichText)
    label.setWordWrap(True)
    return label
