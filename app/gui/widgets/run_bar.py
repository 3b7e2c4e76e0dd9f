"""The one bar of a long job's panel: its Run button, a progress bar that says the time left, and
Cancel (always in the same place: the bar keeps its room while hidden, Cancel never moves).

    bar = RunBar("Compute map", "importance")          # objects importance_run/_progress/_cancel
    bar.add_field(combo)                              # settings before the Run button
    bar.run_button.clicked.connect(...); bar.cancel_button.clicked.connect(...)
    bar.set_running(True, "Measuring")                # busy until the first progress
    bar.on_progress(done, total, "Sweep (heads)")     # "Sweep (heads): 6 of 84 · about 40 s left"
    bar.set_running(False)
"""
from __future__ import annotations

import time

from PySide6 import QtWidgets

from app.gui.widgets.keep_place import keep_place
from app.gui.widgets.time_left import time_left_words

WIDEST = "Measured drop (spearman): 000 of 000 · about 00 min 00 s left"


class RunBar(QtWidgets.QWidget):
    def __init__(self, run_label: str, name: str, parent=None):
        super().__init__(parent)
        self.setObjectName(f"{name}_bar")
        self.row = QtWidgets.QHBoxLayout(self)
        self.row.setContentsMargins(0, 0, 0, 0)
        self.run_button = QtWidgets.QPushButton(run_label)
        self.run_button.setObjectName(f"{name}_run")
        self.progress = QtWidgets.QProgressBar()
        self.progress.setObjectName(f"{name}_progress")
        self.progress.setTextVisible(True)
        self.progress.setMinimumWidth(self.progress.fontMetrics().horizontalAdvance(WIDEST) // 2)
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.cancel_button.setObjectName(f"{name}_cancel")
        keep_place(self.progress)                 # hidden or shown, Cancel stays where it was
        self.row.addWidget(self.run_button)
        self.row.addWidget(self.progress, 1)
        self.row.addWidget(self.cancel_button)
        self._started = 0.0
        self.set_running(False)

    def add_field(self, widget: QtWidgets.QWidget, stretch: int = 0) -> None:
        """A setting of the run, before its Run button."""
        self.row.insertWidget(self.row.indexOf(self.run_button), widget, stretch)

    def set_running(self, running: bool, message: str = "") -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self._started = time.monotonic()
            self.progress.setRange(0, 0)          # busy until the first progress
            self.progress.setFormat(message or "working …")
            self.progress.setToolTip(message)

    def on_progress(self, done: int, total: int, message: str = "", unit: str = "") -> None:
        """``message``: what runs ("Sweep (heads)"); ``unit``: what is counted ("part 3 of 12")."""
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)
        left = time_left_words(time.monotonic() - self._started, done, total)
        self.progress.setFormat((f"{message}: " if message else "") + (f"{unit} " if unit else "") + "%v of %m"
                                + (f" · {left}" if left else ""))
        self.progress.setToolTip(message)
