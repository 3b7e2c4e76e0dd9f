"""Input → weights → output, side by side, for a walkthrough step that has learned weights.

    strip = WeightsStrip()
    strip.set_step(walkthrough, step)      # hidden for steps without weights
    strip.heatmaps                         # {"input": ..., "W_Q": ..., "b_Q": ..., "output": ...}

The input is named as the step it came from (click its name to go there); the weights are the
model's real tensors (core/walkthrough_weights.py), shaped as the formula reads them.
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.matrix_heatmap import MatrixHeatmap

STRIP_HEIGHT = 170


class WeightsStrip(QtWidgets.QFrame):
    """A row of small heatmaps: the input step, each weight tensor, the output."""

    input_clicked = QtCore.Signal(str)       # the input step's name

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("walkthrough_weights_strip")
        self.row = QtWidgets.QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.heatmaps: dict[str, MatrixHeatmap] = {}
        self.input_step: str | None = None
        self.setFixedHeight(STRIP_HEIGHT)
        self.hide()

    def set_step(self, walkthrough, step) -> None:
        weights = list(getattr(step, "weights", []) or [])
        self._clear()
        if not weights:
            self.hide()
            return
        self.input_step = getattr(step, "input_step", None)
        names = [s.name for s in walkthrough.steps]
        if self.input_step in names:
            source = walkthrough.step(self.input_step)
            title = f"input: step {names.index(self.input_step) + 1}, {source.title}"
            self._add("input", source.values, source.row_labels, title, link=self.input_step)
        else:
            self._add_note("input: the output of the last layer\n(its last step is not shown for this layer)")
        self._arrow("·" if weights[0].values.ndim == 2 else "⊙")
        for k, w in enumerate(weights):
            values = np.asarray(w.values)
            rows = [str(i) for i in range(values.shape[0])] if values.ndim == 2 else [w.symbol]
            self._add(w.symbol, values, rows, f"{w.symbol}  {' × '.join(map(str, values.shape))}",
                      tip=f"{w.key}" + (f"\n{w.note}" if w.note else ""))
            if k < len(weights) - 1:
                self._arrow("+")
        self._arrow("→")
        self._add("output", step.values, step.row_labels, f"output: {step.title}")
        self.show()

    def _clear(self) -> None:
        while self.row.count():
            item = self.row.takeAt(0)
            widget = item.widget()
            if widget is not None:              # off screen now: deleteLater alone would leave it drawn
                widget.hide()
                widget.deleteLater()
        self.heatmaps = {}

    def _add(self, key, values, row_labels, title, link=None, tip="") -> None:
        box = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(1)
        label = QtWidgets.QLabel(f"<a href='#'>{html.escape(title)}</a>" if link else html.escape(title))
        label.setTextFormat(Qt.TextFormat.RichText)
        label.setObjectName(f"weights_title_{key}")
        label.setToolTip(tip or title)
        if link:
            label.linkActivated.connect(lambda _href, s=link: self.input_clicked.emit(s))
            label.setToolTip(f"{title}: click to go to that step")
        hm = MatrixHeatmap(box, row_title="", col_title="")
        hm.setMinimumHeight(60)
        hm.show_matrix(values, row_labels, title="")
        hm.ci.removeItem(hm.colorbar)          # small multiples: the value is on hover, not on a bar
        hm.colorbar.hide()
        hm.plot.hideAxis("top")
        if key not in ("input", "output"):
            hm.plot.hideAxis("left")            # a weight's rows are dimensions, not tokens
        lay.addWidget(label)
        lay.addWidget(hm, 1)
        stretch = 1 if np.ndim(values) == 1 else 3
        self.row.addWidget(box, stretch)
        self.heatmaps[key] = hm

    def _add_note(self, text: str) -> None:
        note = QtWidgets.QLabel(text)
        note.setWordWrap(True)
        self.row.addWidget(note, 2)

    def _arrow(self, text: str) -> None:
        arrow = QtWidgets.QLabel(text)
        arrow.setStyleSheet("font-size: 18px; font-weight: bold;")
        self.row.addWidget(arrow, 0)
