"""What to switch off, as one ``Intervention`` value: heads, per-layer attention/FFN/skip,
positions, scaling and temperature, zero or mean ablation, and patching from a sentence B.

    editor = InterventionEditor(); editor.set_model(n_layers, n_heads)
    editor.value() -> Intervention (without patch sites)     editor.patch_request() -> (B, sites)
    editor.changed.connect(...)                               editor.set_value(spec)  editor.clear()
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.panels.intervene.part_toggles import HeadToggles, LayerToggles
from app.gui.widgets.line_edit import long_line_edit
from core.intervene.spec import NOTHING, Intervention

MEAN_WHY = ("<b>Mean ablation</b> puts each switched-off head's <i>average</i> output over the sample corpus in "
            "its place. Zeroing hands the layers after it an input of a size and direction they never saw in "
            "training, so part of the drop is that shock. The mean keeps the input typical and removes only "
            "what the head says about <i>this</i> sentence: a more faithful measure of what the head carries.")


class InterventionEditor(QtWidgets.QWidget):
    changed = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)

        heads_box = QtWidgets.QGroupBox("Heads: click one to switch it off")
        heads_box.setToolTip("layer.head, counted from 1 as everywhere in the app")
        lay = QtWidgets.QVBoxLayout(heads_box)
        self.heads = HeadToggles()
        lay.addWidget(self.heads)
        mode = QtWidgets.QHBoxLayout()
        self.zero_button = QtWidgets.QRadioButton("zero")
        self.mean_button = QtWidgets.QRadioButton("mean (more faithful)")
        self.zero_button.setChecked(True)
        self.zero_button.setToolTip("The head's output is replaced by zeros (its attention pattern is "
                                    "still computed: what it finds is thrown away)")
        self.mean_button.setToolTip(MEAN_WHY)
        mode.addWidget(QtWidgets.QLabel("ablation:"))
        mode.addWidget(self.zero_button)
        mode.addWidget(self.mean_button)
        mode.addStretch(1)
        lay.addLayout(mode)
        outer.addWidget(heads_box)

        layers_box = QtWidgets.QGroupBox("Layers")
        self.layers = LayerToggles()
        QtWidgets.QVBoxLayout(layers_box).addWidget(self.layers)
        outer.addWidget(layers_box)

        other = QtWidgets.QGroupBox("Positions and attention scores")
        form = QtWidgets.QGridLayout(other)
        self.positions = QtWidgets.QComboBox()
        self.positions.addItems(["keep", "off", "shuffle"])
        self.positions.setObjectName("positions_mode")
        self.positions.setToolTip("off: no position embeddings (the model sees a bag of tokens); "
                                  "shuffle: each token gets another token's position (seeded)")
        self.shuffle_seed = QtWidgets.QSpinBox()
        self.shuffle_seed.setRange(0, 1_000_000)
        self.shuffle_seed.setPrefix("seed ")
        self.shuffle_seed.setObjectName("shuffle_seed")
        self.shuffle_seed.setToolTip("The shuffle's seed: the same seed, the same positions")
        self.no_scale = QtWidgets.QCheckBox("no 1/√d_k")
        self.no_scale.setToolTip("Scores Q·Kᵀ without the division by √d_k: sharper softmax, closer to one-hot")
        self.temperature = QtWidgets.QDoubleSpinBox()
        self.temperature.setRange(0.05, 20.0)
        self.temperature.setSingleStep(0.25)
        self.temperature.setValue(1.0)
        self.temperature.setPrefix("T ")
        self.temperature.setToolTip("Softmax temperature: every attention score is divided by T before the "
                                    "softmax: T > 1 flattens, T < 1 sharpens")
        form.addWidget(QtWidgets.QLabel("positions"), 0, 0)
        form.addWidget(self.positions, 0, 1)
        form.addWidget(self.shuffle_seed, 0, 2)
        form.addWidget(self.no_scale, 1, 0, 1, 2)
        form.addWidget(self.temperature, 1, 2)
        form.setColumnStretch(1, 1)
        outer.addWidget(other)

        patch = QtWidgets.QGroupBox("Patching from sentence B")
        patch.setObjectName("patching_box")
        patch.setToolTip("Run sentence A with some numbers taken from sentence B")
        pform = QtWidgets.QFormLayout(patch)
        pform.setRowWrapPolicy(QtWidgets.QFormLayout.RowWrapPolicy.DontWrapRows)
        self.text_b = long_line_edit("", "Sentence B, e.g. A with one word changed")
        self.sites = long_line_edit("", "L5.H3, L2.resid@cat, L4.ffn")
        self.sites.setToolTip("L5.H3: head 3's output in layer 5; L2.resid@cat: the residual stream after layer 2 "
                              "at the token 'cat' (or a position, @3); L4.ffn: the FFN's output. Without @TOKEN "
                              "the site is patched at every token (A and B need as many tokens)")
        pform.addRow("B", self.text_b)
        self.sites.setObjectName("patch_sites")
        pform.addRow("sites", self.sites)
        self.alignment_label = QtWidgets.QLabel()
        self.alignment_label.setWordWrap(True)
        self.alignment_label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.alignment_label.setObjectName("patch_alignment")
        pform.addRow(self.alignment_label)
        self.patch_box = patch
        outer.addWidget(patch)
        outer.addStretch(1)
        for box in (heads_box, layers_box, other, patch):
            box.layout().setContentsMargins(6, 4, 6, 4)
            box.layout().setSpacing(3)

        self.heads.toggled.connect(self.changed)
        self.layers.toggled.connect(self.changed)
        for w in (self.zero_button, self.no_scale):
            w.toggled.connect(self.changed)
        self.positions.currentIndexChanged.connect(self.changed)
        self.shuffle_seed.valueChanged.connect(self.changed)
        self.temperature.valueChanged.connect(self.changed)
        self.text_b.textChanged.connect(self.changed)
        self.sites.textChanged.connect(self.changed)

    def set_model(self, n_layers: int, n_heads: int) -> None:
        self.heads.set_shape(n_layers, n_heads)
        self.layers.set_layers(n_layers)

    def value(self) -> Intervention:
        attention_off, ffn_off, skip = self.layers.value()
        return Intervention(heads=self.heads.value(), head_mode="zero" if self.zero_button.isChecked() else "mean",
                            attention_off=attention_off, ffn_off=ffn_off, skip=skip,
                            positions=self.positions.currentText(), shuffle_seed=self.shuffle_seed.value(),
                            no_scale=self.no_scale.isChecked(), temperature=round(self.temperature.value(), 4))

    def patch_request(self) -> tuple[str, tuple]:
        """(sentence B, the sites as typed); sites () when nothing is patched."""
        sites = tuple(s.strip() for s in self.sites.text().split(",") if s.strip())
        return self.text_b.text(), sites

    def set_value(self, spec: Intervention) -> None:
        """Show ``spec`` (its patch sites are not editable here: they come from B and sites)."""
        widgets = (self.heads, self.layers, self.zero_button, self.mean_button, self.positions,
                   self.shuffle_seed, self.no_scale, self.temperature)
        for w in widgets:
            w.blockSignals(True)
        try:
            self.heads.set_value(spec.heads)
            self.layers.set_value(spec.attention_off, spec.ffn_off, spec.skip)
            (self.zero_button if spec.head_mode == "zero" else self.mean_button).setChecked(True)
            self.positions.setCurrentText(spec.positions)
            self.shuffle_seed.setValue(spec.shuffle_seed)
            self.no_scale.setChecked(spec.no_scale)
            self.temperature.setValue(spec.temperature)
        finally:
            for w in widgets:
                w.blockSignals(False)
        self.changed.emit()

    def clear(self) -> None:
        for edit in (self.text_b, self.sites):
            edit.blockSignals(True)
            edit.clear()
            edit.blockSignals(False)
        self.alignment_label.clear()
        self.set_value(NOTHING)

    def show_alignment(self, alignment) -> None:
        """A's and B's tokens and, per site, which of B's tokens each of A's takes."""
        if alignment is None:
            self.alignment_label.clear()
            return
        lines = [f"A: {html.escape(' '.join(alignment.tokens_a))}", f"B: {html.escape(' '.join(alignment.tokens_b))}"]
        for site, pairs in alignment.pairs.items():
            shown = ", ".join(f"{html.escape(alignment.tokens_a[a])} ← {html.escape(alignment.tokens_b[b])}"
                              for a, b in list(pairs.items())[:8])
            lines.append(f"<b>{site.describe()}</b>: {shown}{' …' if len(pairs) > 8 else ''}")
        self.alignment_label.setText("<br>".join(lines))

    def show_refusal(self, message: str) -> None:
        self.alignment_label.setText(f"<span style='color:#c0392b'><b>Cannot patch:</b> {html.escape(message)}</span>")
