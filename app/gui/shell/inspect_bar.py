"""The "Inspect with" toolbar: the model the inspector family (Attention, Step by step, Fill-mask)
runs, chosen apart from the corpus model. Edits ``state.inspect_choice``; never the store."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLabel, QToolBar

from app.gui.state import ModelChoice
from app.gui.widgets.model_choice import (
    WEIGHTS,
    WeightsCombo,
    add_trained_checkpoints,
    encoder_combo,
    folder_button,
)

SAME = "Same as the corpus model"


class InspectBar(QToolBar):
    def __init__(self, state, parent=None):
        super().__init__("Inspect with", parent)
        self.setObjectName("inspect_bar")
        self.setMovable(False)
        self.state = state

        title = QLabel("  <b>Inspect with</b> ")
        title.setToolTip("The model Attention, Step by step and Fill-mask run. Switching it never "
                         "touches the corpus: search keeps the corpus model.")
        self.weights = WeightsCombo(self.refresh_weights, lambda: SAME if self.state.inspect_choice is None
                                    else self.state.inspect_choice.model)
        self.weights.setObjectName("inspect_weights_combo")
        self.weights.addItem(SAME)
        self.weights.addItems(WEIGHTS)
        self.refresh_weights()
        self.weights.setToolTip(f"“{SAME}”, minilm, a Hugging Face id, a model folder or a trained "
                                "checkpoint (a masked-LM one for Fill-mask). Type a name and press Enter.")
        title.setBuddy(self.weights)
        self.encoder = encoder_combo("inspect_encoder_combo", "Which code runs the inspected model: compare our "
                                     "from-scratch encoder with transformers on the same weights")
        self.browse = folder_button("Inspect a model folder or a trained checkpoint", self._browse)
        self.loaded = QLabel()
        self.loaded.setObjectName("inspect_loaded")
        for w in (title, self.weights, self.browse, self.encoder, self.loaded):
            self.addWidget(w)

        self._sync()
        state.inspect_choice_changed.connect(self._sync)
        state.choice_changed.connect(self._sync)
        state.inspect_backend_changed.connect(self._show_loaded)
        self._show_loaded(state.inspect_backend)
        self.weights.activated.connect(self._apply)
        self.weights.lineEdit().returnPressed.connect(self._apply)
        self.encoder.activated.connect(self._apply)

    def refresh_weights(self) -> None:
        add_trained_checkpoints(self.weights)

    def current_choice(self) -> ModelChoice | None:
        """What the bar shows, as an inspect choice (None: the corpus model itself)."""
        corpus = self.state.choice
        text = self.weights.currentText().strip()
        model = corpus.model if text in ("", SAME) else text
        choice = corpus.with_(model=model, backend=self.encoder.currentData())
        return None if choice.load_key() == corpus.load_key() else choice

    def _apply(self, *_) -> None:
        self.state.set_inspect_choice(self.current_choice())

    def _browse(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Inspect a model folder or trained checkpoint")
        if folder:
            self.set_weights(folder)
            self._apply()

    def set_weights(self, name: str) -> None:
        if self.weights.findText(name) < 0:
            self.weights.addItem(name)
        self.weights.setCurrentText(name)

    def _sync(self, *_) -> None:
        choice = self.state.inspect_choice
        for w in (self.weights, self.encoder):
            w.blockSignals(True)
        if choice is None:
            self.weights.setCurrentIndex(0)
            self.encoder.setCurrentIndex(max(0, self.encoder.findData(self.state.choice.backend)))
        else:
            self.set_weights(choice.model)
            self.encoder.setCurrentIndex(max(0, self.encoder.findData(choice.backend)))
        for w in (self.weights, self.encoder):
            w.blockSignals(False)

    def _show_loaded(self, backend) -> None:
        if backend is None:
            self.loaded.setText("  <i>loading …</i>")
        else:
            mlm = "has a masked-LM head" if getattr(backend, "has_mlm", False) else "no masked-LM head"
            self.loaded.setText(f"  <span style='color:gray'>{backend.n_layers} layers × {backend.n_heads} "
                                f"heads · {mlm}</span>")
        self.loaded.setTextFormat(Qt.TextFormat.RichText)
