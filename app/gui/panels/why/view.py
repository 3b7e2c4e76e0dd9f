"""The "Why?" view: why a search hit matched, as the score split exactly over token pairs.

    dialog = WhyDialog(state, parent)              # non-modal, resizable; reused per request
    dialog.request(query, hit_text, search_score)  # computes in a worker (state.run), then shows

The query × hit matrix of contributions (core/evaluate/why.py) is a heatmap with a diverging colour map
centred at 0 (blue below, red above: negative contributions stay visible), each query token's
sum as a bar beside its row, each hit token's sum as a bar under its column, the top pairs in
words and the score they add up to, next to the score search showed. It uses the app's current
backend and pooling: the model the corpus was embedded with. With an SAE of that model open
(Features tab), the features both sentences fire on are named under it.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt

from app.gui.follow_model import FollowModel
from app.gui.panels.features.shared_view import SharedFeaturesView
from app.gui.widgets.heatmap import HeatmapWidget
from app.gui.widgets.save_dialog import ask_save_path
from app.gui.wording import model_label
from core.evaluate.why import SAME_SCORE, explain_job, format_pairs
from core.inspect.attention_maps import write_matrix_csv

DIVERGING = "CET-D1"               # blue - white - red, white at the middle of the levels
POSITIVE, NEGATIVE = "#c0392b", "#2166ac"
EXPLAIN = {
    "mean": "Mean pooling: the score is Σ over pairs of (h_i · g_j) / (n · m · |u| · |v|), "
            "u and v the mean token vectors; every cell is one pair's exact share.",
    "cls": "CLS pooling: each sentence is its [CLS] vector, so the whole score sits on the "
           "[CLS] ↔ [CLS] pair (hiding special tokens hides everything).",
    "max": "Max pooling: each dimension's product u_d · v_d / (|u| |v|) is credited to the two "
           "tokens that won the max in that dimension; the cells add up to the score exactly.",
    "attention": "Attention pooling: u = Σ a_i h_i with the learned query's weights a (likewise v), "
                 "so pair (i, j) holds a_i · b_j · (h_i · g_j) / (|u| |v|); the cells add up to the score.",
}


def symmetric_levels(matrix: np.ndarray) -> tuple[float, float]:
    """(-a, a) with a the largest |value|: 0 falls on the colour map's white middle."""
    a = float(np.abs(matrix).max()) if matrix.size else 0.0
    a = a if a > 0 else 1e-6
    return -a, a


def share_of(value: float, score: float) -> str:
    """' (3.8% of the score)', or '' for a zero score."""
    return f" ({value / score:.1%} of the score)" if score else ""


def bar_brushes(values) -> list:
    return [pg.mkBrush(POSITIVE if v >= 0 else NEGATIVE) for v in values]



HEADER_CHARS = 300     # a query or hit longer than this is shortened in the header


NEGLIGIBLE = 5e-5           # below this a pair reads 0.0000 at the header's 4 decimals


def encoder_note(store, backend) -> str:
    """' · the corpus was embedded by …, this is …' when the encoder running is not the one that
    embedded the store's vectors (or the store does not say); '' when it is."""
    from index.store.base import describe_encoders, encoder_of
    if store is None or backend is None:
        return ""
    running = describe_encoders([encoder_of(backend)])
    record = store.encoders
    if record == [encoder_of(backend)]:
        return ""
    if record is None:
        return f" · the corpus's encoder is not recorded (an older store); this is {running}"
    return f" · the corpus was embedded by {describe_encoders(record)}; this is {running}"


def shortened(text: str, limit: int = HEADER_CHARS) -> str:
    """`text`, or its first `limit` characters and how many more there are."""
    if len(text) <= limit:
        return text
    return f"{text[:limit].rstrip()} … (+{len(text) - limit:,} characters)"

