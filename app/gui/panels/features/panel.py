"""The Features tab: sparse-autoencoder features of the inspected model (core/features/).

Top: what an SAE trains on (the sample corpus, the open corpus or a file), its site, width, k, tokens
and seed, its folder; Train (a folder with an unfinished run resumes it), Cancel (stops at the next
step, the checkpoint kept), Open SAE… and Index features. Below, the feature browser: the list
(sorted, the dead left out, or the features that fire on a word) beside the chosen feature (its top
examples highlighted in their sentences, its activation histogram, the tokens its decoder aligns
with and those it promotes; Ablate / Steer it in a query and see which of the corpus's hits move),
the Quality page (the table with its floors) and the Sweep page (which of A's features, set to B's
values, move A toward B; a row clicked shows that feature in the browser; a result whose A, B or SAE
changed since says it is stale).

Every computation runs in a worker (app/gui/workers.py) with progress and Cancel; the SAE opened
here is the app's (app/gui/current_features.py): Step by step, Why and the Map follow it. An SAE
trained on another model is refused with the reason; a model switch closes one that does not fit.
"""
from __future__ import annotations

import html
from pathlib import Path

from PySide6 import QtCore, QtWidgets

from app.gui import panel_state
from app.gui.current_features import current_features, why_not_fitting
from app.gui.follow_model import FollowModel
from app.gui.panels.features import compute as C
from app.gui.panels.features.edit_view import EditBox
from app.gui.panels.features.feature_list import FeatureList
from app.gui.panels.features.feature_view import FeatureView
from app.gui.panels.features.quality_view import QualityView
from app.gui.panels.features.sweep_view import SweepBox
from app.gui.panels.features.train_view import TrainBar

LONG_JOBS = ("features.train", "features.open", "features.index", "features.quality")
EDIT_JOB = "features.edit"
SWEEP_JOB = "features.sweep"


