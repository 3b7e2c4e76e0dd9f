"""Clickable switches for the parts of an encoder: one button per head (an L x H grid, named
"3.5" as everywhere in the app), and per layer its attention, its FFN and the whole block.

    heads = HeadToggles(); heads.set_shape(6, 12); heads.toggled.connect(...)
    heads.value() -> frozenset {(layer, head)} 0-based;  heads.set_value({(2, 4)})
    layers = LayerToggles(); layers.value() -> (attention_off, ffn_off, skip) frozensets
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

OFF_STYLE = "QToolButton:checked { background: #c0392b; color: white; font-weight: bold; }"


def _tight_grid(owner: QtWidgets.QWidget, across: int, down: int) -> QtWidgets.QGridLayout:
    """`owner`'s grid of switches: no margins, `across` and `down` pixels between them."""
    grid = QtWidgets.QGridLayout(owner)
    grid.setContentsMargins(0, 0, 0, 0)
    grid.setHorizontalSpacing(across)
    grid.setVerticalSpacing(down)
    return grid


class HeadToggles(QtWidgets.QWidget):
    toggled = QtCore.Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.grid = _tight_grid(self, 2, 1)
        self.buttons: dict[tuple[int, int], QtWidgets.QToolButton] = {}
        self.shape = (0, 0)
        self.setStyleSheet(OFF_STYLE)

    def set_shape(self, n_layers: int, n_heads: int) -> None:
        """One button per head of a model with ``n_layers`` x ``n_heads``; what was on and still
        exists stays on."""
        if (n_layers, n_heads) == self.shape:
            return
        keep = self.value()
        _empty(self.grid)
        self.buttons = {}
        self.shape = (n_layers, n_heads)
        width = cell_width(self, n_heads)
        for h in range(n_heads):
            label = QtWidgets.QLabel(str(h + 1))
            label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            label.setFixedWidth(width)           # "9 10 11 12", never "9101112"
            label.setObjectName(f"head_title_{h + 1}")
            self.grid.addWidget(label, 0, h + 1)
        for l in range(n_layers):
            self.grid.addWidget(QtWidgets.QLabel(f"L{l + 1}"), l + 1, 0)
            for h in range(n_heads):
                b = QtWidgets.QToolButton()
                b.setCheckable(True)
                b.setFixedSize(width, 18)
                b.setToolTip(f"head {l + 1}.{h + 1} (layer {l + 1}, head {h + 1}): click to switch it off")
                b.setObjectName(f"head_{l + 1}_{h + 1}")
                b.toggled.connect(self.toggled)
                self.grid.addWidget(b, l + 1, h + 1)
                self.buttons[(l, h)] = b
        self.set_value({k for k in keep if k in self.buttons})

    def value(self) -> frozenset:
        return frozenset(k for k, b in self.buttons.items() if b.isChecked())

    def set_value(self, heads) -> None:
        heads = set(heads)
        for k, b in self.buttons.items():
            b.blockSignals(True)
            b.setChecked(k in heads)
            b.blockSignals(False)
        self.toggled.emit()

    def click(self, layer: int, head: int) -> None:
        """Toggle one head as a click does (0-based)."""
        self.buttons[(layer, head)].click()


class LayerToggles(QtWidgets.QWidget):
    """Per layer: attention off, FFN off, block skipped: a row per kind, a column per layer (a
    deep model's layers fit the editor's width, three rows its height)."""
    toggled = QtCore.Signal()
    KINDS = (("attention", "attention off", "Remove this layer's attention branch: the residual adds 0 "
              "instead of what the heads found"),
             ("ffn", "FFN off", "Remove this layer's feed-forward branch: the residual adds 0"),
             ("skip", "skip", "Skip the whole block: its input is passed on unchanged"))

    def __init__(self, parent=None):
        super().__init__(parent)
        self.grid = _tight_grid(self, 4, 0)
        self.boxes: dict[tuple[str, int], QtWidgets.QCheckBox] = {}
        self.n_layers = 0

    def set_layers(self, n_layers: int) -> None:
        if n_layers == self.n_layers:
            return
        keep = self.value()
        _empty(self.grid)
        self.boxes, self.n_layers = {}, n_layers
        self.grid.addWidget(QtWidgets.QLabel("<i>layer</i>"), 0, 0)
        for l in range(n_layers):
            label = QtWidgets.QLabel(str(l + 1))
            label.setAlignment(QtCore.Qt.AlignmentFlag.AlignCenter)
            self.grid.addWidget(label, 0, l + 1)
        for r, (kind, title, tip) in enumerate(self.KINDS):
            self.grid.addWidget(QtWidgets.QLabel(title), r + 1, 0)
            for l in range(n_layers):
                box = QtWidgets.QCheckBox()
                box.setToolTip(f"Layer {l + 1}: {tip}")
                box.setObjectName(f"{kind}_{l + 1}")
                box.toggled.connect(self.toggled)
                self.grid.addWidget(box, r + 1, l + 1, QtCore.Qt.AlignmentFlag.AlignCenter)
                self.boxes[(kind, l)] = box
        self.set_value(*[{l for l in part if l < n_layers} for part in keep])

    def value(self) -> tuple[frozenset, frozenset, frozenset]:
        return tuple(frozenset(l for (k, l), b in self.boxes.items() if k == kind and b.isChecked())
                     for kind, _, _ in self.KINDS)

    def set_value(self, attention_off=(), ffn_off=(), skip=()) -> None:
        wanted = {"attention": set(attention_off), "ffn": set(ffn_off), "skip": set(skip)}
        for (kind, l), box in self.boxes.items():
            box.blockSignals(True)
            box.setChecked(l in wanted[kind])
            box.blockSignals(False)
        self.toggled.emit()


def cell_width(widget: QtWidgets.QWidget, n: int) -> int:
    """A head button's width: its column title ("12") with room either side, in this font."""
    return max(22, widget.fontMetrics().horizontalAdvance(str(max(n, 1))) + 8)


def _empty(grid: QtWidgets.QGridLayout) -> None:
    """Remove every widget of a grid that is rebuilt for another model's shape."""
    while grid.count():
        item = grid.takeAt(0)
        if item.widget() is not None:
            item.widget().deleteLater()
