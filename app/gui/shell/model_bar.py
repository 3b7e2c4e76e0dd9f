"""The corpus-model toolbar: encoder, weights, pooling and device of the model the corpus is
embedded with (search uses it). Edits ``state.choice``; the inspected model has its own bar
(app/gui/shell/inspect_bar.py)."""
from __future__ import annotations

from PySide6.QtWidgets import QComboBox, QFileDialog, QLabel, QSizePolicy, QToolBar, QToolButton, QWidget

from app.gui.state import ModelChoice
from app.gui.widgets.model_choice import (
    DEVICE_LABELS,
    POOLING_LABELS,
    WEIGHTS,
    WeightsCombo,
    add_trained_checkpoints,
    encoder_combo,
    folder_button,
    offered_devices,
)
from core.encoder.sources import DEFAULT_MODEL
from core.names import POOLINGS


# Twin of app.gui.shell.inspect_bar.InspectBar, alike: the corpus model's row and the
#   inspected model's row; their choices differ (pooling and device here, "same as the corpus" there).
class ModelBar(QToolBar):
    def __init__(self, state, parent=None):
        super().__init__("Model", parent)
        self.setObjectName("model_bar")
        self.setMovable(False)
        self.state = state

        self.encoder = encoder_combo("encoder_combo", "Which code runs the network: our from-scratch encoder "
                                     "(core/encoder/model.py) or Hugging Face transformers")

        self.weights = WeightsCombo(self.refresh_weights, lambda: self.state.choice.model)
        self.weights.setObjectName("weights_combo")
        self.weights.addItems(WEIGHTS)
        self.refresh_weights()
        self.weights.setToolTip("minilm (bundled, offline), a Hugging Face id, a model folder or a "
                                "trained checkpoint folder. Type a name and press Enter.")
        self.browse = folder_button("Use a model folder or a trained checkpoint", self._browse)

        self.pooling = QComboBox()
        self.pooling.setObjectName("pooling_combo")
        for p in POOLINGS:
            self.pooling.addItem(POOLING_LABELS[p], p)
        self.pooling.setToolTip("How token vectors become one sentence vector")

        self.device = QComboBox()
        self.device.setObjectName("device_combo")
        self._add_devices()
        state.backend_changed.connect(self._add_devices)    # torch is imported by then
        state.backend_changed.connect(self._offer_attention_pooling)
        self.device.setToolTip("Where the model runs; the device in use is shown in the status bar")

        title = QLabel("<b>Corpus model</b>")
        title.setToolTip("The model the corpus is embedded with: search uses it. Changing it offers to "
                         "re-embed the corpus; to look inside another model, use “Inspect with”.")
        self.addWidget(title)
        for text, w in (("Encoder", self.encoder), ("Weights", self.weights), ("Pooling", self.pooling),
                        ("Device", self.device)):
            label = QLabel(f"  {text} ")
            label.setBuddy(w)
            self.addWidget(label)
            self.addWidget(w)
            if w is self.weights:
                self.addWidget(self.browse)
        self.evaluate = QToolButton()
        self.evaluate.setObjectName("evaluate_button")
        self.evaluate.setText("Evaluate…")
        self.evaluate.setToolTip("Score this model on sentence pairs (Spearman, Pearson, anisotropy; "
                                 "before and after whitening): the shipped set or a file of yours")
        self.evaluate.clicked.connect(self.open_evaluate)
        self.evaluate_dialog = None     # built the first time it is asked for
        self.addWidget(QLabel(" "))
        self.addWidget(self.evaluate)
        spacer = QWidget()
        spacer.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.addWidget(spacer)

        self._sync(state.choice)
        state.choice_changed.connect(self._sync)
        self.encoder.activated.connect(self._apply)
        self.weights.activated.connect(self._weights_chosen)
        self.weights.lineEdit().returnPressed.connect(self._weights_chosen)
        self.pooling.activated.connect(self._apply)
        self.device.activated.connect(self._apply)

    def _offer_attention_pooling(self, backend) -> None:
        """Attention pooling can be picked only for a model with a learned query vector."""
        if backend is None:
            return
        item = self.pooling.model().item(self.pooling.findData("attention"))
        learned = getattr(backend, "pooling_query", None) is not None
        item.setEnabled(learned)
        item.setToolTip("" if learned else "This model has no learned query vector: train one with "
                                           "attention pooling (Train tab, contrastive objective)")
        if not learned and self.state.choice.pooling == "attention":   # a model without a query took over
            self.pooling.setCurrentIndex(self.pooling.findData("mean"))
            self._apply()

    def _attention_allowed(self, choice: ModelChoice) -> bool:
        """Attention pooling needs a learned query: the chosen checkpoint was trained with one, or
        the loaded model of that name has one."""
        from core.encoder.catalog import trained_pooling
        backend = self.state.backend
        if choice.model == self.state.choice.model and backend is not None:
            return getattr(backend, "pooling_query", None) is not None
        return trained_pooling(choice.model) == "attention"

    def _add_devices(self, *_):
        """Offer every device torch sees (no torch import here: see offered_devices)."""
        for d in offered_devices():
            if self.device.findData(d) < 0:
                self.device.addItem(DEVICE_LABELS.get(d, d), d)

    def current_choice(self) -> ModelChoice:
        return ModelChoice(model=self.weights.currentText().strip() or DEFAULT_MODEL,
                           backend=self.encoder.currentData(),
                           pooling=self.pooling.currentData(),
                           device=self.device.currentData())

    def _apply(self, *_):
        choice = self.current_choice()
        if choice.pooling == "attention" and not self._attention_allowed(choice):
            # the item is disabled for such a model; a programmatic pick must not reach the state
            self.pooling.setCurrentIndex(self.pooling.findData(self.state.choice.pooling))
            self.state.status.emit(f"{choice.model} has no learned query vector: it cannot pool by attention")
            return
        if choice != self.state.choice:
            self.state.set_choice(choice)

    def _weights_chosen(self, *_):
        """Another model: it embeds with the pooling it was trained for (a checkpoint's own);
        other models keep the chosen pooling, but attention pooling only where a query was learned."""
        from core.encoder.catalog import trained_pooling
        model = self.weights.currentText().strip()
        if model != self.state.choice.model:
            pooling = trained_pooling(model) or ("mean" if self.pooling.currentData() == "attention" else None)
            if pooling is not None and self.pooling.findData(pooling) >= 0:
                self.pooling.setCurrentIndex(self.pooling.findData(pooling))
        self._apply()

    def _browse(self):
        folder = QFileDialog.getExistingDirectory(self, "Choose a model folder or trained checkpoint")
        if folder:
            self.set_weights(folder)
            self._weights_chosen()

    def open_evaluate(self, pairs_file: str = ""):
        """The Evaluate page as a dialog, on the corpus model, started at once (the shipped pairs
        unless a file was chosen there before or is given)."""
        from app.gui.panels.train.evaluate_view import EvaluateDialog
        if self.evaluate_dialog is None:
            self.evaluate_dialog = EvaluateDialog(self.state, self.window())
        view = self.evaluate_dialog.view
        view.use_corpus_model(pairs_file)
        self.evaluate_dialog.show()
        self.evaluate_dialog.raise_()
        if view.job is None:
            view.start()
        return self.evaluate_dialog

    def refresh_weights(self) -> None:
        """Add checkpoints trained since the list was made (the typed text is kept)."""
        add_trained_checkpoints(self.weights)

    def set_weights(self, name: str) -> None:
        if self.weights.findText(name) < 0:
            self.weights.addItem(name)
        self.weights.setCurrentText(name)

    def _sync(self, choice: ModelChoice):
        for combo, value in ((self.encoder, choice.backend), (self.pooling, choice.pooling),
                             (self.device, choice.device)):
            combo.blockSignals(True)
            i = combo.findData(value)
            if i < 0 and combo is self.device:
                combo.addItem(value, value)
                i = combo.count() - 1
            combo.setCurrentIndex(max(i, 0))
            combo.blockSignals(False)
        self.weights.blockSignals(True)
        self.set_weights(choice.model)
        self.weights.blockSignals(False)
