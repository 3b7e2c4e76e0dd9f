"""Input → weights → output, side by side, for a walkthrough step that has learned weights.

    strip = WeightsStrip()
    strip.set_step(walkthrough, step)      # hidden for steps without weights
    strip.heatmaps                         # {"input": ..., "W_Q": ..., "b_Q": ..., "output": ...}

The input is named as the step it came from (click its name to go there); the weights are the
model's real tensors (core/walkthrough/weights.py), shaped as the formula reads them.
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.matrix_heatmap import MatrixHeatmap

STRIP_HEIGHT = 140        # with a 220-px step heatmap under it, a step fits the page at 1200×780


class WeightBox(QtWidgets.QWidget):
    """A title over a small heatmap (no colour bar: the value is on hover)."""

    clicked = QtCore.Signal()

    def __init__(self, key: str, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        self.title = QtWidgets.QLabel()
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.title.setObjectName(f"weights_title_{key}")
        self.title.setWordWrap(True)          # a long input title wraps: the strip fits the page's width
        self.title.linkActivated.connect(lambda _href: self.clicked.emit())
        self.heatmap = MatrixHeatmap(self, row_title="", col_title="")
        self.heatmap.setMinimumHeight(60)
        self.heatmap.ci.removeItem(self.heatmap.colorbar)
        self.heatmap.colorbar.hide()
        self.heatmap.plot.hideAxis("top")
        if key not in ("input", "output"):
            self.heatmap.plot.hideAxis("left")      # a weight's rows are dimensions, not tokens
        lay.addWidget(self.title)
        lay.addWidget(self.heatmap, 1)
        self.plain_title = ""

    def title_width(self) -> int:
        """Pixels the title needs on one line."""
        return self.title.fontMetrics().horizontalAdvance(self.plain_title) + 8

    def set(self, values, row_labels, title: str, link: bool = False, tip: str = "") -> None:
        self.plain_title = title
        self.title.setText(f"<a href='#'>{html.escape(title)}</a>" if link else html.escape(title))
        self.title.setToolTip(f"{title}: click to go to that step" if link else (tip or title))
        self.heatmap.show_matrix(values, row_labels, title="")


class WeightsStrip(QtWidgets.QFrame):
    """A row of small heatmaps: the input step, the two weight tensors, the output. Built once
    and refilled, since every step with weights has exactly two (W and b, or γ and β)."""

    input_clicked = QtCore.Signal(str)       # the input step's name
    weight_clicked = QtCore.Signal(object, int, int)   # a core.walkthrough.weights.Weight, row, column

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("walkthrough_weights_strip")
        self.weights: list = []              # the two Weight objects shown
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.input_box, self.first, self.second, self.output_box = (
            WeightBox(k, self) for k in ("input", "weight", "bias", "output"))
        self.input_box.clicked.connect(lambda: self.input_step and self.input_clicked.emit(self.input_step))
        self.input_note = QtWidgets.QLabel("input: the output of the last layer\n(shown when the last layer is)")
        self.input_note.setWordWrap(True)
        for k, box in enumerate((self.first, self.second)):
            box.heatmap.cell_clicked.connect(
                lambda i, j, k=k: self.weight_clicked.emit(self.weights[k], i, j) if self.weights else None)
        self.ops = [_arrow(t) for t in ("·", "+", "→")]
        for widget, stretch in ((self.input_box, 3), (self.input_note, 2), (self.ops[0], 0), (self.first, 3),
                                (self.ops[1], 0), (self.second, 1), (self.ops[2], 0), (self.output_box, 3)):
            row.addWidget(widget, stretch)
        self.heatmaps: dict[str, MatrixHeatmap] = {}
        self.input_step: str | None = None
        self.setFixedHeight(STRIP_HEIGHT)
        self.hide()

    def set_step(self, walkthrough, step) -> None:
        weights = list(getattr(step, "weights", []) or [])
        self.heatmaps = {}
        self.weights = weights if len(weights) == 2 else []
        if len(weights) != 2:
            self.input_step = None
            self.hide()
            return
        self.input_step = getattr(step, "input_step", None)
        names = [s.name for s in walkthrough.steps]
        has_input = self.input_step in names
        self.input_box.setVisible(has_input)
        self.input_note.setVisible(not has_input)
        if has_input:
            source = walkthrough.step(self.input_step)
            self.input_box.set(source.values, source.row_labels,
                               f"input: step {names.index(self.input_step) + 1}, {source.title}", link=True)
            self.heatmaps["input"] = self.input_box.heatmap
        matrix = np.ndim(weights[0].values) == 2
        self.ops[0].setText("·" if matrix else "⊙")
        layout = self.layout()
        for box, w in ((self.first, weights[0]), (self.second, weights[1])):
            values = np.asarray(w.values)
            rows = [str(i) for i in range(values.shape[0])] if values.ndim == 2 else [w.symbol]
            # a vector's length is the step's width (the shape line says it): only a matrix's shape
            shape = f"{' × '.join(map(str, values.shape))} " if values.ndim == 2 else ""
            box.set(values, rows, f"{w.symbol} {shape}[{values.min():.3g} … {values.max():.3g}]",
                    tip=w.key + (f"\n{w.note}" if w.note else "") + f"\nshape {' × '.join(map(str, values.shape))}")
            self.heatmaps[w.symbol] = box.heatmap
        self.output_box.set(step.values, step.row_labels, f"output: {step.title}")
        self.heatmaps["output"] = self.output_box.heatmap
        # the boxes share the row as their titles need it, so that each title fits on one line
        for box in (self.input_box, self.first, self.second, self.output_box):
            layout.setStretchFactor(box, box.title_width())
        self.show()


def _arrow(text: str) -> QtWidgets.QLabel:
    arrow = QtWidgets.QLabel(text)
    arrow.setStyleSheet("font-size: 18px; font-weight: bold;")
    return arrow
