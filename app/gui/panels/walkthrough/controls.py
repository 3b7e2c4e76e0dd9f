"""The Step by step tab's control row: the layer and head shown, the pooling, the three views
(Steps, Positions, Batch of two) and Export notebook. Changing the layer, head or pooling
explains again after a short pause (the panel's debounce timer)."""
from __future__ import annotations

from PySide6 import QtWidgets

from core.names import POOLINGS


def build_controls(panel, outer: QtWidgets.QVBoxLayout) -> None:
    """Add the control row to `outer`; its widgets become the panel's attributes."""
    bar = QtWidgets.QHBoxLayout()
    panel.layer_spin = QtWidgets.QSpinBox(prefix="Layer ")
    panel.head_spin = QtWidgets.QSpinBox(prefix="Head ")
    layer_tip = "The layer whose attention and feed-forward steps are shown (the other layers still run)"
    for spin, tip in ((panel.layer_spin, layer_tip),
                      (panel.head_spin, "The attention head shown in the Q, K, V, scores and weights steps")):
        spin.setRange(1, 1)
        spin.setToolTip(tip)
        spin.valueChanged.connect(lambda _v: panel._debounce.start())
        bar.addWidget(spin)
    panel.pooling_combo = QtWidgets.QComboBox()
    panel.pooling_combo.addItems(POOLINGS)
    panel.pooling_combo.setCurrentText(getattr(panel.state, "pooling", "mean"))
    panel.pooling_combo.setToolTip("How the token vectors become one sentence vector (the pooled step)")
    panel.pooling_combo.currentTextChanged.connect(lambda _t: panel._debounce.start())
    bar.addWidget(panel.pooling_combo)
    bar.addSpacing(12)
    panel.view_group = QtWidgets.QButtonGroup(panel)
    for i, text in enumerate(("Steps", "Positions", "Batch of two")):
        b = QtWidgets.QToolButton(text=text)
        b.setCheckable(True)
        panel.view_group.addButton(b, i)
        bar.addWidget(b)
    panel.view_group.button(0).setChecked(True)
    panel.view_group.idClicked.connect(panel.set_view)
    bar.addStretch(1)
    panel.export_button = QtWidgets.QPushButton("Export notebook…")
    panel.export_button.setToolTip("A Jupyter notebook that recomputes every step from the model's "
                                   "weights with NumPy and checks each against these numbers")
    panel.export_button.setEnabled(False)
    panel.export_button.clicked.connect(lambda: panel.export_notebook())
    bar.addWidget(panel.export_button)
    outer.addLayout(bar)