class ContributionHeatmap(HeatmapWidget):
    """The contribution matrix with per-token sums: row sums beside it, column sums below."""

    def __init__(self, parent=None):
        super().__init__(parent, colormap_name=DIVERGING, row_title="query", col_title="hit")
        self.colorbar.getAxis("right").setLabel("contribution", color=self.fg.name())
        self.score = 0.0
        # heatmap | row sums | colour bar, and the column sums under the heatmap
        self.removeItem(self.colorbar)
        self.row_plot = self.addPlot(row=0, col=1)
        self.addItem(self.colorbar, row=0, col=2)
        self.col_plot = self.addPlot(row=1, col=0)
        self.ci.layout.setColumnStretchFactor(0, 5)
        self.ci.layout.setColumnStretchFactor(1, 1)
        self.ci.layout.setRowStretchFactor(0, 5)
        self.ci.layout.setRowStretchFactor(1, 1)
        for plot, _title in ((self.row_plot, "per query token"), (self.col_plot, "per hit token")):
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(x=False, y=False)
            plot.showGrid(x=plot is self.row_plot, y=plot is self.col_plot, alpha=0.25)
            for name in ("left", "bottom", "top", "right"):
                ax = plot.getAxis(name)
                ax.setPen(pg.mkPen(self.fg))
                ax.setTextPen(pg.mkPen(self.fg))
                ax.enableAutoSIPrefix(False)
        self.row_plot.setTitle("", size="9pt")
        self.row_plot.invertY(True)
        self.row_plot.setYLink(self.plot)
        # values on top (beside the heatmap's hit labels), none below: the rows stay aligned
        self.row_plot.hideAxis("left")
        self.row_plot.hideAxis("bottom")
        self.row_plot.showAxis("top")
        self.row_plot.getAxis("top").setLabel("per query token", color=self.fg.name())
        self.col_plot.setXLink(self.plot)
        self.col_plot.hideAxis("bottom")
        self.col_plot.getAxis("left").setLabel("per hit token", color=self.fg.name())
        self.row_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.7)
        self.col_bars = pg.BarGraphItem(x=[], y0=[], height=[], width=0.7)
        self.row_plot.addItem(self.row_bars)
        self.col_plot.addItem(self.col_bars)
        self.row_sums = np.zeros(0)
        self.col_sums = np.zeros(0)

    def set_contributions(self, matrix, row_labels, col_labels, score: float, title: str = "") -> None:
        m = np.asarray(matrix, dtype=np.float64)
        self.score = score
        self.set_matrix(m, row_labels, col_labels, title=title, levels=symmetric_levels(m))
        self.row_sums, self.col_sums = m.sum(axis=1), m.sum(axis=0)
        rows, cols = np.arange(len(self.row_sums)), np.arange(len(self.col_sums))
        self.row_bars.setOpts(x0=np.minimum(self.row_sums, 0), width=np.abs(self.row_sums), y=rows, height=0.7,
                              brushes=bar_brushes(self.row_sums), pens=[None] * len(rows))
        self.col_bars.setOpts(x=cols, y0=np.minimum(self.col_sums, 0), height=np.abs(self.col_sums), width=0.7,
                              brushes=bar_brushes(self.col_sums), pens=[None] * len(cols))
        for plot, sums, axis in ((self.row_plot, self.row_sums, "x"), (self.col_plot, self.col_sums, "y")):
            lo, hi = min(0.0, float(sums.min(initial=0))), max(0.0, float(sums.max(initial=0)))
            pad = 0.08 * ((hi - lo) or 1e-6)
            plot.setRange(**{f"{axis}Range": (lo - (pad if lo < 0 else 0), hi + pad)}, padding=0)
        # line the bars up with the heatmap's cells: same label room on the shared sides
        self.col_plot.getAxis("left").setWidth(int(self.left_axis.maximumWidth()))
        self.row_plot.getAxis("top").setHeight(int(self.top_axis.maximumHeight()))

    def tooltip_text(self, i: int, j: int) -> str:
        v = float(self.matrix[i, j])
        return (f"query <b>{html.escape(self.row_labels[i])}</b> ↔ hit <b>{html.escape(self.col_labels[j])}</b><br>"
                f"contribution <b>{v:+.4f}</b>{share_of(v, self.score)}")


