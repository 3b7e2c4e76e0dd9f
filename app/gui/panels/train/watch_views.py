"""Watching a run learn: the Train tab's gradient-flow, heads and embeddings views.

    views = WatchViews()                 # a QTabWidget: "Gradient flow", "Heads", "Embeddings"
    views.add_event(ev)                  # every trainer event (core/train/trainer.py, EVENT KINDS)
    views.load_run(folder)               # a finished or past run, from metrics.jsonl + snapshots/
    views.show_run(folder, events)       # the same, events read elsewhere (a worker)

- Gradient flow: each parameter group's gradient norm (or update/weight ratio) over steps, as
  lines (log scale) and as a group x step heatmap of log10 values: vanishing or exploding
  gradients show as a row drifting far below or above the others.
- Heads: the probe sentence's attention for every layer x head at the step the slider picks
  (the run's snapshots), and each head's attention entropy over steps (heads sharpening).
- Embeddings: the probe set's cosine matrix at the slider's step, the corpus's anisotropy and the
  held-out masked-LM accuracy over steps.

Events are only recorded when they arrive; the plots are redrawn by a timer at most
1000 / REDRAW_MS times a second, however fast the trainer reports.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.matrix_heatmap import MatrixHeatmap
from app.gui.widgets.plot_legend import legend_below
from app.gui.widgets.plot_title import fitted_title

REDRAW_MS = 100              # at most ~10 redraws a second
MEASURES = [("gradient norm", "grad_norm"), ("update / weight", "update_ratio")]
LABEL_CHARS = 28             # probe-set sentences are cut to this many characters as matrix labels


def _short(text: str, n: int = LABEL_CHARS) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _plot(quantity: str, log_y: bool = False) -> pg.PlotWidget:
    """A plot over steps whose quantity is said in its title, over the plot: a rotated axis title
    squeezed between the plot's edge and five-digit ticks ("2.0792"), and was cut at 1200×780."""
    w = pg.PlotWidget()
    w.setBackground("w")
    w.showGrid(x=True, y=True, alpha=0.3)
    w.setLabel("bottom", "step")
    fitted_title(w)
    say_quantity(w, quantity)
    w.setLogMode(y=log_y)
    w.getAxis("left").enableAutoSIPrefix(False)          # an accuracy of 0.2, never "200 (x0.001)"
    legend_below(w)
    return w


def say_quantity(plot: pg.PlotWidget, quantity: str) -> None:
    plot.setTitle(quantity, color="#555", size="9pt")


class RunRecord:
    """What the views show, gathered from events: grads, probes, evaluations."""

    def __init__(self):
        self.groups: list[str] = []
        self.grads: list[dict] = []       # "grads" events
        self.probes: list[dict] = []      # "probe" events, by step
        self.evals: list[dict] = []
        self.folder: Path | None = None

    def add(self, ev: dict) -> bool:
        """Record one event; True when it changes what is drawn."""
        kind = ev.get("kind")
        if kind == "start" and ev.get("out"):
            self.folder = Path(ev["out"]).expanduser()
        elif kind == "grads":
            self.grads.append(ev)
            for g in ev["groups"]:
                if g not in self.groups:
                    self.groups.append(g)
        elif kind == "probe":
            self.probes = [p for p in self.probes if p["step"] != ev["step"]] + [ev]
        elif kind == "eval":
            self.evals.append(ev)
        else:
            return False
        return True

    def probe_steps(self) -> list[int]:
        return [p["step"] for p in self.probes]

    def grad_matrix(self, measure: str) -> tuple[np.ndarray, list[int]]:
        """(groups x steps) of a measure; NaN where a group had no gradient that step."""
        m = np.full((len(self.groups), len(self.grads)), np.nan)
        for j, ev in enumerate(self.grads):
            for g, v in zip(ev["groups"], ev[measure]):
                m[self.groups.index(g), j] = v
        return m, [ev["step"] for ev in self.grads]


