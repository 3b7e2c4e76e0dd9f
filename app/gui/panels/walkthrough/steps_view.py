"""One step of the encoder walkthrough, drawn: what it does, its formula and shapes, its
matrices as labelled heatmaps, a badge that says the numbers are the model's, and - for the
attention steps - the weighted sum of V built up for the query row that was clicked.

    view = StepView()
    view.set_step(walkthrough, step)           # a core.walkthrough.steps Step of that Walkthrough
    view.row_clicked.connect(...)              # a query row of the weights (softmax) step
    view.value_panel                           # the clicked cell, pinned (value_panel.py)
    view.build_up.rows                         # the terms weights[i, j] * v[j] and their sum

Everything here is drawing: the numbers come from ``core.walkthrough.steps`` (computed in a worker).
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.panels.walkthrough.value_panel import ValuePanel
from app.gui.panels.walkthrough.weights_view import WeightsStrip
from app.gui.panels.walkthrough.wide_summary import WideSummaryTable
from app.gui.widgets.labels import rich_label
from app.gui.widgets.matrix_heatmap import MatrixHeatmap
from app.gui.widgets.token_axis import MAX_EXTENT_PX, MAX_LABEL_CHARS
from core.walkthrough.steps import TOLERANCE as MATCH_LIMIT

NUMBERS_MAX_ROWS = 64      # with "Numbers" on, matrices up to this many rows grow tall enough to print in
NUMBER_ROW_PX = 26         # a row's height then (cells need MIN_CELL_PX_FOR_VALUES to be written in)
READABLE_ROW_PX = 18       # the weighted sum's rows: never lower than a line of its labels (the page scrolls)
PATCHED_LABEL_CHARS, PATCHED_LABEL_PX = 40, 220     # "because ← since (B)" whole, left of a patched step
STEP_CHROME_PX = 90       # a step heatmap's column labels and margins around its rows (no title)
HEATMAP_CHROME_PX = 110    # a heatmap's title, column labels and margins around its rows
# a step whose max |difference| from the model is above MATCH_LIMIT shows red
GREEN, RED, GREY = "#1e7b34", "#c0392b", "#777777"


def format_diff(diff: float) -> str:
    """3.2e-07 -> "3e-7": one significant digit, as the badge writes it."""
    if diff == 0:
        return "0"
    mantissa, exponent = f"{diff:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def badge_text(diff: float | None) -> str:
    """The badge beside each step: equal to the model's own intermediate, or not (or unchecked)."""
    if diff is None:
        return "not compared with the model"
    sign = "=" if diff <= MATCH_LIMIT else "≠"
    return f"{sign} model (max |Δ| {format_diff(diff)})"


def badge_color(diff: float | None) -> str:
    return GREY if diff is None else GREEN if diff <= MATCH_LIMIT else RED


def masked_note(step) -> str:
    """For a score matrix with masked (−∞) cells: how many, and, when they are exactly the cells
    above the diagonal, that this is the causal mask. "" when nothing is masked."""
    values = np.asarray(step.values, np.float64)
    masked = np.isneginf(values)
    if values.ndim != 2 or not masked.any():
        return ""
    n, T = int(masked.sum()), values.shape[0]
    if values.shape[0] == values.shape[1] and np.array_equal(masked, np.triu(np.ones((T, T), bool), 1)):
        return (f"Causal mask: the {n} scores above the diagonal are −∞ (drawn at the bottom of the "
                "scale), so each token attends only to itself and the tokens before it.")
    return f"{n} of {values.size} scores are −∞ (masked keys): softmax gives them weight 0."