class WhyDialog(QtWidgets.QDialog):
    """Non-modal window that explains one hit at a time; a new request replaces the old one."""

    shown = QtCore.Signal(object)       # core.evaluate.why.Why, after the view shows it

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.setObjectName("why_dialog")
        self.setWindowTitle("Why is this a hit?")
        self.setModal(False)
        self.setSizeGripEnabled(True)
        self.resize(980, 760)
        self.why = None                 # core.evaluate.why.Why being shown
        self.view = None                # core.evaluate.why.WhyView being shown (specials hidden or not)
        self.search_score = None        # the score the search table showed for the hit
        self.follow = FollowModel(state, "why", corpus=True)   # the corpus model: newest request wins
        self._request = None            # (query, text) last asked for: redone when the model changes
        self.score_note = ""            # said instead of the search-score comparison (a whitened store)
        self._query = self._text = ""
        self.last_dir = Path.home()

        self.header = QtWidgets.QLabel("Pick a search result and press Why?")
        self.header.setObjectName("why_header")
        self.header.setWordWrap(True)
        self.header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.hide_special = QtWidgets.QCheckBox("Hide [CLS]/[SEP]")
        self.hide_special.setObjectName("why_hide_special")
        self.hide_special.setToolTip("Leave out the pairs with a special token; the share of the score "
                                     "they held is stated, never spread over the others")
        self.show_values = QtWidgets.QCheckBox("Numbers in cells")
        self.show_values.setToolTip("Two decimals: most pairs hold a few thousandths, so hover a cell "
                                    "for its exact value")
        self.csv_button = QtWidgets.QPushButton("Save CSV…")
        self.csv_button.setToolTip("The matrix shown (query tokens x hit tokens) as CSV")
        self.png_button = QtWidgets.QPushButton("Save PNG…")
        for b in (self.csv_button, self.png_button):
            b.setEnabled(False)
        self.hidden_label = QtWidgets.QLabel("")
        self.hidden_label.setObjectName("why_hidden")
        self.heatmap = ContributionHeatmap(self)
        self.heatmap.setObjectName("why_heatmap")
        self.heatmap.set_placeholder("computing …")
        self.hover_label = QtWidgets.QLabel("Hover a cell to read its pair and value.")
        self.hover_label.setObjectName("why_hover")
        self.pairs_label = QtWidgets.QLabel("")
        self.pairs_label.setObjectName("why_pairs")
        self.pairs_label.setWordWrap(True)
        self.pairs_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.explain_label = QtWidgets.QLabel("")
        self.explain_label.setWordWrap(True)
        self.explain_label.setStyleSheet("color: palette(placeholder-text);")

        controls = QtWidgets.QHBoxLayout()
        controls.addWidget(self.hide_special)
        controls.addWidget(self.show_values)
        controls.addWidget(self.hidden_label, 1)
        controls.addWidget(self.csv_button)
        controls.addWidget(self.png_button)
        lay = QtWidgets.QVBoxLayout(self)
        lay.addWidget(self.header)
        lay.addLayout(controls)
        lay.addWidget(self.heatmap, 1)
        lay.addWidget(self.hover_label)
        lay.addWidget(self.pairs_label)
        lay.addWidget(self.explain_label)
        self.features_label = SharedFeaturesView(state)     # the SAE features both fire on (Features tab)
        lay.addWidget(self.features_label)

        self.hide_special.toggled.connect(self.refresh)
        self.show_values.toggled.connect(self.heatmap.set_show_values)
        self.heatmap.hovered.connect(self._hovered)
        self.csv_button.clicked.connect(lambda: self.export_csv())
        self.png_button.clicked.connect(lambda: self.export_png())
        # another model or pooling: the numbers shown are no longer the corpus's; redo them
        state.choice_changed.connect(lambda _c: self._redo())
        self.follow.model_changed.connect(lambda b: self._redo() if b is not None else None)

    # ---- requests -----------------------------------------------------------------------------
    def request(self, query: str, text: str, search_score: float | None = None, score_note: str = "") -> None:
        """Explain ``text`` as a hit for ``query`` with the app's model and pooling. ``score_note``:
        said instead of comparing with a search score that is not this cosine (a whitened store)."""
        self.score_note = score_note
        self.show()
        self.raise_()
        self.activateWindow()
        state = self.state
        self._request = (query, text)
        if state.backend is None:
            self.follow.drop()          # it would run the old model; _redo asks again once loaded
            self._set_header(query, text, "the model is still loading — try again in a moment")
            return
        pooling = state.pooling
        self._set_header(query, text, f"computing with {model_label(state.choice.model)} ({pooling} pooling) …")
        self.follow.run(explain_job, pooling, query, text, search_score, label="Why similar", show_progress=False,
                        on_result=lambda why, _b: self._on_result(why, query, text, search_score),
                        on_error=lambda message: self._on_error(message, query, text))
        self.features_label.show_for(query, text)

    def _on_result(self, why, query, text, search_score) -> None:
        self.why, self.search_score = why, search_score
        self._query, self._text = query, text
        self.explain_label.setText(EXPLAIN[why.pooling])
        self.refresh()
        self.shown.emit(why)

    def _on_error(self, message, query, text) -> None:
        self._set_header(query, text, message, error=True)

    def _redo(self) -> None:
        """After a model/pooling change: the same pair with the new model (the old search score
        no longer applies; the search table refreshes itself)."""
        if self.isVisible() and self._request is not None:
            self.request(*self._request, None, self.score_note)

    # ---- drawing ------------------------------------------------------------------------------
    def refresh(self, *_) -> None:
        why = self.why
        if why is None:
            return
        self.view = view = why.view(self.hide_special.isChecked())
        n, m = why.contributions.shape
        self.heatmap.set_contributions(view.matrix, view.tokens_a, view.tokens_b, why.score,
                                       title=f"Σ of the cells shown = {view.matrix.sum():.4f}")
        self.heatmap.set_show_values(self.show_values.isChecked())
        seen = f" ({html.escape(self.score_note)})" if self.score_note else ""
        score = f"{why.score:.4f}"
        if self.search_score is not None:
            apart = abs(self.search_score - why.total)
            if apart <= SAME_SCORE:
                seen = f" = the search score {self.search_score:.4f}"
            else:   # enough digits that the two numbers read differently, and by how much
                score = f"{why.total:.6f}"
                seen = f" ≠ the search score {self.search_score:.6f} (apart by {apart:.1e})"
            seen += html.escape(encoder_note(self.state.store, self.state.backend))
        model = str(getattr(self.state.backend, "model_name", None) or self.state.choice.model)
        model = model_label(model)                 # a trained model's folder by its name, not its path
        self._set_header(self._query, self._text,
                         f"score <b>{score}</b>{seen} = the sum of all {n} × {m} token-pair "
                         f"contributions · {html.escape(model)}, {why.pooling} pooling · "
                         f"computed as the vectors were made: {why.describe_precision()}",
                         rich=True)
        specials = why.view(hide_special=True)
        self.hidden_label.setText(view.describe_hidden() or f"the {specials.hidden_pairs} pairs with a special "
                                  f"token hold {specials.hidden_share:.0%} of the score")
        top = view.top_pairs(6)
        # a pair "most negative" only where it takes something away the 4 digits can show: not −0.0000x
        negative = [p for p in view.top_pairs(3, negative=True) if p[2] <= -NEGLIGIBLE]
        text = f"<b>Top pairs:</b> {html.escape(format_pairs(top, digits=3)) or '(none positive)'}"
        if negative:
            text += f"<br><b>Most negative:</b> {html.escape(format_pairs(negative, digits=4))}"
        self.pairs_label.setText(text)
        self.hover_label.setText("Hover a cell to read its pair and value.")
        for b in (self.csv_button, self.png_button):
            b.setEnabled(True)

    def _set_header(self, query, text, line, error=False, rich=False) -> None:
        """Query, hit and status; a long query or hit is shortened here (the whole of each in
        the tooltip), so that a pasted page cannot push the heatmap out of the dialog."""
        line = line if rich else html.escape(line)
        colour = " style='color:#b00020'" if error else ""
        self.header.setText(f"<b>Query:</b> {html.escape(shortened(query))}<br><b>Hit:</b> "
                            f"{html.escape(shortened(text))}<br><span{colour}>{line}</span>")
        long = len(query) > HEADER_CHARS or len(text) > HEADER_CHARS
        self.header.setToolTip(f"Query: {query}\n\nHit: {text}" if long else "")

    def _hovered(self, i: int, j: int, v: float) -> None:
        if i < 0 or self.view is None:
            self.hover_label.setText("Hover a cell to read its pair and value.")
            return
        hm = self.heatmap
        self.hover_label.setText(
            f"<b>{html.escape(hm.row_labels[i])}</b> ↔ <b>{html.escape(hm.col_labels[j])}</b>: "
            f"<b>{v:+.4f}</b>{share_of(v, self.why.score)} · row total {hm.row_sums[i]:+.4f} · "
            f"column total {hm.col_sums[j]:+.4f}")

    # ---- export -------------------------------------------------------------------------------
    def _save_path(self, path, caption: str, suggested: str, filt: str) -> Path | None:
        """`path`, or one the user picks; None when nothing is shown or the dialog was cancelled."""
        if self.view is None:
            return None
        return path or ask_save_path(self, caption, suggested, filt)

    def export_csv(self, path=None) -> Path | None:
        """The matrix shown, rows = query tokens, columns = hit tokens (as the heatmap)."""
        path = self._save_path(path, "Save the contributions as CSV", "why.csv", "CSV (*.csv)")
        if path is None:
            return None
        return write_matrix_csv(path, self.view.matrix, self.heatmap.row_labels, self.heatmap.col_labels)

    def export_png(self, path=None) -> Path | None:
        path = self._save_path(path, "Save the view as PNG", "why.png", "PNG image (*.png)")
        return None if path is None else (Path(path) if self.heatmap.save_png(path) else None)