class StepSlider(QtWidgets.QWidget):
    """A slider over the run's probed steps, with the step it stands on."""

    moved = QtCore.Signal(int)            # the step picked

    def __init__(self, parent=None):
        super().__init__(parent)
        row = QtWidgets.QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider.setToolTip("Scrub through the run: the snapshot taken at each probed step")
        self.label = QtWidgets.QLabel("no snapshot yet")
        self.label.setMinimumWidth(140)
        row.addWidget(QtWidgets.QLabel("Step"))
        row.addWidget(self.slider, 1)
        row.addWidget(self.label)
        self.steps: list[int] = []
        self.slider.valueChanged.connect(self._changed)

    def set_steps(self, steps: list[int]) -> None:
        """New steps; the slider follows the newest one if it stood on the last."""
        at_end = not self.steps or self.slider.value() == len(self.steps) - 1
        current = self.step()
        self.steps = list(steps)
        self.slider.blockSignals(True)
        self.slider.setRange(0, max(0, len(steps) - 1))
        if at_end or current not in self.steps:
            self.slider.setValue(max(0, len(steps) - 1))
        else:
            self.slider.setValue(self.steps.index(current))
        self.slider.blockSignals(False)
        self._label()

    def step(self) -> int | None:
        return self.steps[self.slider.value()] if self.steps else None

    def set_step(self, step: int) -> None:
        """Stand on the probed step nearest ``step``."""
        if self.steps:
            self.slider.setValue(int(np.argmin([abs(s - step) for s in self.steps])))

    def _label(self):
        s = self.step()
        where = f"({self.slider.value() + 1}/{len(self.steps)})"
        self.label.setText("no snapshot yet" if s is None else f"step {s:,} {where}")

    def _changed(self, _):
        self._label()
        if self.steps:
            self.moved.emit(self.step())


