"""Search panel (placeholder, being written)."""
from PySide6.QtWidgets import QLineEdit, QVBoxLayout, QWidget


class SearchPanel(QWidget):
    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.query = QLineEdit()
        QVBoxLayout(self).addWidget(self.query)

    def restore(self, s): ...
    def save(self, s): ...
