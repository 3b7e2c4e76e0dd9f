"""The Train tab as a lab: pages to train a run and watch it (Run), keep and compare runs (Runs),
run the teaching notebook's exercises as experiments (Experiments), and evaluate any model on a
scored pairs file, with and without whitening (Evaluate).

The window builds this for its Train tab; what other code calls on the Train panel (set_corpus,
set_init_folder, running, start, cancel, ...) is forwarded to the Run page's TrainPanel.
"""
from __future__ import annotations

from PySide6 import QtWidgets
from PySide6.QtCore import Signal

from app.gui.panels.train.evaluate_view import EvaluateView
from app.gui.panels.train.experiments_view import ExperimentsView
from app.gui.panels.train.panel import TrainPanel
from app.gui.panels.train.runs_view import RunsView


class TrainLab(QtWidgets.QWidget):
    run_finished = Signal(object)     # the Run page's summary dict (as TrainPanel.run_finished)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.pages = QtWidgets.QTabWidget()
        self.pages.setObjectName("lab_pages")
        layout.addWidget(self.pages)

        self.run_panel = TrainPanel(state)
        self.runs_view = RunsView(state)
        self.experiments_view = ExperimentsView(state)
        self.add_page("Run", self.run_panel)
        self.add_page("Runs", self.runs_view)
        self.add_page("Experiments", self.experiments_view)
        self.evaluate_view = EvaluateView(state)
        self.add_page("Evaluate", self.evaluate_view)

        self.run_panel.run_finished.connect(self.run_finished)
        self.run_panel.run_finished.connect(lambda *_: self._refresh_runs_if_shown())
        self.experiments_view.finished.connect(self._on_experiment)
        self.experiments_view.page_requested.connect(self.show_page)
        self.pages.currentChanged.connect(self._on_page)

    # ---- pages ---------------------------------------------------------------------------------
    def add_page(self, title: str, widget: QtWidgets.QWidget) -> None:
        self.pages.addTab(widget, title)
        if hasattr(self, "experiments_view"):
            self.experiments_view.set_pages(self.page_titles())

    def page_titles(self) -> list[str]:
        return [self.pages.tabText(i) for i in range(self.pages.count())]

    def page(self, title: str) -> QtWidgets.QWidget | None:
        titles = self.page_titles()
        return self.pages.widget(titles.index(title)) if title in titles else None

    def show_page(self, title: str) -> bool:
        widget = self.page(title)
        if widget is None:
            return False
        self.pages.setCurrentWidget(widget)
        return True

    def _on_page(self, index: int):
        if self.pages.widget(index) is self.runs_view and self.runs_view.listed_folder is None:
            self.runs_view.refresh()

    def _refresh_runs_if_shown(self):
        if self.pages.currentWidget() is self.runs_view:
            self.runs_view.refresh()

    def _on_experiment(self, result: dict):
        """An experiment is done: compare its finished runs on the Runs page."""
        comparison = result.get("comparison")
        if comparison is None:
            return
        from pathlib import Path
        labels = {r["path"]: r.get("label", Path(r["path"]).name) for r in comparison["runs"]}
        folder = Path(next(iter(labels))).parent
        self.show_page("Runs")         # first: showing the page lists its folder when never listed
        self.runs_view.show_experiment(str(folder), labels, result["look_at"], result.get("compare", ""))

    # ---- the Train panel's interface, forwarded to the Run page ---------------------------------
    def set_corpus(self, path) -> None:
        self.run_panel.set_corpus(path)

    def set_init_folder(self, folder) -> None:
        self.run_panel.set_init_folder(folder)

    @property
    def running(self) -> bool:
        return self.run_panel.running or self.experiments_view.running

    def start(self) -> bool:
        return self.run_panel.start()

    def resume(self, folder=None) -> bool:
        return self.run_panel.resume(folder)

    def cancel(self) -> None:
        self.run_panel.cancel()
        self.experiments_view.cancel()

    def use_model(self) -> bool:
        return self.run_panel.use_model()

    def config(self):
        return self.run_panel.config()

    @property
    def overrides(self) -> dict:
        """Extra TrainConfig fields for the runs started here (tests, power users): the Run page's
        and, under each experiment's own settings, every experiment run's."""
        return self.run_panel.overrides

    @overrides.setter
    def overrides(self, values: dict) -> None:
        self.run_panel.overrides = dict(values)
        self.experiments_view.overrides = dict(values)
