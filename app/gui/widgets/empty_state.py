"""A view that says what to do while it has nothing to show, instead of drawing empty axes.

    box = EmptyState(content_widget, "effects")
    box.say("Choose parts to switch off and press Apply")    # the words, centred; no axes
    box.show_content()                                        # the plots, once there is data
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets


class EmptyState(QtWidgets.QStackedWidget):
    def __init__(self, content: QtWidgets.QWidget, name: str, parent=None):
        super().__init__(parent)
        self.setObjectName(f"{name}_stack")
        self.words = QtWidgets.QLabel()
        self.words.setObjectName(f"{name}_empty")
        self.words.setWordWrap(True)
        self.words.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.words.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
        self.words.setMargin(16)
        self.content = content
        self.addWidget(self.words)
        self.addWidget(content)
        # the stack is as small as its smaller page lets it be: words never force the plots' size
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Expanding)

    def say(self, text: str) -> None:
        self.words.setText(f"<span style='color:#555; font-size:12pt'>{html.escape(text)}</span>")
        self.setCurrentWidget(self.words)

    def show_content(self) -> None:
        self.setCurrentWidget(self.content)

    @property
    def is_empty(self) -> bool:
        return self.currentWidget() is self.words

    def said(self) -> str:
        return self.words.text() if self.is_empty else ""
