"""The pieces every model chooser shares (the corpus-model bar, the inspect bar, the Train and
Evaluate pages): the weights offered, labels for poolings and devices, the devices torch sees
(without importing it on the UI thread) and an editable weights combo that lists checkpoints
trained since it was made."""
from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QToolButton

from app.gui.wording import BACKEND_LABELS
from core.encoder.sources import DEFAULT_HUB_MODEL, DEFAULT_MODEL
from core.names import BACKENDS

WEIGHTS = [DEFAULT_MODEL, DEFAULT_HUB_MODEL]
POOLING_LABELS = {"mean": "Mean", "cls": "CLS", "max": "Max", "attention": "Attention (learned query)"}
DEVICE_LABELS = {"auto": "Auto", "cpu": "CPU", "cuda": "CUDA", "mps": "MPS"}


def offered_devices() -> list[str]:
    """The devices to offer. Asking torch means importing it (seconds): before the model's
    worker has imported torch, offer auto and cpu; the bar adds CUDA/MPS once a model loaded."""
    if "torch" not in sys.modules:
        return ["auto", "cpu"]
    try:
        from core.device import available_devices
        return available_devices()
    except Exception:  # noqa: BLE001
        return ["auto", "cpu"]


def trained_checkpoints() -> list[str]:
    """Folders of checkpoints trained in the app (the user-data models folder), newest first.
    Reads the folder only: no torch import on the UI thread."""
    try:
        from core.encoder.catalog import trained_models  # runs and the experiments' runs
        found = trained_models()
        found.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    except OSError:
        return []
    return [str(p) for p in found]


def add_trained_checkpoints(combo: QComboBox) -> None:
    """Add checkpoints trained since ``combo``'s list was made (its typed text is kept)."""
    text = combo.currentText()
    combo.blockSignals(True)
    for folder in trained_checkpoints():
        if combo.findText(folder) < 0:
            combo.addItem(folder)
            combo.setItemData(combo.count() - 1, "A checkpoint trained with Encoderscope",
                              Qt.ItemDataRole.ToolTipRole)
    combo.setCurrentText(text)
    combo.blockSignals(False)


class WeightsCombo(QComboBox):
    """An editable combo that refreshes its list (new trained checkpoints) when opened. Text typed
    and left without Enter goes back to ``confirmed()`` (the model in use) when the focus leaves:
    the bar never shows a model that is not the one running."""

    def __init__(self, before_popup, confirmed=None, parent=None, width: int = 22):
        super().__init__(parent)
        self._before_popup = before_popup
        self._confirmed = confirmed
        self.setEditable(True)                          # any model name or folder can be typed
        self.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        self.setMinimumContentsLength(width)

    def showPopup(self):
        self._before_popup()
        super().showPopup()

    def focusOutEvent(self, event):
        super().focusOutEvent(event)
        popup = self.view().isVisible()
        if self._confirmed is not None and not popup and self.isEditable():
            name = self._confirmed()
            if name is not None and self.currentText().strip() != name:
                i = self.findText(name)
                self.blockSignals(True)
                if i >= 0:
                    self.setCurrentIndex(i)
                self.setEditText(name)
                self.blockSignals(False)


def encoder_combo(object_name: str, tooltip: str) -> QComboBox:
    """The choice of the code that runs a model: ours or transformers (core.names.BACKENDS)."""
    combo = QComboBox()
    combo.setObjectName(object_name)
    for key in BACKENDS:
        combo.addItem(BACKEND_LABELS[key], key)
    combo.setToolTip(tooltip)
    return combo


def folder_button(tooltip: str, on_click) -> QToolButton:
    """A toolbar's "Folder…" button: pick a model folder or a trained checkpoint."""
    button = QToolButton()
    button.setText("Folder…")
    button.setToolTip(tooltip)
    button.clicked.connect(on_click)
    return button
