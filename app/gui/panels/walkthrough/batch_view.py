"""The "Batch of two" view of the "Step by step" tab: what the padding mask does.

The sentences of Text and Second run as one batch; the shorter is padded with [PAD]. For the
layer and head chosen, the padded sentence's masked scores (−∞ at every padded key) and its
weights after softmax (exactly 0 there), and two proof badges: the real tokens' final vectors
equal each sentence run alone, and the weights equal the torch encoder's own. The numbers come
from ``core.walkthrough.batch`` (computed in a worker); this module only draws them.
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.follow_model import FollowModel
from app.gui.panels.walkthrough.steps_view import MATCH_LIMIT, badge_color, format_diff
from app.gui.widgets.matrix_heatmap import MatrixHeatmap

JOB_KEY = "walkthrough.batch"
READOUT_HINT = "Hover a cell to read its query, key, masked score and weight."
NEEDS_TWO = ("Type a second sentence in <b>Second</b> (of another length): the two run as one batch, "
             "and the shorter is padded.")


def batch_fn(backend, first: str, second: str, layer: int, head: int):
    """Worker side: the batch of two for (layer, head), 0-based."""
    from core.walkthrough.batch import explain_batch
    return explain_batch(backend, first, second, layer=layer, head=head)


def proof(label: str, diff: float) -> str:
    """A badge in words: '✔ label (max |Δ| 3e-15)' in green, or '✘' in red."""
    ok = diff <= MATCH_LIMIT
    return (f"<span style='color:{badge_color(diff)}'><b>{'✔' if ok else '✘'} {html.escape(label)}</b> "
            f"(max |Δ| {format_diff(diff)})</span>")


def said_in(note: str, rich_text: str) -> bool:
    """Whether ``note`` is already in ``rich_text``, however its quotes were escaped there."""
    return any(html.escape(note, quote=q) in rich_text for q in (False, True))


class BatchView(QtWidgets.QWidget):
    shown = QtCore.Signal(object)               # the core BatchOfTwo, after drawing

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.result = None
        self.follow = FollowModel(state, JOB_KEY)
        self.follow.model_changed.connect(self.on_model)
        self._requested = None                  # (first, second, layer, head): redone on a model switch
        self._shown_for = None                  # (backend, request) on screen
        self.said_above = lambda: ""            # the tab's own info line: a note it says is not said twice
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.info = QtWidgets.QLabel(NEEDS_TWO)
        self.info.setObjectName("batch_info")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.info)
        self.proofs = QtWidgets.QLabel("")
        self.proofs.setObjectName("batch_proofs")
        self.proofs.setWordWrap(True)
        self.proofs.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.proofs)
        row = QtWidgets.QHBoxLayout()
        self.scores = MatrixHeatmap(self, row_title="query", col_title="key", value_name="score")
        self.weights = MatrixHeatmap(self, row_title="query", col_title="key", value_name="weight")
        for hm in (self.scores, self.weights):
            hm.setMinimumHeight(240)
            row.addWidget(hm, 1)
            hm.hovered.connect(self._hovered)
        lay.addLayout(row, 1)
        self.readout = QtWidgets.QLabel(READOUT_HINT)
        self.readout.setObjectName("batch_readout")
        self.readout.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.readout)

    # ---- requests -----------------------------------------------------------------------------
    def on_model(self, backend) -> None:
        """The inspected model changed (None: loading): its batch goes; the newest request again."""
        if self._requested is not None:
            self._clear("<i>Loading the model …</i>" if backend is None else "")
        self.follow.ask_again(self)

    def showEvent(self, event) -> None:
        """Back on screen after the model changed while hidden: recomputed for that model."""
        super().showEvent(event)
        self.follow.ask_again_if_stale(self)

    def show_for(self, first: str, second: str, layer: int, head: int) -> None:
        """Compute (in a worker) and show the batch of ``first`` and ``second``."""
        request = (first, second, layer, head)
        self._requested = request
        if not first.strip() or not second.strip():
            self.follow.drop()
            self._clear(NEEDS_TWO)
            return
        backend = self.follow.backend
        if backend is None:
            self.info.setText("<i>Waiting for the model to load …</i>")
            return
        if self._shown_for == (backend, request) and not self.follow.running():
            return
        layer, head = min(layer, backend.n_layers - 1), min(head, backend.n_heads - 1)
        self.info.setText("<i>running the two sentences as one padded batch …</i>")
        self.follow.run(batch_fn, first, second, layer, head, label="Batch of two",
                        wants_progress=False, show_progress=False,
                        on_result=lambda r, b, q=request: self._on_result(r, b, q), on_error=self._on_error)

    def _on_error(self, message: str) -> None:
        self._clear(f"<span style='color:#c0392b'>{html.escape(message)}</span>")

    def _on_result(self, result, backend, request) -> None:
        self._shown_for = (backend, request)
        self.set_result(result)

    def _clear(self, message: str) -> None:
        """No numbers of an earlier batch stay beside a message about this one."""
        self.result, self._shown_for = None, None
        self.readout.setText(READOUT_HINT)
        self.info.setText(message)
        self.proofs.setText("")
        for hm in (self.scores, self.weights):
            hm.hide()

    def _hovered(self, i: int, j: int, _value: float) -> None:
        """The same cell of both matrices, in words (the two heatmaps share their rows and columns)."""
        r = self.result
        if r is None or i < 0:
            self.readout.setText(READOUT_HINT)
            return
        p = r.padded
        tokens = r.tokens[p]
        score, weight = float(r.masked_scores[p][i, j]), float(r.weights[p][i, j])
        score_text = "−∞ (a padded key)" if np.isneginf(score) else f"{score:.4f}"
        self.readout.setText(f"query <b>{html.escape(tokens[i])}</b> (token {i}) → key "
                             f"<b>{html.escape(tokens[j])}</b> (token {j}): masked score <b>{score_text}</b>, "
                             f"weight <b>{weight:.4f}</b>")

    # ---- drawing ------------------------------------------------------------------------------
    def set_result(self, r) -> None:
        """``r`` a core.walkthrough.batch.BatchOfTwo."""
        self.result = r
        for hm in (self.scores, self.weights):
            hm.show()
        p = r.padded
        tokens = r.tokens[p]
        where = ("Text", "Second")[p]
        n = r.n_padding
        self.scores.show_matrix(r.masked_scores[p], tokens, tokens, signed=True,
                                title=f"Masked scores of {where}, layer {r.layer + 1}, head {r.head + 1}: "
                                      + (f"−∞ at the {n} padded key{'s' if n != 1 else ''}" if n else "no padding"))
        self.weights.show_matrix(r.weights[p], tokens, tokens, signed=False,
                                 title="Weights = softmax(masked scores): 0 at every padded key")
        T = len(tokens)
        if n == 0:
            self.info.setText(f"<b>A batch of two</b>: both sentences have {T} tokens, so nothing is padded "
                              "and the mask is all ones. Type sentences of different lengths to see it work.")
        else:
            self.info.setText(
                f"<b>A batch of two</b>: {where} has {r.lengths[p]} tokens, the other {r.lengths[1 - p]}; "
                f"{where} is padded with {n} [PAD] token{'s' if n != 1 else ''} to {T}, and the attention "
                "mask adds −∞ to the scores of padded keys, so softmax gives them weight exactly 0: no real "
                "token reads the padding. (The padded rows are computed too, and thrown away.)"
                + (f"<br><span style='color:#b35900'>{html.escape(r.note)}</span>"
                   if r.note and not said_in(r.note, self.said_above()) else ""))
        self.proofs.setText(
            f"{proof('real tokens = each sentence run alone, unpadded', r.real_max_abs_diff)} · "
            f"{proof('weights = the model’s on this batch', r.weights_max_abs_diff)} · "
            f"largest weight on a padded key: <b>{r.padded_weight_max:g}</b>")
        self.shown.emit(r)