def weighted_sum_terms(weights_row: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The terms of head_output[i] = Σ_j weights[i, j] · v[j]: row j is weights[i, j] · v[j]."""
    return np.asarray(weights_row, np.float64)[:, None] * np.asarray(v, np.float64)


class Badge(QtWidgets.QLabel):
    """A small rounded label: green when the step equals the model's own intermediate."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("walkthrough_badge")
        self.set_diff(None)

    def set_diff(self, diff: float | None, fp32_diff: float | None = None, fp32_rel: float | None = None) -> None:
        color = badge_color(diff)
        self.setText(badge_text(diff))
        self.setStyleSheet(f"QLabel {{ color: white; background: {color}; border-radius: 8px; "
                           f"padding: 2px 8px; font-weight: bold; }}")
        tip = ("The largest |difference| between this matrix, computed step by step in NumPy, and the same "
               "intermediate captured from the torch encoder's forward pass on the same input (same weights, "
               "float64)" if diff is not None else "The core did not compare this step with the model")
        if fp32_diff is not None:
            tip += (f".\nAgainst the fp32 forward pass the app embeds with: max |Δ| {fp32_diff:.1e}"
                    + (f" ({fp32_rel:.1e} of the largest value: fp32 rounding)" if fp32_rel is not None else ""))
        self.setToolTip(tip)


class BuildUpView(QtWidgets.QWidget):
    """head_output[i] = Σ_j weights[i, j] · v[j], written out for one query token i."""

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.label = rich_label("walkthrough_buildup_label", "Click a query row to build its weighted sum of V.")
        self.heatmap = MatrixHeatmap(self, row_title="weights[i, j] · v[j] (weight · token)",
                                     col_title="head dimension")
        self.heatmap.setMinimumHeight(160)
        self.numbers = False               # "Numbers" on: rows tall enough to print in
        lay.addWidget(self.label)
        lay.addWidget(self.heatmap, 1)
        self.query = -1
        self.rows = np.zeros((0, 0))        # the terms, then their sum as the last row
        self.total = np.zeros(0)

    def show_query(self, i: int, tokens: list[str], weights: np.ndarray, v: np.ndarray,
                   head_output: np.ndarray | None) -> None:
        terms = weighted_sum_terms(weights[i], v)
        self.query = i
        self.total = terms.sum(axis=0)
        self.rows = np.vstack([terms, self.total[None, :]])
        labels = [f"{weights[i, j]:.3f}·{tok}" for j, tok in enumerate(tokens)] + ["Σ = head_output"]
        self.heatmap.show_matrix(self.rows, labels, title=f"Weighted sum of V for query {tokens[i]!r} (row {i})",
                                 signed=True)
        self._fit_rows()
        top = np.argsort(-weights[i])[:3]
        parts = ", ".join(f"{html.escape(tokens[j])} {weights[i, j]:.2f}" for j in top)
        check = ""
        if head_output is not None:
            diff = float(np.abs(self.total - np.asarray(head_output)[i]).max())
            check = (f" The sum equals row {i} of <b>head_output</b> "
                     f"(max |Δ| {format_diff(diff)}).")
        self.label.setText(f"<b>{html.escape(tokens[i])}</b> takes most from {parts}. Each row below is one "
                           f"value vector v[j] scaled by its weight; the last row is their sum.{check}")

    def set_numbers(self, on: bool) -> None:
        self.numbers = bool(on)
        self._fit_rows()
        self.heatmap.set_show_values(on)

    def _fit_rows(self) -> None:
        """One row per token and the sum: each tall enough to read its label (to print in, with
        Numbers on), however long the sentence; the page scrolls instead."""
        rows = self.rows.shape[0]
        pitch = max(NUMBER_ROW_PX if self.numbers and rows <= NUMBERS_MAX_ROWS else READABLE_ROW_PX,
                    self.fontMetrics().height() + 2)
        self.heatmap.setMinimumHeight(max(160, rows * pitch + HEATMAP_CHROME_PX))


class StepView(QtWidgets.QWidget):
    """Title, badge, description, formula, shapes, the step's heatmap(s) and the attention build-up."""

    row_clicked = QtCore.Signal(int)
    step_requested = QtCore.Signal(str)        # another step's name (the input named beside the weights)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.walkthrough = None
        self.step = None
        self._strip = False                 # the step shown has a weight strip over its heatmap
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        head = QtWidgets.QHBoxLayout()
        self.title = QtWidgets.QLabel("")
        self.title.setObjectName("walkthrough_step_title")
        self.title.setStyleSheet("font-size: 15px; font-weight: bold;")
        self.badge = Badge(self)
        self.numbers = QtWidgets.QCheckBox("Numbers")
        self.numbers.setObjectName("walkthrough_numbers")
        self.numbers.setToolTip("Print each value in its cell. Cells too narrow for a number stay colour only: "
                                "Ctrl + mouse wheel zooms in, or click a cell to read it in the panel on the right")
        self.numbers.toggled.connect(self._numbers_toggled)
        head.addWidget(self.title, 1)
        head.addWidget(self.numbers)
        head.addWidget(self.badge)
        lay.addLayout(head)
        self.description = QtWidgets.QLabel("")
        self.description.setObjectName("walkthrough_description")
        self.description.setWordWrap(True)
        self.formula = QtWidgets.QLabel("")
        self.formula.setObjectName("walkthrough_formula")
        self.formula.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.formula.setStyleSheet("font-family: monospace; font-size: 13px; padding: 4px; "
                                   "background: palette(alternate-base);")
        self.formula.setWordWrap(True)
        self.shape = QtWidgets.QLabel("")
        self.shape.setObjectName("walkthrough_shape")
        self.shape.setStyleSheet("color: palette(mid);")
        self.extra = rich_label("walkthrough_extra")
        for w in (self.description, self.formula, self.shape, self.extra):
            lay.addWidget(w)
        self.weights_strip = WeightsStrip(self)           # input -> weights -> output, for steps with weights
        self.weights_strip.input_clicked.connect(self.step_requested)
        self.weights_strip.weight_clicked.connect(lambda w, i, j: self.value_panel.show_weight(w, i, j))
        lay.addWidget(self.weights_strip)
        self.split = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        self.heatmap = MatrixHeatmap(self)
        self.heatmap.setMinimumHeight(220)
        self.heatmap.cell_clicked.connect(self._cell_clicked)
        self.side = QtWidgets.QTableWidget(self)          # per-token extras (a LayerNorm's mean, var)
        self.side.setObjectName("walkthrough_extras")
        self.side.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.side.verticalHeader().setVisible(False)
        self.side.setMinimumWidth(230)
        self.side.setMaximumWidth(300)
        self.build_up = BuildUpView(self)
        self.value_panel = ValuePanel(self)               # the clicked cell, pinned
        self.split.addWidget(self.heatmap)
        self.split.addWidget(self.side)
        self.split.addWidget(self.value_panel)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 0)
        self.split.setStretchFactor(2, 1)
        lay.addWidget(self.split, 100)
        self.wide_summary = WideSummaryTable(self)        # wide matrices in words
        lay.addWidget(self.wide_summary, 40)
        lay.addWidget(self.build_up, 60)
        lay.addStretch(1)             # takes the room a one-row heatmap (a vector) leaves
        self.side.hide()
        self.build_up.hide()

    # ---- showing a step ---------------------------------------------------------------------
    def set_step(self, walkthrough, step) -> None:
        self.walkthrough, self.step = walkthrough, step
        index = [s.name for s in walkthrough.steps].index(step.name)
        self.title.setText(f"{index + 1}. {step.title}")
        self.badge.set_diff(step.max_abs_diff, getattr(step, "fp32_max_abs_diff", None),
                            getattr(step, "fp32_rel_diff", None))
        self.description.setText(step.description)
        self.formula.setText(step.formula)
        self.shape.setText(step.shape_text)
        attention = step.col_labels is not None          # token x token: scores, masked scores, weights
        self.heatmap.set_titles("query token" if attention else "token",
                                "key token" if attention else "dimension",
                                "weight" if step.name == "weights" else "value")
        # a patched step's rows say whose numbers they hold ("[CLS] ← [CLS] (B)"): room for all of it
        patched = any(" ← " in str(t) for t in step.row_labels or [])
        self.heatmap.left_axis.max_chars = PATCHED_LABEL_CHARS if patched else MAX_LABEL_CHARS
        self.heatmap.left_axis.max_extent = PATCHED_LABEL_PX if patched else MAX_EXTENT_PX
        # no title in the plot: the step's heading above says it, and the rows get its height
        self.heatmap.show_matrix(step.values, step.row_labels, step.col_labels, title="",
                                 signed=None if step.name != "weights" else False)
        vector = self.heatmap.matrix.shape[0] == 1
        if vector:
            self.heatmap.set_titles("", "dimension")
        self.heatmap.setMaximumHeight(190 if vector else 16777215)
        self._strip = len(getattr(step, "weights", []) or []) == 2
        self._size_for_numbers()
        self.heatmap.set_show_values(self.numbers.isChecked())
        self._show_extra(step)
        self.weights_strip.set_step(walkthrough, step)
        self.wide_summary.set_step(step)
        self._repin(walkthrough, step)
        note = masked_note(step)
        if note:
            self.extra.setText(html.escape(note))
            self.extra.setVisible(True)
        # the weights exist from the softmax step on: earlier steps must not show them
        builds_up = step.name == "weights" and self._has("weights", "v")
        self.build_up.setVisible(builds_up)
        if builds_up:       # not isVisible(): a hidden tab must not keep the last model's sum
            self.build_up.label.setText("Click a query row to build its weighted sum of V.")
            self.build_up.set_numbers(self.numbers.isChecked())
            self._row_clicked(self.build_up.query if 0 <= self.build_up.query < len(walkthrough.tokens) else 0)

    def _numbers_toggled(self, on: bool) -> None:
        self._size_for_numbers()
        self.heatmap.set_show_values(on)
        self.build_up.set_numbers(on)

    def _size_for_numbers(self) -> None:
        """With Numbers on, a small matrix gets rows tall enough to print in (the page scrolls)."""
        rows = self.heatmap.matrix.shape[0]
        vector = rows == 1
        low = 150 if vector else 220
        if not vector and not self._strip and rows <= NUMBERS_MAX_ROWS:
            # every row's label readable (a 16-token softmax had every third); under a weight strip
            # the strip shows the rows, and the step fits the page at 1200×780 instead
            low = max(low, rows * (self.heatmap.fontMetrics().height() + 2) + STEP_CHROME_PX)
        if self.numbers.isChecked() and 1 < rows <= NUMBERS_MAX_ROWS:
            low = max(low, rows * NUMBER_ROW_PX + 150)       # + the column labels and the title
        self.heatmap.setMinimumHeight(low)

    def _repin(self, walkthrough, step) -> None:
        """The pinned cell follows to the new numbers when the same step is shown again (another
        layer, head or model) and the cell still exists; otherwise the panel is cleared."""
        cell = self.value_panel.cell
        shape = np.shape(step.values)
        if cell is not None and cell[0] == step.name:
            _name, i, j = cell
            inside = j < shape[-1] and (len(shape) == 1 or i < shape[0])
            if inside:
                self.value_panel.show_cell(walkthrough, step, i, j)
                return
        self.value_panel.clear()

    def _has(self, *names) -> bool:
        have = {s.name for s in self.walkthrough.steps}
        return all(n in have for n in names)

    def _show_extra(self, step) -> None:
        """Per-token extras (a LayerNorm's mean and variance) as a narrow heatmap; scalars as text."""
        rows = len(step.row_labels)
        # "from B" is said by the row labels ("cat ← dog (B)"): no column for it, the heatmap keeps the room
        columns = {k: np.asarray(v, np.float64).reshape(-1) for k, v in (step.extra or {}).items()
                   if np.ndim(v) >= 1 and np.size(v) == rows and k != "from B"}
        scalars = {k: v for k, v in (step.extra or {}).items() if np.ndim(v) == 0 and _is_number(v)}
        self.extra.setText(" · ".join(f"{html.escape(k)} = {float(v):.6g}" for k, v in scalars.items()))
        self.extra.setVisible(bool(scalars))
        if columns:
            self.side.clear()
            self.side.setColumnCount(1 + len(columns))
            self.side.setRowCount(rows)
            self.side.setHorizontalHeaderLabels(["token", *columns])
            for i, token in enumerate(step.row_labels):
                self.side.setItem(i, 0, QtWidgets.QTableWidgetItem(str(token)))
                for c, values in enumerate(columns.values(), start=1):
                    item = QtWidgets.QTableWidgetItem(f"{values[i]:.4g}")
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    self.side.setItem(i, c, item)
            self.side.resizeColumnsToContents()
        self.side.setVisible(bool(columns))

    def _cell_clicked(self, i: int, j: int) -> None:
        if self.step is None:
            return
        self.value_panel.show_cell(self.walkthrough, self.step, i, j)
        self.heatmap.hover(i, j)                      # the pinned cell framed until the mouse moves on
        self._row_clicked(i)

    def _row_clicked(self, i: int) -> None:
        if self.step is None or self.step.name != "weights" or not self._has("weights", "v"):
            return
        w = self.walkthrough
        head_output = w.step("head_output").values if self._has("head_output") else None
        self.build_up.show_query(i, list(w.tokens), np.asarray(w.step("weights").values),
                                 np.asarray(w.step("v").values), head_output)
        self.heatmap.left_axis.set_highlight(i)       # the query being built up, in red
        self.row_clicked.emit(i)


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True
