"""The walkthrough's pinned value panel: the cell last clicked, in words and numbers.

    panel = ValuePanel()
    panel.show_cell(walkthrough, step, i, j)     # value, row and column names; a score's q·k terms
    panel.terms                                  # core.walkthrough.numbers.ScoreTerms, for a score cell

It stays on the clicked cell (hovering elsewhere does not change it) until another cell or
another step is shown. Tokens, rows, positions and dimensions are counted from 0 ([CLS] is
token 0, as position p = 0), layers and heads from 1, as everywhere in the app.
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtWidgets
from PySide6.QtCore import Qt

from core.walkthrough.numbers import score_terms

HEAD_COLUMNS = ("q", "k", "v", "head_output")          # steps whose columns are one head's dimensions
HIDDEN_COLUMNS = ("ffn_hidden", "ffn_activation")      # the FFN's inner width
SCORE_STEPS = ("scores", "masked_scores")


def token_name(tokens, i: int) -> str:
    return f"token {i} {tokens[i]!r}"


def column_name(walkthrough, step, j: int) -> str:
    """What column j of ``step`` is, with the app's counting."""
    if step.col_labels is not None:
        return f"key {token_name(step.col_labels, j)}"
    width = np.shape(step.values)[-1]
    if step.name in HEAD_COLUMNS:
        h = walkthrough.head
        return f"dimension {j} of head {h + 1} (column {h * width + j} of the model's width)"
    if step.name == "heads_concat":
        dh = len(walkthrough.step("q").values[0]) if _has(walkthrough, "q") else 1
        return f"column {j}: head {j // dh + 1}, its dimension {j % dh}"
    if step.name in HIDDEN_COLUMNS:
        return f"hidden unit {j} of {width}"
    return f"dimension {j} of {width}"


def row_name(walkthrough, step, i: int) -> str:
    if np.ndim(step.values) == 1:
        return str(step.row_labels[0])
    role = "query " if step.col_labels is not None else ""
    return role + token_name(walkthrough.tokens, i)


def switched_off_head(walkthrough, step, j: int) -> str:
    """Why a column of the heads' outputs holds what it holds when the Intervene tab switched its
    head off ('' for a head left on)."""
    spec = getattr(walkthrough, "intervention", None)
    if spec is None or not spec.heads or step.name != "heads_concat" or not _has(walkthrough, "q"):
        return ""
    head = j // len(walkthrough.step("q").values[0])
    if (walkthrough.layer, head) not in spec.heads:
        return ""
    name = f"{walkthrough.layer + 1}.{head + 1}"
    if spec.head_mode == "zero":
        return f"= 0 because head {name} is switched off in the Intervene tab: its output is replaced by zeros"
    return (f"head {name} is mean-ablated in the Intervene tab: this is its average output over the sample "
            "corpus, not what it computed for this sentence")


def cut_here(walkthrough, i: int, j: int) -> bool:
    """Whether the walk's intervention cuts query i -> key j in the head it shows."""
    spec = getattr(walkthrough, "intervention", None)
    return spec is not None and any(c.layer == walkthrough.layer and c.head in (None, walkthrough.head)
                                    and (c.query, c.key) == (i, j) for c in spec.cuts)


def _has(walkthrough, name: str) -> bool:
    return any(s.name == name for s in walkthrough.steps)


