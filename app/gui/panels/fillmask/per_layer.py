"""The fill-mask per-layer table: the MLM head's top guesses after each layer, shaded by
probability, the final top guess in bold."""
from __future__ import annotations

from PySide6 import QtGui, QtWidgets
from PySide6.QtCore import Qt


def layer_names(n_rows: int, n_layers: int) -> list[str]:
    """Row names of the per-layer table: "embeddings", then layers 1..L."""
    if n_rows == n_layers + 1:
        return ["embeddings"] + [f"layer {i}" for i in range(1, n_rows)]
    return [f"layer {i}" for i in range(1, n_rows + 1)]


def paint_layer_table(t: QtWidgets.QTableWidget, layers: list, n_layers: int, final: set) -> None:
    """One row per layer (see layer_names), one column per guess; `final`: the tokens in bold."""
    k = max(len(r) for r in layers)
    t.setRowCount(len(layers))
    t.setColumnCount(k)
    t.setHorizontalHeaderLabels([f"#{i + 1}" for i in range(k)])
    t.setVerticalHeaderLabels(layer_names(len(layers), n_layers))
    top = max((float(p["score"]) for row in layers for p in row), default=1.0) or 1.0
    for r, row in enumerate(layers):
        for c, p in enumerate(row):
            item = QtWidgets.QTableWidgetItem(f"{p['token']}  {100 * p['score']:.1f}%")
            s = max(0.0, min(1.0, float(p["score"]) / top))     # colour: share of the table's maximum
            bg = _blend(s)
            item.setBackground(bg)
            item.setForeground(QtGui.QColor("white") if bg.lightness() < 150 else QtGui.QColor("black"))
            if p["token"] in final:
                f = item.font()
                f.setBold(True)
                item.setFont(f)
            item.setToolTip(f"{p['token']}: p = {p['score']:.4f}")
            t.setItem(r, c, item)


def _blend(s: float) -> QtGui.QColor:
    """White -> deep blue for a probability (same palette as the attention views)."""
    lo, hi = QtGui.QColor("#f7fbff"), QtGui.QColor("#08306b")
    s = s ** 0.6                          # small probabilities stay visible
    return QtGui.QColor(int(lo.red() + (hi.red() - lo.red()) * s), int(lo.green() + (hi.green() - lo.green()) * s),
                        int(lo.blue() + (hi.blue() - lo.blue()) * s))


def build_layer_box(panel) -> QtWidgets.QWidget:
    """The per-layer box (title, mask chooser, table), hidden until a result has layers; its
    widgets are the panel's attributes (layer_title, layer_mask_combo, layer_table, layer_box)."""
    layer_box = QtWidgets.QWidget()
    ll = QtWidgets.QVBoxLayout(layer_box)
    ll.setContentsMargins(0, 4, 0, 0)
    lh = QtWidgets.QHBoxLayout()
    panel.layer_title = QtWidgets.QLabel("<b>Per layer</b>: the top guesses if the model stopped "
                                         "after each layer (darker = more probable; bold = the final top guess)")
    panel.layer_title.setTextFormat(Qt.TextFormat.RichText)
    panel.layer_mask_combo = QtWidgets.QComboBox()
    panel.layer_mask_combo.currentIndexChanged.connect(panel._show_layers)
    lh.addWidget(panel.layer_title, 1)
    lh.addWidget(panel.layer_mask_combo)
    ll.addLayout(lh)
    panel.layer_table = QtWidgets.QTableWidget()
    panel.layer_table.setObjectName("fillmask_layers")
    panel.layer_table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    panel.layer_table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.NoSelection)
    panel.layer_table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
    panel.layer_table.verticalHeader().setDefaultSectionSize(panel.fontMetrics().height() + 6)
    ll.addWidget(panel.layer_table)
    panel.layer_box = layer_box
    layer_box.hide()
    return layer_box