class SnapshotReader(QtCore.QObject):
    """Reads probe snapshot files off the UI thread (a scrub over a long run must not wait on the
    disk); ``read`` brings each back: (key, attentions), attentions None when the file could not
    be read (a checkpoint swapping the folder: asked again later)."""

    read = QtCore.Signal(object, object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._pending: set = set()

    def request(self, key, folder, step: int) -> None:
        if key in self._pending:
            return
        self._pending.add(key)
        QtCore.QThreadPool.globalInstance().start(lambda: self._read(key, folder, step))

    def _read(self, key, folder, step: int) -> None:
        from core.train.run_folder import read_snapshot
        try:
            attentions = read_snapshot(folder, step)["attentions"]
        except (OSError, ValueError, KeyError):
            attentions = None
        self.read.emit(key, attentions)

    def done(self, key) -> None:
        self._pending.discard(key)


class WatchViews(QtWidgets.QTabWidget):
    """The gradient-flow, heads and embeddings views of one run, live or opened from its folder."""

    snapshot_shown = QtCore.Signal(int)   # the step whose snapshot the head grid now draws

    def __init__(self, parent=None):
        super().__init__(parent)
        self.record = RunRecord()
        self._snapshots: dict[tuple, np.ndarray] = {}
        self.grid_step: int | None = None     # the step whose snapshot the head grid draws
        self.reader = SnapshotReader(self)
        self.reader.read.connect(self._snapshot_read)
        self._dirty = False
        self.redraws = 0                  # how many times the plots were redrawn (tests, tuning)
        self.timer = QtCore.QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self.redraw)
        self.addTab(self._grads_page(), "Gradient flow")
        self.addTab(self._heads_page(), "Heads")
        self.addTab(self._embeddings_page(), "Embeddings")

    # ---- pages -------------------------------------------------------------------------------
    def _grads_page(self) -> QtWidgets.QWidget:
        page = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(page)
        row = QtWidgets.QHBoxLayout()
        self.measure = QtWidgets.QComboBox()
        for label, key in MEASURES:
            self.measure.addItem(label, key)
        self.measure.setToolTip("Gradient norm after backward (before clipping), or the size of the "
                                "optimizer's update relative to the weights (healthy: about 1e-3)")
        self.measure.currentIndexChanged.connect(self._schedule)
        row.addWidget(QtWidgets.QLabel("Per block and sublayer:"))
        row.addWidget(self.measure)
        row.addStretch(1)
        lay.addLayout(row)
        self.grad_plot = _plot("gradient norm", log_y=True)
        self.grad_curves: dict[str, pg.PlotDataItem] = {}
        self.grad_heatmap = MatrixHeatmap(row_title="block", col_title="step", value_name="log10 gradient norm")
        self.grad_heatmap.set_placeholder("gradients appear at the first logged step")
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(self.grad_plot)
        split.addWidget(self.grad_heatmap)
        lay.addWidget(split, 1)
        return page

    def _slider_page(self):
        """(page, its layout, a step slider on its first row): moving the slider shows that step."""
        page = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(page)
        slider = StepSlider()
        slider.moved.connect(self._slid)
        lay.addWidget(slider)
        return page, lay, slider

    def _heads_page(self) -> QtWidgets.QWidget:
        page, lay, self.heads_slider = self._slider_page()
        self.sentence_label = QtWidgets.QLabel("")
        self.sentence_label.setWordWrap(True)
        lay.addWidget(self.sentence_label)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.head_grid = HeadGrid()
        split.addWidget(self.head_grid)
        self.entropy_plot = _plot("attention entropy (nats)")
        self.entropy_curves: dict[tuple[int, int], pg.PlotDataItem] = {}
        self.entropy_marker = pg.InfiniteLine(angle=90, pen=pg.mkPen("#888", style=QtCore.Qt.PenStyle.DashLine))
        self.entropy_plot.addItem(self.entropy_marker, ignoreBounds=True)
        split.addWidget(self.entropy_plot)
        lay.addWidget(split, 1)
        return page

    def _embeddings_page(self) -> QtWidgets.QWidget:
        page, lay, self.embed_slider = self._slider_page()
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.cosine = MatrixHeatmap(row_title="probe sentence", col_title="probe sentence", value_name="cosine")
        self.cosine.set_placeholder("the probe set's cosines appear at the first probe")
        split.addWidget(self.cosine)
        right = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        self.anisotropy_plot = _plot("anisotropy (mean cosine)")
        self.anisotropy_curve = self.anisotropy_plot.plot([], [], pen=pg.mkPen("#6a51a3", width=2), symbol="o",
                                                          symbolSize=5, name="random training pairs")
        self.accuracy_plot = _plot("held-out accuracy · Spearman")
        self.accuracy_curve = self.accuracy_plot.plot([], [], pen=pg.mkPen("#e6550d", width=2), symbol="o",
                                                      symbolSize=5, name="held-out accuracy")
        # only with train --eval-pairs: how well the cosines rank graded pairs
        self.spearman_curve = self.accuracy_plot.plot([], [], pen=pg.mkPen("#31a354", width=2), symbol="t",
                                                      symbolSize=6, name="Spearman, scored pairs")
        # short legend entries: the widest sets the plot's narrowest width (at 1200×780 one was cut)
        self.accuracy_plot.setToolTip("held-out accuracy: the masked (or next) tokens guessed right on held-out "
                                      "sentences; Spearman: how well the cosines rank the scored pairs "
                                      "(train --eval-pairs)")
        right.addWidget(self.anisotropy_plot)
        right.addWidget(self.accuracy_plot)
        split.addWidget(right)
        split.setStretchFactor(0, 3)          # the matrix's labels, cells and title take more than the curves
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)
        return page

    # ---- data in -------------------------------------------------------------------------------
    def clear(self) -> None:
        self.record = RunRecord()
        self._snapshots.clear()
        self.grid_step = None
        for plot, curves in ((self.grad_plot, self.grad_curves), (self.entropy_plot, self.entropy_curves)):
            for c in curves.values():
                plot.removeItem(c)
            curves.clear()
            plot.getPlotItem().legend.clear()
        self.redraw()

    def add_event(self, ev: dict) -> None:
        """Record a trainer event; the plots follow at the next timer tick (coalesced)."""
        if ev.get("kind") == "start" and ev.get("step", 0) > 0 and ev.get("out"):
            self._load_past(Path(ev["out"]).expanduser())        # a resumed run: its steps so far, from its folder
        if self.record.add(ev):
            self._schedule()

    def _load_past(self, folder: Path) -> None:
        from core.train.run_folder import read_metrics
        try:
            events = read_metrics(folder)
        except (OSError, ValueError):
            return
        starts = [i for i, e in enumerate(events) if e.get("kind") == "start"]
        for e in events[:starts[-1]] if starts else events:  # this run's own events arrive as signals
            self.record.add(e)

    def show_run(self, folder, events: list[dict]) -> None:
        """Show a run from its events (core.train.run_folder.read_metrics) and its folder's snapshots."""
        self.clear()
        for e in events:
            self.record.add(e)
        self.record.folder = Path(folder)
        self.redraw()

    def load_run(self, folder) -> None:
        """Show a finished or past run: its metrics.jsonl (or trainer_state.json) and snapshots."""
        from core.train.run_folder import read_metrics
        self.show_run(folder, read_metrics(folder))

    def _schedule(self, *_):
        self._dirty = True
        if not self.timer.isActive():
            self.timer.start()

    def _slid(self, step: int) -> None:
        for s in (self.heads_slider, self.embed_slider):    # both pages stand on the same step
            if s.step() != step:
                s.blockSignals(True)
                s.set_step(step)
                s.blockSignals(False)
                s._label()
        self._schedule()

    # ---- drawing -------------------------------------------------------------------------------
    def redraw(self) -> None:
        self._dirty = False
        self.redraws += 1
        self._draw_grads()
        steps = self.record.probe_steps()
        for s in (self.heads_slider, self.embed_slider):
            s.set_steps(steps)
        self._draw_entropy()
        self._draw_embedding_curves()
        self._draw_at_step(self.heads_slider.step())

    def _draw_grads(self) -> None:
        key = self.measure.currentData()
        label = self.measure.currentText()
        m, steps = self.record.grad_matrix(key)
        say_quantity(self.grad_plot, label)
        for i, g in enumerate(self.record.groups):
            if g not in self.grad_curves:
                color = pg.intColor(i, hues=max(9, len(self.record.groups)))
                self.grad_curves[g] = self.grad_plot.plot([], [], name=g, pen=pg.mkPen(color, width=2))
            ok = np.isfinite(m[i]) & (m[i] > 0)
            self.grad_curves[g].setData(np.array(steps)[ok], m[i][ok])
        if not steps:
            self.grad_heatmap.set_placeholder("gradients appear at the first logged step")
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.log10(np.where(m > 0, m, np.nan))
        self.grad_heatmap.set_titles("block", "step", f"log10 {label}")
        self.grad_heatmap.show_matrix(logs, self.record.groups, [str(s) for s in steps], signed=False)

    def _draw_entropy(self) -> None:
        probes = self.record.probes
        if not probes:
            return
        steps = np.array([p["step"] for p in probes])
        ent = np.array([p["entropy"] for p in probes], dtype=np.float64)           # (probes, L, H)
        L, H = ent.shape[1:]
        for layer in range(L):
            for head in range(H):
                if (layer, head) not in self.entropy_curves:
                    color = pg.intColor(layer * H + head, hues=max(L * H, 2))
                    self.entropy_curves[layer, head] = self.entropy_plot.plot(
                        [], [], pen=pg.mkPen(color, width=1.5), name=f"layer {layer + 1} head {head + 1}")
                self.entropy_curves[layer, head].setData(steps, ent[:, layer, head])

    def _draw_embedding_curves(self) -> None:
        an = [(p["step"], p["anisotropy"]) for p in self.record.probes if p.get("anisotropy") is not None]
        self.anisotropy_curve.setData(*(zip(*an) if an else ([], [])))
        acc = [(e["step"], next(a for a in (e.get("heldout_mlm_accuracy"), e.get("heldout_clm_accuracy"))
                                if a is not None))
               for e in self.record.evals if e.get("heldout_mlm_accuracy") is not None
               or e.get("heldout_clm_accuracy") is not None]
        self.accuracy_curve.setData(*(zip(*acc) if acc else ([], [])))
        rho = [(e["step"], e["spearman"]) for e in self.record.evals if e.get("spearman") is not None]
        self.spearman_curve.setData(*(zip(*rho) if rho else ([], [])))

    def probe_at(self, step: int | None) -> dict | None:
        return next((p for p in self.record.probes if p["step"] == step), None)

    def _draw_at_step(self, step: int | None) -> None:
        probe = self.probe_at(step)
        if probe is None:
            return
        self.entropy_marker.setValue(step)
        texts = probe.get("probe_texts") or []
        cos = np.asarray(probe.get("probe_cosine") or np.zeros((0, 0)))
        if cos.size:
            labels = [_short(t) for t in texts]
            title = "probe set cosines"                     # the step is the slider's, above
            self.cosine.show_matrix(cos, labels, labels, title=title, signed=False)
            # An anisotropic model puts every cosine near 1: the colours span the pairs' own
            # range (lowest pair to 1) so that paraphrases still stand out; hover gives the numbers.
            off = cos[~np.eye(len(cos), dtype=bool)]
            if off.size and off.min() < 1.0:
                self.cosine.set_matrix(cos, labels, labels, title=title, levels=(float(off.min()), 1.0))
        tokens = probe.get("tokens") or []
        self.sentence_label.setText(f"Probe sentence ({len(tokens)} tokens): {' '.join(tokens)} — attention "
                                    f"of every layer × head at step {step:,}")
        att = self.snapshot_attentions(probe)
        if att is not None:
            self.head_grid.set_attentions(att, tokens)
            self.grid_step = step
            self.snapshot_shown.emit(step)

    def snapshot_attentions(self, probe: dict) -> np.ndarray | None:
        """The probe sentence's attentions (L, H, T, T) of a probe's snapshot file, once read; None
        while a worker reads it (the grid is drawn when it arrives)."""
        folder = self.record.folder
        if folder is None or not probe.get("snapshot"):
            return None
        key = (str(folder), probe["snapshot"])
        if key not in self._snapshots:
            self.reader.request(key, folder, probe["step"])
            return None
        return self._snapshots[key]

    def _snapshot_read(self, key, attentions) -> None:
        self.reader.done(key)
        if key[0] != str(self.record.folder):
            return                                   # another run was opened meanwhile
        if attentions is None:
            self._schedule()                         # not readable now: the next redraw asks again
            return
        self._snapshots[key] = attentions
        probe = self.probe_at(self.heads_slider.step())
        if probe is not None and probe.get("snapshot") == key[1]:
            self.head_grid.set_attentions(attentions, probe.get("tokens") or [])
            self.grid_step = probe["step"]
            self.snapshot_shown.emit(probe["step"])

    # ---- what a test or a screenshot asks --------------------------------------------------------
    def shown_step(self) -> int | None:
        return self.heads_slider.step()

    def flush(self) -> None:
        """Draw what is pending now rather than at the next tick."""
        if self._dirty or self.timer.isActive():
            self.timer.stop()
            self.redraw()

    def drawn_anisotropy(self) -> tuple[list, list]:
        x, y = self.anisotropy_curve.getData()
        return ([] if x is None else list(x)), ([] if y is None else list(y))
