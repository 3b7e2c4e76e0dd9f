"""The importance map: how much a metric drops when each head (an L x H block), each layer's
attention and each FFN (two more columns) is switched off alone. Click a cell to apply it.

    view = ImportanceView(); view.compute_requested(metric, seed); view.cancel_requested
    view.show_map(ImportanceMap); view.cell_intervention(row, col) -> Intervention
    view.part_clicked(Intervention)
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtCore, QtWidgets

from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.empty_state import EmptyState
from app.gui.widgets.heatmap import HeatmapWidget
from app.gui.widgets.labels import rich_label
from app.gui.widgets.run_bar import RunBar
from core.intervene.spec import Intervention

DIVERGING = "CET-D1"         # blue - white - red: a drop's sign is its colour
METRICS = (("spearman", "Spearman", "Spearman correlation on the shipped evaluation pairs"),
           ("mrr", "MRR", "MRR: the rank of each shipped query's sentence, graded"),
           ("recall", "recall@10", "recall@10 of the shipped queries (at its ceiling on minilm)"),
           ("mlm", "masked-token log-p", "masked-token log-probability (needs a masked-LM head)"))


GRID_WORDS = "Press Apply (Before | after) to see the sentence's attention here, beside the map"


class DropHeatmap(HeatmapWidget):
    intervals = None        # (L, H + 2, 2): each cell's 95 % interval of its drop

    def tooltip_text(self, i: int, j: int) -> str:
        extra = ""
        if self.intervals is not None and i < len(self.intervals) and j < self.intervals.shape[1]:
            lo, hi = self.intervals[i, j]
            extra = (f"<br>95% interval [{lo:+.4f}, {hi:+.4f}]: "
                     + ("beyond noise" if lo > 0 or hi < 0 else "cannot be told from no change"))
        return (f"<b>{html.escape(self.row_labels[i])}, {html.escape(self.col_labels[j])}</b><br>"
                f"drop <b>{float(self.matrix[i, j]):+.4f}</b> when switched off alone{extra}<br>"
                "<i>click to apply it</i>")


class ImportanceView(QtWidgets.QWidget):
    compute_requested = QtCore.Signal(str, int)      # metric, seed
    cancel_requested = QtCore.Signal()
    part_clicked = QtCore.Signal(object)             # the Intervention of the clicked cell

    def __init__(self, parent=None):
        super().__init__(parent)
        self.map = None
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.metric = QtWidgets.QComboBox()
        for i, (key, text, words) in enumerate(METRICS):
            self.metric.addItem(text, key)
            self.metric.setItemData(i, words, QtCore.Qt.ItemDataRole.ToolTipRole)
        self.metric.setToolTip("What the map measures: " + "; ".join(f"{t}: {w}" for _, t, w in METRICS))
        self.seed = QtWidgets.QSpinBox()
        self.seed.setRange(0, 1_000_000)
        self.seed.setPrefix("seed ")
        self.seed.setToolTip("The seed of the mlm metric's masked tokens: the same seed, the same map")
        self.run_bar = RunBar("Compute map", "importance")
        self.compute_button, self.progress, self.cancel_button = (self.run_bar.run_button, self.run_bar.progress,
                                                                  self.run_bar.cancel_button)
        self.compute_button.setToolTip("Switch every head, attention and FFN off in turn and measure the metric "
                                       "(a 72-head model takes minutes on a laptop; a computed map is cached)")
        self.compute_button.clicked.connect(lambda: self.compute_requested.emit(self.metric.currentData(),
                                                                                self.seed.value()))
        self.cancel_button.clicked.connect(self.cancel_requested)
        for w in (QtWidgets.QLabel("metric"), self.metric, self.seed):
            self.run_bar.add_field(w)
        outer.addWidget(self.run_bar)
        self.info = rich_label("importance_info")
        outer.addWidget(self.info)
        self.heatmap = DropHeatmap(row_title="layer", col_title="head · attention · FFN")
        self.heatmap.colorbar.getAxis("right").setLabel("drop")
        self.heatmap.cell_clicked.connect(self._clicked)
        self.heatmap.set_show_values(True)
        self.heatmap.set_colormap(DIVERGING)          # red: the part helps; blue: the metric is better without it
        # beside it, the sentence's attention grid: the same layer x head layout, to read the two together
        self.grid = HeadGrid()
        self.grid.setToolTip("The sentence's attention, every head (as in the Attention tab's grid)")
        self.grid.head_clicked.connect(lambda l, h: self.part_clicked.emit(Intervention(heads={(l, h)})))
        self.grid_box = EmptyState(self.grid, "importance_grid")
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        split.addWidget(self.heatmap)
        split.addWidget(self.grid_box)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        self.stack = EmptyState(split, "importance")
        outer.addWidget(self.stack, 1)
        self.set_running(False)
        self.clear("Compute a map to see which parts the metric needs")

    def set_attentions(self, attentions, tokens) -> None:
        """The grid beside the map: the sentence's attention (with whatever is applied)."""
        self.grid.set_attentions(attentions, tokens)
        if np.asarray(attentions).size:
            self.grid_box.show_content()
        else:
            self.grid_box.say(GRID_WORDS)

    def set_running(self, running: bool) -> None:
        self.run_bar.set_running(running)
        if running:
            if self.info.text().startswith("<i>Cancelled"):
                self.info.clear()                # the last run's word, not this one's
            if self.map is None:
                self.stack.say("Computing the map: every head, attention and FFN is switched off in turn …")

    def on_progress(self, done: int, total: int, message: str) -> None:
        self.run_bar.on_progress(done, total, unit="part")                 # the map's name is above
        self.progress.setToolTip(message)

    def ended(self, info: str, words: str) -> None:
        """A run that ended without a map: ``info`` above the views, ``words`` where the map would be."""
        self.info.setText(info)
        if self.map is None:
            self.stack.say(words)

    def clear(self, note: str = "") -> None:
        self.map = None
        self.set_attentions(np.zeros((0, 0, 0, 0), np.float32), [])
        self.heatmap.set_matrix(np.zeros((0, 0)), [], [])
        self.info.clear()
        self.stack.say(note or "Press Compute map to see which parts the metric needs")

    def matrix(self, m) -> np.ndarray:
        """(L, H + 2): each layer's heads, then its attention and its FFN."""
        return np.concatenate([m.heads, m.attention[:, None], m.ffn[:, None]], axis=1)

    def show_map(self, m) -> None:
        self.map = m
        L, H = m.heads.shape
        values = self.matrix(m)
        # the colours span the heads' drops (a layer's whole attention or FFN costs far more and may
        # saturate: every cell's number is written in it)
        top = max(float(np.abs(m.heads).max()), 1e-9)
        self.heatmap.set_matrix(values, [f"layer {l + 1}" for l in range(L)],
                                [str(h + 1) for h in range(H)] + ["attn", "FFN"],
                                title=f"drop in {m.metric} when one part is off", levels=(-top, top))
        self.stack.show_content()
        self.heatmap.intervals = (np.stack([self.matrix_of(m.low), self.matrix_of(m.high)], axis=-1)
                                  if m.low else None)
        self.info.setText(self.summary(m))

    def matrix_of(self, by_kind: dict) -> np.ndarray:
        return np.concatenate([by_kind["heads"], by_kind["attention"][:, None], by_kind["ffn"][:, None]], axis=1)

    @staticmethod
    def summary(m) -> str:
        """The clean value with its interval and n, the floors, and what the map lets one conclude."""
        # only heads whose removal costs something: ties at 0 are no "top"
        best = ", ".join(f"{l + 1}.{h + 1} ({d:+.4f})" for (l, h), d in m.top(3) if d > 0)
        best = best or "none (no head's removal lowers the metric)"
        lines = [f"<b>{html.escape(m.metric)}</b> with every part on: <b>{m.baseline:.4f}</b> "
                 f"[{m.interval[0]:.4f}, {m.interval[1]:.4f}] (95%, n = {m.n} {html.escape(m.unit)}) · seed {m.seed}"]
        if m.floors:
            lines.append("floor: every head off " + f"{m.floors['heads']:.4f} · every attention off "
                         f"{m.floors['attention']:.4f} · every FFN off {m.floors['ffn']:.4f}")
        lines += [html.escape(line) for line in m.verdict()]
        lines.append(f"top heads: {best} · a drop is the metric's fall when the part alone is off (positive: "
                     "the part helps) · <i>click a cell to apply that ablation</i>")
        return "<br>".join(lines)

    def cell_intervention(self, row: int, col: int) -> Intervention:
        H = self.map.heads.shape[1]
        if col < H:
            return Intervention(heads={(row, col)})
        return Intervention(attention_off={row}) if col == H else Intervention(ffn_off={row})

    def _clicked(self, row: int, col: int) -> None:
        if self.map is not None:
            self.part_clicked.emit(self.cell_intervention(row, col))