class ValuePanel(QtWidgets.QFrame):
    """The clicked cell: its value, its row and column labels, and for a score the q·k breakdown."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("walkthrough_value_panel")
        self.setFrameShape(QtWidgets.QFrame.Shape.StyledPanel)
        self.setMinimumWidth(230)
        self.setMaximumWidth(340)
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        self.label = QtWidgets.QLabel()
        self.label.setObjectName("walkthrough_value")
        self.label.setWordWrap(True)
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QtWidgets.QTableWidget(0, 4, self)
        self.table.setObjectName("walkthrough_score_terms")
        self.table.setHorizontalHeaderLabels(["d", "q[i,d]", "k[j,d]", "q·k term"])
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 4)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.total = QtWidgets.QLabel()
        self.total.setObjectName("walkthrough_score_sum")
        self.total.setWordWrap(True)
        self.total.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.label)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.total)
        self.cell = None          # (step name, i, j) shown
        self.terms = None
        self.clear()

    def clear(self) -> None:
        self.cell, self.terms = None, None
        self.label.setText("<b>Click a cell</b> to pin its value here, with its row and column "
                           "(tokens, rows and dimensions count from 0; layers and heads from 1).")
        self.table.hide()
        self.total.hide()

    def show_cell(self, walkthrough, step, i: int, j: int) -> None:
        values = np.asarray(step.values)
        v = float(values[j] if values.ndim == 1 else values[i, j])
        self.cell = (step.name, i, j)
        where = f"[{j}]" if values.ndim == 1 else f"[{i}, {j}]"
        lines = [f"<b>{html.escape(step.name)}{where} = {v:.6g}</b>",
                 f"row: {html.escape(row_name(walkthrough, step, i), quote=False)}",
                 f"column: {html.escape(column_name(walkthrough, step, j), quote=False)}"]
        lines += self._explain(walkthrough, step, i, j, v)
        self.label.setText("<br>".join(lines))
        if step.name in SCORE_STEPS and _has(walkthrough, "q") and _has(walkthrough, "k"):
            self._show_terms(walkthrough, step, i, j, v)
        else:
            self.terms = None
            self.table.hide()
            self.total.hide()

    def show_weight(self, weight, i: int, j: int) -> None:
        """A cell of a weight tensor (the strip above the step): its value and what indexes it."""
        values = np.asarray(weight.values)
        one_d = values.ndim == 1
        v = float(values[j] if one_d else values[i, j])
        self.cell, self.terms = None, None
        where = f"[{j}]" if one_d else f"[{i}, {j}]"
        lines = [f"<b>{html.escape(weight.symbol)}{where} = {v:.6g}</b>"]
        if not one_d:
            lines += [f"row: input dimension {i} of {values.shape[0]}",
                      f"column: output dimension {j} of {values.shape[1]}"]
        else:
            lines += [f"dimension {j} of {values.shape[0]}"]
        note = f" ({html.escape(weight.note)})" if weight.note else ""
        lines += [f"model tensor: {html.escape(weight.key)}{note}"]
        self.label.setText("<br>".join(lines))
        self.table.hide()
        self.total.hide()

    def _explain(self, walkthrough, step, i, j, v) -> list[str]:
        """A line or two that say how this one number was made, where it is short to say."""
        if step.name == "weights" and _has(walkthrough, "masked_scores"):
            row = np.asarray(walkthrough.step("masked_scores").values[i], np.float64)
            finite = np.isfinite(row) & (row > -1e29)
            top = row[finite].max()
            denominator = np.exp(row[finite] - top).sum()
            return [f"= exp(s′ − max) / Σ exp(s′ − max) = exp({row[j] - top:.4g}) / {denominator:.6g}",
                    f"row {i} sums to {float(np.asarray(step.values)[i].sum()):.6f}"]
        switched = switched_off_head(walkthrough, step, j)
        if switched:
            return [switched]
        if step.name == "masked_scores":
            if cut_here(walkthrough, i, j):
                return ["= −∞: this attention edge is cut (an intervention): query i may not look at key j, "
                        "so its row's weights renormalise over the other keys"]
            return ["= the score: the mask lets query i see key j (adds 0)" if np.isfinite(v) and v > -1e29
                    else "= −∞: the mask hides key j from query i, so it gets no attention"]
        if "from B" in (step.extra or {}):
            return (["= sentence B's number: B's value at this site replaces A's for this token (patching)"]
                    if step.extra["from B"][i] else ["= A's own number: this token is not patched"])
        return []

    def _show_terms(self, walkthrough, step, i, j, v) -> None:
        q, k = walkthrough.step("q").values, walkthrough.step("k").values
        t = self.terms = score_terms(q, k, i, j)
        self.table.setRowCount(len(t.dims))
        for r, (d, qd, kd, term) in enumerate(zip(t.dims, t.q, t.k, t.terms)):
            for c, text in enumerate((str(int(d)), f"{qd:+.4f}", f"{kd:+.4f}", f"{term:+.4f}")):
                item = QtWidgets.QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
        shown = float(walkthrough.step("scores").values[i, j])
        self.total.setText(f"Σ<sub>d</sub> q[{i},d]·k[{j},d] = {t.dot:.6g}; ÷ √{len(t.dims)} = "
                           f"<b>{t.score:.6g}</b> = scores[{i}, {j}] ({shown:.6g}). Largest |terms| first: "
                           f"the dimensions where query and key agree (+) or disagree (−) most.")
        self.table.show()
        self.total.show()
