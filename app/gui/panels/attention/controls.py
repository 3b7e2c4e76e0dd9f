"""The attention panel's two control rows: one head or all heads, what to show (head, mean,
rollout), the layer and head steppers, hiding special tokens, renormalising, numbers, the colour
map and the export menu. Their widgets are the panel's attributes; its slots take their signals."""
from __future__ import annotations

from PySide6 import QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.heatmap import COLORMAPS, DEFAULT_COLORMAP
from core.inspect import attention_maps as A


def build_controls(panel, outer: QtWidgets.QVBoxLayout) -> None:
    """Add the control rows to `outer`."""
    bar = QtWidgets.QHBoxLayout()
    bar.setSpacing(6)
    panel.view_group = QtWidgets.QButtonGroup(panel)
    panel.one_button = QtWidgets.QToolButton(text="One head")
    panel.grid_button = QtWidgets.QToolButton(text="All heads")
    for i, b in enumerate((panel.one_button, panel.grid_button)):
        b.setCheckable(True)
        b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        panel.view_group.addButton(b, i)
        bar.addWidget(b)
    panel.one_button.setChecked(True)
    panel.one_button.setToolTip("One attention matrix, large, with token labels")
    panel.grid_button.setToolTip("Every head of every layer at once; click one to open it large")
    panel.view_group.idClicked.connect(panel.set_view)
    bar.addSpacing(10)

    bar.addWidget(QtWidgets.QLabel("Show"))
    panel.mode_combo = QtWidgets.QComboBox()
    for mode in A.MODES:
        panel.mode_combo.addItem(A.MODE_LABELS[mode], mode)
    panel.mode_combo.setToolTip("Single head · mean over the heads of a layer · attention rollout "
                                "through the layers up to the chosen one")
    panel.mode_combo.currentIndexChanged.connect(panel._mode_changed)
    bar.addWidget(panel.mode_combo)

    def stepper(name, tip):
        label = QtWidgets.QLabel(name)
        spin = QtWidgets.QSpinBox()
        spin.setRange(1, 1)
        spin.setToolTip(tip)
        slider = QtWidgets.QSlider(Qt.Orientation.Horizontal)
        slider.setRange(1, 1)
        slider.setFixedWidth(90)
        slider.setPageStep(1)
        slider.setToolTip(tip)
        spin.valueChanged.connect(slider.setValue)
        slider.valueChanged.connect(spin.setValue)
        spin.valueChanged.connect(panel.refresh)
        for w in (label, spin, slider):
            bar.addWidget(w)
        return label, spin, slider

    panel.layer_label, panel.layer_spin, panel.layer_slider = stepper("Layer", "Layer (Up/Down keys)")
    panel.head_label, panel.head_spin, panel.head_slider = stepper("Head", "Head (Left/Right keys)")
    # Two rows: in one, the controls overflowed a 1,200 px window in rollout mode.
    bar.addStretch(1)
    outer.addLayout(bar)
    bar = QtWidgets.QHBoxLayout()
    bar.setSpacing(6)

    panel.hide_special = QtWidgets.QCheckBox("Hide [CLS]/[SEP]")
    panel.hide_special.setToolTip("Remove the special tokens' rows and columns (padding is always hidden)")
    panel.renormalise = QtWidgets.QCheckBox("Renormalise")
    panel.renormalise.setToolTip("With special tokens hidden: rescale each row to sum to 1 over the "
                                 "visible tokens.\nOff: show the raw weights (rows sum to less than 1; "
                                 "the rest went to the hidden tokens).")
    panel.renormalise.setEnabled(False)
    panel.show_values = QtWidgets.QCheckBox("Numbers")
    panel.show_values.setToolTip("Write each weight in its cell (for long texts, zoom in with the wheel)")
    panel.hide_special.toggled.connect(panel.renormalise.setEnabled)
    for cb in (panel.hide_special, panel.renormalise, panel.show_values):
        cb.toggled.connect(panel.refresh)
        bar.addWidget(cb)
    bar.addStretch(1)

    panel.colormap_combo = QtWidgets.QComboBox()
    panel.colormap_combo.addItems(list(COLORMAPS))
    panel.colormap_combo.setCurrentText(DEFAULT_COLORMAP)
    panel.colormap_combo.setToolTip("Colour map")
    panel.colormap_combo.currentTextChanged.connect(panel._colormap_changed)
    bar.addWidget(panel.colormap_combo)

    panel.export_button = QtWidgets.QToolButton(text="Export")
    panel.export_button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QtWidgets.QMenu(panel.export_button)
    panel.export_png_action = menu.addAction("View as PNG…", lambda: panel.export_png())
    panel.export_csv_action = menu.addAction("This matrix as CSV…", lambda: panel.export_csv())
    menu.addSeparator()
    panel.export_all_csv_action = menu.addAction("All heads as CSV…", lambda: panel.export_all_csv())
    panel.export_npz_action = menu.addAction("All heads as NPZ (numpy)…", lambda: panel.export_npz())
    panel.export_button.setMenu(menu)
    panel.export_button.setEnabled(False)
    bar.addWidget(panel.export_button)
    outer.addLayout(bar)
