"""The positions view of the "Step by step" tab: how an encoder knows word order.

Left: the sinusoidal table (positions x dimensions) with its wavelengths, and the loaded model's
learned position table beside it; below each, the position-to-position cosine similarity.
Bottom: the permutation demo on the user's sentence - shuffle the words; without positions the
attention output is the same rows permuted, with positions it is not (both numbers shown).

The numbers come from ``core.walkthrough.steps.positions_view`` and ``permutation_demo`` in a worker.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.follow_model import FollowModel
from app.gui.panels.walkthrough.steps_view import MATCH_LIMIT, format_diff
from app.gui.widgets.labels import rich_label
from app.gui.widgets.matrix_heatmap import MatrixHeatmap

JOB_KEY = "walkthrough.positions"
N_POSITIONS = 64          # rows of the position tables shown (enough to see the stripes)
SEED = 0


def positions_fn(backend, text: str, layer: int, n_positions: int = N_POSITIONS, seed: int = SEED):
    """Worker side: the position tables and the permutation demo on ``text``."""
    from core.walkthrough.positions_demo import permutation_demo, positions_view
    return (positions_view(backend, n_positions),
            permutation_demo(backend, text, seed=seed, layer=layer))


class PositionsView(QtWidgets.QWidget):
    shown = QtCore.Signal(object, object)      # (positions, permutation demo), after drawing

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.positions = None
        self.demo = None
        self.follow = FollowModel(state, JOB_KEY)
        self.follow.model_changed.connect(self.on_model)
        self._requested = None                 # (text, layer) of the newest request: redone on a model switch
        self._shown_for = None                 # (backend, text, layer) on screen
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.intervention_note = rich_label("positions_intervention_note")
        self.intervention_note.hide()
        lay.addWidget(self.intervention_note)
        self.info = rich_label("positions_info")
        lay.addWidget(self.info)
        grid = QtWidgets.QGridLayout()
        self.sin_table = MatrixHeatmap(self, row_title="position", col_title="dimension")
        self.learned_table = MatrixHeatmap(self, row_title="position", col_title="dimension")
        self.sin_cosine = MatrixHeatmap(self, row_title="position", col_title="position", value_name="cosine")
        self.learned_cosine = MatrixHeatmap(self, row_title="position", col_title="position",
                                            value_name="cosine")
        self.learned_note = QtWidgets.QLabel("")
        self.learned_note.setWordWrap(True)
        self.learned_note.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.learned_note.hide()
        for hm in (self.sin_table, self.learned_table, self.sin_cosine, self.learned_cosine):
            hm.setMinimumHeight(200)
        grid.addWidget(self.sin_table, 0, 0)
        grid.addWidget(self.learned_table, 0, 1)
        grid.addWidget(self.learned_note, 0, 1)
        grid.addWidget(self.sin_cosine, 1, 0)
        grid.addWidget(self.learned_cosine, 1, 1)
        lay.addLayout(grid, 1)
        self.wavelengths = rich_label("positions_wavelengths")
        lay.addWidget(self.wavelengths)
        box = QtWidgets.QGroupBox("Permutation demo: does the encoder know word order?")
        bl = QtWidgets.QVBoxLayout(box)
        self.demo_label = rich_label("permutation_demo")
        bl.addWidget(self.demo_label)
        lay.addWidget(box)

    def set_intervention(self, spec) -> None:
        """Say when the Intervene tab switched positions off or shuffled them: the tables below are
        the model's own, which the intervened runs do not add (or add in another order)."""
        words = positions_note(spec)
        self.intervention_note.setText(words)
        self.intervention_note.setVisible(bool(words))

    # ---- requests -----------------------------------------------------------------------------
    def on_model(self, backend) -> None:
        """The inspected model changed (None: loading): its tables go; the newest request again."""
        self._clear("<i>Loading the model …</i>" if backend is None else "")
        self.follow.ask_again(self)

    def showEvent(self, event) -> None:
        """Back on screen after the model changed while hidden: its tables again, for that model."""
        super().showEvent(event)
        self.follow.ask_again_if_stale(self)

    def show_for(self, text: str, layer: int) -> None:
        """Compute (in a worker) and show the tables and the demo for ``text`` at ``layer`` (0-based;
        a model with fewer layers shows its last)."""
        self._requested = (text, layer)
        backend = self.follow.backend
        if backend is None:
            self._clear("<i>Waiting for the model to load …</i>")
            return
        layer = max(0, min(layer, int(getattr(backend, "n_layers", layer + 1)) - 1))
        if self._shown_for == (backend, text, layer) and not self.follow.running():
            return                             # on screen, and no other request in flight
        self.info.setText("<i>computing the position tables and the permutation demo …</i>")
        self.follow.run(positions_fn, text, layer, label="Positions", wants_progress=False, show_progress=False,
                        on_result=lambda r, b, t=text, layer_=layer: self._on_result(r, b, t, layer_),
                        on_error=self._on_error)

    def _on_error(self, message: str) -> None:
        self._clear(f"<span style='color:#c0392b'>{html.escape(message)}</span>")

    def _on_result(self, result, backend, text, layer) -> None:
        self._shown_for = (backend, text, layer)
        self.set_result(*result, model=str(getattr(backend, "model_name", "")))

    def _clear(self, message: str) -> None:
        """No table or demo of another model (or sentence) stays beside a message about this one."""
        self.positions, self.demo, self._shown_for = None, None, None
        self.info.setText(message)
        for w in (self.sin_table, self.learned_table, self.sin_cosine, self.learned_cosine, self.learned_note):
            w.hide()
        self.wavelengths.setText("")
        self.demo_label.setText("")

    # ---- drawing ------------------------------------------------------------------------------
    def set_result(self, positions, demo, model: str = "the model") -> None:
        """``positions`` a core.walkthrough.positions_demo.PositionsView, ``demo`` its PermutationDemo."""
        self.positions, self.demo = positions, demo
        model = Path(model).name or model
        P = positions.sinusoidal.shape[0]
        rows = [str(p) for p in range(P)]
        self.sin_table.show_matrix(positions.sinusoidal, rows, title="Sinusoidal table: sin / cos of position "
                                   "÷ wavelength", signed=True)
        self.sin_cosine.show_matrix(positions.sinusoidal_cosine, rows, rows,
                                    title="Sinusoidal: cosine between positions", signed=True)
        learned = getattr(positions, "learned", None)
        has_learned = learned is not None
        for w in (self.sin_table, self.sin_cosine):
            w.show()
        for w in (self.learned_table, self.learned_cosine):
            w.setVisible(has_learned)
        self.learned_note.setVisible(not has_learned)
        if has_learned:
            self.learned_table.show_matrix(learned, rows[:len(learned)],
                                           title=f"{model}: learned position table", signed=True)
            self.learned_cosine.show_matrix(positions.learned_cosine, rows[:len(learned)], rows[:len(learned)],
                                            title=f"{model}: cosine between learned positions",
                                            signed=True)
        else:
            self.learned_note.setText(f"{html.escape(model)} has no learned position table: "
                                      "it adds the sinusoidal table on the left.")
        waves = np.asarray(positions.wavelengths, np.float64)           # one per column, pairs equal
        D = len(waves)
        picks = sorted({0, 2, 4, (D // 4) // 2 * 2, (D // 2) // 2 * 2, (D - 1) // 2 * 2})
        self.wavelengths.setText(
            "<b>Wavelengths</b> of the sinusoidal columns, 2π·10000^(2i/D) positions: "
            + ", ".join(f"columns {c}/{c + 1}: {waves[c]:,.1f}" for c in picks if c + 1 < D)
            + ". Fast columns tell neighbours apart; slow ones say roughly where in the text a token is.")
        uses = ("learned rows (right)" if positions.model_positions == "learned"
                else "the sinusoidal table (left)")
        self.info.setText(f"Positions 0–{P - 1}. <b>{html.escape(model)}</b> adds {uses} to each token's "
                          "embedding: the only place word order enters the encoder.")
        self.demo_label.setText(demo_html(demo))
        self.shown.emit(positions, demo)


def positions_note(spec) -> str:
    """What the positions view says while an intervention changes positions ('' when it keeps them)."""
    mode = getattr(spec, "positions", "keep")
    if mode == "off":
        what = ("<b>Positions are switched off</b> in the Intervene tab: the intervened runs add <i>no</i> "
                "position vector, so the encoder sees a bag of tokens (the <i>Without positions</i> line of "
                "the demo below is what it computes). The tables show the model's own positions, unused.")
    elif mode == "shuffle":
        what = (f"<b>Positions are shuffled</b> in the Intervene tab (seed {spec.shuffle_seed}): each token gets "
                "another token's position vector. The tables show the model's own positions, in order.")
    else:
        return ""
    return f"<span style='color:#b35900'>{what}</span>"


def demo_html(demo) -> str:
    """The two claims of the permutation demo, with their numbers."""
    same = demo.without_positions_diff <= MATCH_LIMIT
    differs = demo.with_positions_diff > MATCH_LIMIT
    return (f"Original: <i>{html.escape(' '.join(demo.tokens))}</i><br>"
            f"Shuffled: <i>{html.escape(' '.join(demo.shuffled_tokens))}</i><br>"
            f"<b>Without positions</b>, layer {demo.layer + 1}'s attention output for the shuffled text is the "
            f"original's rows in the shuffled order: max |Δ| = <b>{format_diff(demo.without_positions_diff)}</b> "
            f"{'✔ the same rows, permuted' if same else '✘ not just permuted'}.<br>"
            f"<b>With positions</b> it is not: max |Δ| = <b>{demo.with_positions_diff:.3g}</b> "
            f"{'✔ the order changed the numbers' if differs else '✘ order made no difference'}. "
            "Self-attention alone is blind to order; the position vectors are what tell the words apart.")
