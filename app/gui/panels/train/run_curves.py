"""Several runs' curves overlaid, one colour per run: training loss, gradient norm, anisotropy and
an evaluation metric, each in its own plot (the gradient-norm and evaluation plots let the user
pick which of the runs' series to draw). One key above the four plots names the runs' colours:
a legend in each small plot would cover its curves or squeeze it."""
from __future__ import annotations

import html

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.gui.widgets.plot_title import fitted_title
from core.train.runs import curves

COLORS = ["#2171b5", "#e6550d", "#31a354", "#756bb1", "#d62728", "#8c564b", "#e377c2", "#17becf"]
# (title, y label, series prefix, preferred series): the prefix offers a choice of series
PLOTS = [
    ("Training loss", "loss", "step.loss", "step.loss"),
    ("Gradient norm", "norm", "grads.", "grads.total_grad_norm"),
    ("Anisotropy (mean cosine of random pairs)", "cosine", "probe.anisotropy", "probe.anisotropy"),
    ("Evaluation", "value", "eval.", "eval.heldout_loss"),
]


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


class CurvePlot(QtWidgets.QWidget):
    """One plot of the overlay, with a series picker when more than one series fits it."""

    def __init__(self, title: str, ylabel: str, prefix: str, preferred: str, parent=None):
        super().__init__(parent)
        self.title, self.prefix, self.preferred = title, prefix, preferred
        self.named_series: dict[str, dict[str, list]] = {}
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.picker = QtWidgets.QComboBox()
        self.picker.setToolTip("Which of the runs' series this plot draws")
        self.picker.currentIndexChanged.connect(self._draw)
        self.plot = pg.PlotWidget()
        fitted_title(self.plot)                 # "Gradient norm: layer 1 attention" fits a quarter of the page
        self.plot.setTitle(title)
        self.plot.setBackground("w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.plot.setLabel("bottom", "step")
        self.plot.setLabel("left", ylabel)
        for side in ("left", "bottom"):       # a cosine of 0.9, never "900 (x0.001)"
            self.plot.getAxis(side).enableAutoSIPrefix(False)
        layout.addWidget(self.picker)
        layout.addWidget(self.plot, 1)
        self.drawn: dict[str, list[tuple[int, float]]] = {}   # run label -> the points drawn

    def set_runs(self, named_series: dict[str, dict[str, list]]) -> None:
        """``named_series``: run label -> core.train.runs.curves of its events."""
        self.named_series = named_series
        names = sorted({n for series in named_series.values() for n in series
                        if n == self.prefix or (self.prefix.endswith(".") and n.startswith(self.prefix))})
        self.picker.blockSignals(True)
        self.picker.clear()
        self.picker.addItems(names)
        if names:
            self.picker.setCurrentIndex(names.index(self.preferred) if self.preferred in names else 0)
        self.picker.blockSignals(False)
        self.picker.setVisible(len(names) > 1)
        self._draw()

    @property
    def series_name(self) -> str:
        return self.picker.currentText()

    def _draw(self, *_):
        self.plot.clear()
        self.drawn = {}
        name = self.series_name
        for i, (label, series) in enumerate(self.named_series.items()):
            points = series.get(name) if name else None
            if not points:
                continue
            x, y = zip(*points)
            self.plot.plot(list(x), list(y), pen=pg.mkPen(color(i), width=2), name=label,
                           symbol="o" if len(points) < 30 else None, symbolSize=5, symbolBrush=color(i))
            self.drawn[label] = points
        shown = name.split(".", 1)[1] if "." in name else name
        self.plot.setTitle(f"{self.title}: {shown}" if self.drawn else f"{self.title}: none of these runs has it")


class RunCurves(QtWidgets.QWidget):
    """The four overlay plots in a 2 × 2 grid."""

    def __init__(self, parent=None):
        super().__init__(parent)
        grid = QtWidgets.QGridLayout(self)
        grid.setContentsMargins(0, 0, 0, 0)
        self.key = QtWidgets.QLabel("")          # each run's colour, for all four plots
        self.key.setObjectName("run_curves_key")
        self.key.setWordWrap(True)
        self.key.setTextFormat(QtCore.Qt.TextFormat.RichText)
        grid.addWidget(self.key, 0, 0, 1, 2)
        self.plots = [CurvePlot(*spec) for spec in PLOTS]
        for i, p in enumerate(self.plots):
            grid.addWidget(p, 1 + i // 2, i % 2)
        grid.setRowStretch(1, 1)
        grid.setRowStretch(2, 1)
        self.loss_plot, self.grad_plot, self.anisotropy_plot, self.eval_plot = self.plots

    def set_runs(self, named_events: dict[str, list[dict]], evaluation: str | None = None) -> None:
        """``named_events``: run label -> its events (core.train.run_folder.read_metrics);
        ``evaluation``: the series the Evaluation plot shows first (None: the held-out loss)."""
        named_series = {label: curves(events) for label, events in named_events.items()}
        self.eval_plot.preferred = evaluation or PLOTS[3][3]
        self.key.setText("&nbsp;&nbsp; ".join(
            f"<span style='color:{color(i)}; font-weight:bold'>━━</span>&nbsp;{html.escape(label)}"
            for i, label in enumerate(named_events)))
        for p in self.plots:
            p.set_runs(named_series)