class FeaturesPanel(QtWidgets.QWidget):
    opened = QtCore.Signal(object)            # the OpenedSae now shown (after Train, Open or Index)
    rows_shown = QtCore.Signal(list)          # the feature list's rows
    feature_shown = QtCore.Signal(object)     # a FeatureSummary, after it is drawn
    quality_shown = QtCore.Signal(object)     # a QualityReport, after it is drawn
    edit_shown = QtCore.Signal(object)        # a SteeredSearch (which hits move), after it is drawn
    sweep_shown = QtCore.Signal(object)       # a FeatureSweep, after it is drawn
    cancelled = QtCore.Signal(str)            # the job's key
    failed = QtCore.Signal(str)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.current = current_features(state)
        self.follow = FollowModel(state, "features.model")
        self._build()
        self.follow.model_changed.connect(self._on_backend)
        self._on_backend(self.follow.backend)

    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        self.bar = TrainBar()
        self.bar.train_requested.connect(self.train)
        self.bar.cancel_requested.connect(self.cancel)
        self.bar.open_requested.connect(self.choose_and_open)
        self.bar.index_requested.connect(self.build_index)
        outer.addWidget(self.bar)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.feature_list = FeatureList()
        self.feature_list.query_changed.connect(self.list_features)
        self.feature_list.feature_chosen.connect(self.show_feature)
        split.addWidget(self.feature_list)
        self.pages = QtWidgets.QTabWidget()
        self.feature_view = FeatureView()
        self.edit_box = EditBox()
        self.edit_box.run_requested.connect(self.edit_feature)
        feature_page = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        feature_page.addWidget(self.feature_view)
        feature_page.addWidget(self.edit_box)
        feature_page.setStretchFactor(0, 3)
        feature_page.setStretchFactor(1, 2)
        self.quality_view = QualityView()
        self.quality_view.run_requested.connect(self.evaluate)
        self.sweep_box = SweepBox()
        self.sweep_box.run_requested.connect(self.sweep)
        self.sweep_box.bar.cancel_button.clicked.connect(lambda: self.state.jobs.cancel(SWEEP_JOB))
        self.sweep_box.feature_chosen.connect(self.choose_feature)
        self.sweep_box.text_a.textChanged.connect(self._mark_sweep_stale)
        self.sweep_box.text_b.textChanged.connect(self._mark_sweep_stale)
        self.sweep_args: tuple | None = None       # (A, B, the SAE's folder) of the sweep shown
        self.pages.addTab(feature_page, "Feature")
        self.pages.addTab(self.quality_view, "Quality")
        self.pages.addTab(self.sweep_box, "Sweep")
        split.addWidget(self.pages)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        split.setSizes([430, 900])
        outer.addWidget(split, 1)
        self._enable()

    # ---- the jobs ----------------------------------------------------------------------------
    def source(self) -> C.Sentences:
        kind, file = self.bar.source()
        return C.Sentences(kind, self.state.store if kind == "corpus" else None, file)

    def _long(self, key: str, fn, *args, label: str, on_result) -> bool:
        """A long job on the inspected model (train, open, index, evaluate): one at a time, the bar's
        progress and Cancel."""
        backend = self.follow.backend
        if backend is None:
            self.bar.say("Waiting for the model to load …")
            return False
        if any(self.state.jobs.is_running(k) for k in LONG_JOBS):
            self.bar.say("Another features job is running: wait for it or Cancel it")
            return False
        self.bar.set_running(True, label)
        self.bar.say(label + " …")
        job = self.state.run(key, fn, backend, *args, label=label,
                             on_result=lambda result: self._landed(backend, on_result, result),
                             on_error=self._error, on_progress=self.bar.on_progress,
                             on_cancelled=lambda: self._cancelled(key),
                             on_finished=lambda: self.bar.set_running(self._busy()))
        if job is None:
            self.bar.set_running(self._busy())
        return job is not None

    def _busy(self) -> bool:
        return any(self.state.jobs.is_running(k) for k in LONG_JOBS)

    def _landed(self, backend, on_result, result) -> None:
        if backend is not self.follow.backend:      # the model changed meanwhile: nothing of it is shown
            return
        on_result(result)

    def train(self) -> bool:
        settings = self.bar.settings()
        folder = self.bar.folder.text().strip()
        if not folder:
            self._error("choose the folder the SAE is saved in (a folder with an unfinished run resumes it)")
            return False
        return self._long("features.train", C.train_fn, self.source(), settings, Path(folder),
                          label=f"Training an SAE at {settings['site']}", on_result=self._open)

    def open_folder(self, folder) -> bool:
        self.bar.folder.setText(str(folder))
        return self._long("features.open", C.open_fn, Path(folder), label="Opening the SAE", on_result=self._open)

    def choose_and_open(self) -> None:
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Open the SAE saved in this folder")
        if folder:
            self.open_folder(folder)

    def build_index(self) -> bool:
        opened = self.current.opened
        if opened is None:
            self._error("open or train an SAE first")
            return False
        return self._long("features.index", C.index_fn, opened, self.source(),
                          label="Indexing the features", on_result=self._open)

    def evaluate(self) -> bool:
        opened = self.current.opened
        if opened is None:
            self._error("open or train an SAE first")
            return False
        self.pages.setCurrentWidget(self.quality_view)
        return self._long("features.quality", C.quality_fn, opened, self.source(),
                          label="Measuring the SAE", on_result=self._show_quality)

    def cancel(self) -> None:
        for key in LONG_JOBS + (EDIT_JOB, SWEEP_JOB):
            self.state.jobs.cancel(key)

    # ---- the sweep: which of A's features, set to B's values, move A toward B --------------------------
    def sweep(self, a: str = "", b: str = "") -> bool:
        opened, backend, box = self.current.opened, self.follow.backend, self.sweep_box
        if opened is None or backend is None:
            box.say("open or train an SAE first" if backend is not None else "Waiting for the model to load …",
                    error=backend is not None)
            return False
        a = a or box.text_a.text().strip()
        b = b or box.text_b.text().strip()
        args = (a, b, str(opened.folder))
        box.bar.set_running(True, "Sweep")
        box.say(f"Setting A's features to B's values, one at a time, at {opened.site} …")
        job = self.state.run(SWEEP_JOB, C.sweep_fn, backend, opened, a, b, label="Features sweep",
                             on_result=lambda r: self._show_sweep(backend, opened, args, r),
                             on_error=self._sweep_failed, on_progress=box.bar.on_progress,
                             on_cancelled=lambda: self._sweep_cancelled(),
                             on_finished=lambda: box.bar.set_running(self.state.jobs.is_running(SWEEP_JOB)))
        if job is None:
            box.bar.set_running(self.state.jobs.is_running(SWEEP_JOB))
        return job is not None

    def _show_sweep(self, backend, opened, args, sweep) -> None:
        if backend is not self.follow.backend or opened is not self.current.opened:
            return                                  # another model or SAE meanwhile: not this one's result
        self.sweep_args = args
        self.sweep_box.show_sweep(sweep, C.labels_of(opened, [e.feature for e in sweep.effects]), opened.site)
        self._mark_sweep_stale()
        self.sweep_shown.emit(sweep)

    def _sweep_failed(self, message: str) -> None:
        self.sweep_box.say(message, error=True)     # the last sweep shown stays
        self.failed.emit(message)

    def _sweep_cancelled(self) -> None:
        self.sweep_box.say("Cancelled: the last sweep (if any) is kept")
        self._mark_sweep_stale()
        self.cancelled.emit(SWEEP_JOB)

    def _mark_sweep_stale(self, *_) -> None:
        """A sweep computed for another A, B or SAE than those now typed and open says so."""
        shown = self.sweep_args if self.sweep_box.sweep is not None else None
        opened = self.current.opened
        now = (self.sweep_box.text_a.text().strip(), self.sweep_box.text_b.text().strip(),
               str(opened.folder) if opened is not None else "")
        if shown is None or now == shown:
            self.sweep_box.set_stale("")
            return
        a, b = (html.escape(t) for t in shown[:2])
        self.sweep_box.set_stale(f"This sweep is of A “{a}” and B “{b}” with the SAE it ran with: the inputs have "
                                 "changed since. Press <b>Sweep</b> to compute it for the new ones.")

    def choose_feature(self, feature: int) -> bool:
        """``feature`` selected in the browser: its row in the list when listed, its page shown."""
        opened = self.current.opened
        if opened is None or opened.index is None:
            self.sweep_box.say(f"feature {feature}: press Index features to browse it", error=True)
            return False
        self.pages.setCurrentIndex(0)
        rows = self.feature_list.model.rows
        at = next((r for r, row in enumerate(rows) if row.feature == int(feature)), None)
        if at is not None and at != self.feature_list.table.currentIndex().row():
            self.feature_list.table.selectRow(at)      # the list's choice (feature_chosen) shows it
            self.feature_list.table.scrollTo(self.feature_list.model.index(at, 0))
            return True
        return self.show_feature(int(feature))

    def edit_feature(self, mode: str, alpha: float, query: str = "") -> bool:
        """The shown feature ablated or steered in ``query``'s forward pass: the open corpus's hits
        before and after (the chosen sentences when no corpus is open)."""
        opened, summary, backend = self.current.opened, self.feature_view.summary, self.follow.backend
        if opened is None or summary is None or backend is None:
            self.edit_box.say("choose a feature first", error=True)
            return False
        query = query or self.edit_box.query.text().strip()
        feature = summary.feature
        self.edit_box.set_running(True)
        self.edit_box.say(f"Searching with feature {feature} {'ablated' if mode == 'ablate' else 'steered'} …")
        job = self.state.run(EDIT_JOB, C.edit_fn, backend, opened, feature, mode, alpha, query, self.state.store,
                             self.source(), label=f"Feature {feature}: which hits move",
                             on_result=lambda r: self._show_edit(backend, feature, mode, alpha, r),
                             on_error=self._edit_failed,
                             on_finished=lambda: self.edit_box.set_running(False))
        if job is None:
            self.edit_box.set_running(False)
        return job is not None

    def _edit_failed(self, message: str) -> None:
        self.edit_box.say(message, error=True)      # the last hits shown stay
        self.failed.emit(message)

    def _show_edit(self, backend, feature, mode, alpha, result) -> None:
        if backend is not self.follow.backend:
            return
        self.edit_box.show_changes(feature, mode, alpha, result)
        self.edit_shown.emit(result)

    # ---- the browser -------------------------------------------------------------------------
    def list_features(self, sort: str = "density", filter_dead: bool = True, word: str = "") -> bool:
        opened = self.current.opened
        if opened is None or opened.index is None:
            return False
        index = opened.index
        self.state.run_latest("features.rows", C.rows_fn, index, sort, filter_dead, word,
                              label="Listing features", show_progress=False,
                              on_result=lambda rows: self._show_rows(index, rows), on_error=self._error)
        return True

    def show_feature(self, feature: int) -> bool:
        opened = self.current.opened
        if opened is None or opened.index is None:
            return False
        index = opened.index
        self.state.run_latest("features.summary", C.summary_fn, index, int(feature), label="Feature",
                              show_progress=False,
                              on_result=lambda summary: self._show_summary(index, summary), on_error=self._error)
        return True

    def _fresh(self, index) -> bool:
        opened = self.current.opened
        return opened is not None and opened.index is index

    def _show_rows(self, index, rows) -> None:
        if not self._fresh(index) or self.state.has_waiting("features.rows"):
            return
        self.feature_list.set_rows(rows)
        if not rows:
            self.feature_view.clear("No feature to show" + (" for this word" if self.feature_list.word.text().strip()
                                                            else ""))
        self.rows_shown.emit(rows)

    def _show_summary(self, index, summary) -> None:
        if not self._fresh(index) or self.state.has_waiting("features.summary"):
            return
        self.feature_view.show_summary(summary)
        if not self.edit_box.typed and summary.top_examples:
            self.edit_box.query.setText(summary.top_examples[0].sentence)   # a query the feature fires on
        self.feature_shown.emit(summary)

    def _show_quality(self, report) -> None:
        self.quality_view.show_report(report)
        self.bar.say(f"Quality of {self.current.opened.describe()} on its held-out tokens"
                     if self.current.opened else "")
        self.quality_shown.emit(report)

    # ---- remembered across restarts (app/gui/panel_state.py) ------------------------------------
    def save_state(self) -> dict:
        return {**self.bar.settings(), "folder": self.bar.folder.text(), "source": self.bar.source()[0],
                "file": self.bar.source()[1]}

    def restore_state(self, saved: dict) -> None:
        self.bar.folder.setText(panel_state.text(saved, "folder"))
        self.bar.file.setText(panel_state.text(saved, "file"))
        index = self.bar.source_box.findData(panel_state.text(saved, "source", "sample"))
        self.bar.source_box.setCurrentIndex(max(index, 0))
        for box, key in ((self.bar.k_box, "k"), (self.bar.tokens_box, "tokens"), (self.bar.batch_box, "batch"),
                         (self.bar.seed_box, "seed")):
            panel_state.set_spin(box, panel_state.number(saved, key))

    # ---- state ---------------------------------------------------------------------------------
    def _open(self, opened) -> None:
        self.current.set(opened)
        self.bar.folder.setText(str(opened.folder))
        self.quality_view.clear()
        self._mark_sweep_stale()
        self.feature_view.clear("")
        if opened.index is None:
            self.feature_list.clear("")
            self.bar.say(f"Opened {opened.describe()}: {opened.note or 'no feature index yet'} · press Index "
                         "features to find what each feature fires on")
        else:
            self.bar.say(f"Opened {opened.describe()}")
            self.feature_list.ask()
        self._enable()
        self.opened.emit(opened)

    def _enable(self) -> None:
        opened = self.current.opened
        self.bar.index_button.setEnabled(opened is not None and not self._busy())
        self.quality_view.run_button.setEnabled(opened is not None)

    def _error(self, message: str) -> None:
        self.bar.say(message, error=True)           # what is shown stays
        self.failed.emit(message)

    def _cancelled(self, key: str) -> None:
        what = "Training stopped: its checkpoint is kept, Train on the same folder resumes it" \
            if key == "features.train" else "Cancelled: what was shown is kept"
        self.bar.say(what)
        self.cancelled.emit(key)

    def _on_backend(self, backend) -> None:
        """A new inspected model: the work for the old one is cancelled; an SAE of another model closes."""
        self.cancel()
        opened = self.current.opened
        if backend is None:
            self.bar.train_button.setEnabled(False)
            self.bar.say("Loading the model …")
            return
        self.bar.train_button.setEnabled(not self._busy())
        self.bar.set_model(int(backend.n_layers), int(backend.dim))
        if opened is not None:
            reason = why_not_fitting(opened, backend)
            if reason:
                self.current.clear()
                self.feature_list.clear("")
                self.feature_view.clear("")
                self.quality_view.clear()
                self.sweep_box.clear("")
                self.bar.say(f"{opened.describe()} was closed: {reason}")
        else:
            self.bar.say(f"{getattr(backend, 'model_name', '')}: train an SAE, or open one")
        self._enable()
