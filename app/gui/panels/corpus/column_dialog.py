"""Pick the CSV column / JSONL field that holds the sentences, with a preview."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QFormLayout, QLabel, QListWidget, QVBoxLayout

from app.gui.importers import list_fields, preview


class ColumnDialog(QDialog):
    def __init__(self, path, parent=None):
        super().__init__(parent)
        self.path = Path(path)
        self.setObjectName("column_dialog")
        kind = "column" if self.path.suffix.lower() == ".csv" else "field"
        self.setWindowTitle(f"Import {self.path.name}")
        self.fields = list_fields(self.path)        # raises InputError for unreadable files
        self.combo = QComboBox()
        self.combo.setObjectName("column_combo")
        self.combo.addItems(self.fields)
        if "text" in self.fields:
            self.combo.setCurrentText("text")
        self.preview = QListWidget()
        self.preview.setObjectName("column_preview")
        self.preview.setMinimumHeight(140)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Import")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout()
        form.addRow(f"Sentences are in the {kind}:", self.combo)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"<b>{self.path.name}</b> has {len(self.fields)} {kind}s."))
        lay.addLayout(form)
        lay.addWidget(QLabel("First sentences:"))
        lay.addWidget(self.preview)
        lay.addWidget(self.buttons)
        self.combo.currentTextChanged.connect(self._refresh)
        self._refresh(self.combo.currentText())
        self.resize(520, 340)

    @property
    def column(self) -> str:
        return self.combo.currentText()

    def _refresh(self, column):
        self.preview.clear()
        self.preview.addItems(preview(self.path, column))
