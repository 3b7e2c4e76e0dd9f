"""The status bar's message: one line, elided to the room there is, the whole message in its
tooltip (and in the log), so that a long message is never silently cut."""
from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QLabel, QSizePolicy

from app.gui.logs import log


class StatusMessage(QLabel):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("status_message")
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setMinimumWidth(80)
        self.message = ""                   # the whole message (the label may show less)
        self._clear = QTimer(self, singleShot=True)
        self._clear.timeout.connect(lambda: self.show_message(""))

    def show_message(self, message: str, timeout_ms: int = 0) -> None:
        self.message = " ".join(str(message).split())      # one line
        if self.message:
            log.info("status: %s", self.message)
        self.setToolTip(self.message if self.message else "")
        self._elide()
        if timeout_ms and self.message:
            self._clear.start(timeout_ms)
        else:
            self._clear.stop()

    def is_elided(self) -> bool:
        return self.text() != self.message

    def _elide(self) -> None:
        self.setText(self.fontMetrics().elidedText(self.message, Qt.TextElideMode.ElideRight,
                                                   max(0, self.width() - 4)))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()
