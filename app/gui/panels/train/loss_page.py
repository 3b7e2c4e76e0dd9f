"""The Train panel's Loss page: the training and held-out loss curves (pyqtgraph), the Fit
button, the step progress bar, and the run's readout and latest evaluation in words. Its
widgets are the panel's attributes (the panel's event handlers draw into them)."""
from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.gui.widgets.plot_legend import legend_below


def build_loss_page(panel) -> QtWidgets.QWidget:
    """The page, its widgets set on `panel` (plot, train_curve, eval_curve, fit_button, ...)."""
    loss_page = QtWidgets.QWidget()
    right = QtWidgets.QVBoxLayout(loss_page)
    panel.plot = pg.PlotWidget()
    panel.plot.setBackground("w")
    panel.plot.showGrid(x=True, y=True, alpha=0.3)
    panel.plot.setLabel("bottom", "step")
    panel.plot.setLabel("left", "loss")
    for side in ("left", "bottom"):       # a loss of 0.5, never "500 (x0.001)"
        panel.plot.getAxis(side).enableAutoSIPrefix(False)
    legend_below(panel.plot)              # under the plot: never over the curves
    panel.train_curve = panel.plot.plot([], [], pen=pg.mkPen("#2171b5", width=2), name="train")
    panel.eval_curve = panel.plot.plot([], [], pen=pg.mkPen("#e6550d", width=2), symbol="o",
                                       symbolSize=6, symbolBrush="#e6550d", name="held-out")
    right.addWidget(panel.plot, 1)
    fit_row = QtWidgets.QHBoxLayout()
    panel.plot_hint = QtWidgets.QLabel("Wheel: zoom · drag: pan")
    panel.plot_hint.setStyleSheet("color: gray;")
    panel.fit_button = QtWidgets.QPushButton("Fit")
    panel.fit_button.setObjectName("fit_plot_button")
    panel.fit_button.setToolTip("Show the whole curve again, and follow it as it grows")
    panel.fit_button.clicked.connect(panel.fit_plot)
    fit_row.addWidget(panel.plot_hint, 1)
    fit_row.addWidget(panel.fit_button)
    right.addLayout(fit_row)
    add_progress(panel, right, "Not started")
    panel.stats.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    panel.eval_label = QtWidgets.QLabel("")
    panel.eval_label.setWordWrap(True)
    panel.eval_label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
    right.addWidget(panel.eval_label)
    return loss_page


def add_progress(view, layout, text: str) -> None:
    """A training job's progress bar (in steps) and status line, added to `layout` as the view's
    `progress` and `stats`."""
    view.progress = QtWidgets.QProgressBar()
    view.progress.setFormat("%v / %m steps")
    layout.addWidget(view.progress)
    view.stats = QtWidgets.QLabel(text)
    view.stats.setWordWrap(True)
    layout.addWidget(view.stats)
