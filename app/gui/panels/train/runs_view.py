"""The lab's Runs page: the training runs kept under a folder; select two or more to overlay their
curves (loss, gradient norm, anisotropy, evaluation) and see a table of the settings in which they
differ and one of their final metrics; save the plots as PNG and the curves or the table as CSV.

Listing and reading runs are disk work: they run in workers (``state.run``), never on the UI thread.
"""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Signal

from app.gui.panels.train.run_curves import RunCurves, color
from app.gui.widgets.save_dialog import ask_save_path

LIST_JOB = "runs.list"
COMPARE_JOB = "runs.compare"
COLUMNS = ["run", "objective", "step", "loss", "held-out loss"]


def list_job(folder, progress=None, cancel=None):
    """(folder, runs newest first, messages about unreadable run folders)."""
    from core.train.runs import list_runs
    return (folder, *list_runs(folder))


def compare_job(folders, progress=None, cancel=None):
    """(comparison, {path: events}) of two or more run folders."""
    from core.train.run_folder import read_metrics
    from core.train.runs import compare_runs
    comparison = compare_runs(folders)
    return comparison, {str(f): read_metrics(f) for f in folders}


def _num(value) -> str:
    return "" if value is None else f"{value:.4g}"


class RunsView(QtWidgets.QWidget):
    compared = Signal(object)      # the comparison dict, once shown

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.runs: list = []                 # core.train.runs.Run, as listed (newest first)
        self.comparison: dict | None = None
        self.events: dict[str, list[dict]] = {}
        self.labels: dict[str, str] = {}     # run path -> the name it is shown by
        self.last_dir = Path.home()
        self._wanted: list[str] = []         # runs to select once the listing arrives
        self.listed_folder: Path | None = None
        self.known_labels: dict[str, str] = {}   # run path -> its experiment label
        self._notes: dict[frozenset, str] = {}    # an experiment's run paths -> what to look at
        self._compare: dict[frozenset, str] = {}  # an experiment's run paths -> its evaluation series
        self._build()

    # ---- layout ----------------------------------------------------------------------------
    def _build(self):
        from core.paths import models_dir

        outer = QtWidgets.QVBoxLayout(self)
        row = QtWidgets.QHBoxLayout()
        self.folder = QtWidgets.QLineEdit(str(models_dir()))
        self.folder.setToolTip("The folder whose training runs are listed (subfolders included)")
        self.folder.returnPressed.connect(self.refresh)
        browse = QtWidgets.QPushButton("Folder…")
        browse.clicked.connect(self._browse)
        self.refresh_button = QtWidgets.QPushButton("Refresh")
        self.refresh_button.clicked.connect(self.refresh)
        row.addWidget(QtWidgets.QLabel("Runs in"))
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        row.addWidget(self.refresh_button)
        outer.addLayout(row)

        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        left = QtWidgets.QWidget()
        lv = QtWidgets.QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        self.table = QtWidgets.QTableWidget(0, len(COLUMNS))
        self.table.setObjectName("runs_table")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_selection)
        lv.addWidget(self.table, 1)
        split.addWidget(left)

        right = QtWidgets.QWidget()
        rv = QtWidgets.QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.note = QtWidgets.QLabel("")
        self.note.setObjectName("look_at")
        self.note.setWordWrap(True)
        self.note.setStyleSheet("background: #fff7d6; padding: 4px;")
        self.note.hide()
        rv.addWidget(self.note)
        self.curves = RunCurves()
        rv.addWidget(self.curves, 3)
        tables = QtWidgets.QHBoxLayout()
        self.differ_table = self._small_table("differ_table")
        self.final_table = self._small_table("final_table")
        for title, t in (("Settings that differ", self.differ_table), ("Final metrics", self.final_table)):
            box = QtWidgets.QGroupBox(title)
            QtWidgets.QVBoxLayout(box).addWidget(t)
            tables.addWidget(box, 1)
        rv.addLayout(tables, 1)
        buttons = QtWidgets.QHBoxLayout()
        self.png_button = QtWidgets.QPushButton("Save plots (PNG)…")
        self.curves_button = QtWidgets.QPushButton("Save curves (CSV)…")
        self.table_button = QtWidgets.QPushButton("Save table (CSV)…")
        self.png_button.clicked.connect(lambda: self._save("plots.png", "PNG image (*.png)", self.export_png))
        self.curves_button.clicked.connect(lambda: self._save("curves.csv", "CSV (*.csv)", self.export_curves_csv))
        self.table_button.clicked.connect(lambda: self._save("runs.csv", "CSV (*.csv)", self.export_table_csv))
        buttons.addStretch(1)
        for b in (self.png_button, self.curves_button, self.table_button):
            buttons.addWidget(b)
        rv.addLayout(buttons)
        split.addWidget(right)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        split.setSizes([380, 900])
        outer.addWidget(split, 1)
        self.message = QtWidgets.QLabel("Select two or more runs to compare them (Ctrl/Shift-click)")
        self.message.setWordWrap(True)
        outer.addWidget(self.message)
        self._update_enabled()

    @staticmethod
    def _small_table(name: str) -> QtWidgets.QTableWidget:
        t = QtWidgets.QTableWidget(0, 0)
        t.setObjectName(name)
        t.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        # every run's column shares the box's width (three runs of an experiment side by side,
        # not the third one past the edge); a long run name is elided, whole in its tooltip
        t.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        t.horizontalHeader().setTextElideMode(QtCore.Qt.TextElideMode.ElideMiddle)
        return t

    def _update_enabled(self):
        have = self.comparison is not None
        for b in (self.png_button, self.curves_button, self.table_button):
            b.setEnabled(have)

    # ---- listing -----------------------------------------------------------------------------
    def _browse(self):
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Folder of training runs", self.folder.text())
        if folder:
            self.folder.setText(folder)
            self.refresh()

    def refresh(self, select: list[str] | None = None):
        """List the runs under the folder (in a worker); then select ``select`` (run paths)."""
        self._wanted = [str(Path(p)) for p in (select or [])]
        folder = Path(self.folder.text().strip()).expanduser()
        try:
            found = folder.is_dir()
        except OSError as e:          # a name the file system refuses (too long, ...)
            self.message.setText(f"cannot use {str(folder)[:120]!r} as a folder: {e.strerror}")
            return
        if not found:
            self.message.setText(f"{folder}: no such folder (a training run's --out folder, or one above it)")
            return
        self.message.setText(f"Looking for runs in {folder} …")
        self.state.run_latest(LIST_JOB, list_job, folder, label="Listing training runs", show_progress=False,
                              wants_progress=False, on_result=self._on_listed, on_error=self._fail)

    def _on_listed(self, result):
        if self.state.has_waiting(LIST_JOB):
            return                              # another folder is on its way
        root, runs, problems = result
        self.runs = runs
        self.table.blockSignals(True)
        self.table.clearSelection()
        self.table.setRowCount(len(runs))
        for i, r in enumerate(runs):
            name = str(r.path.relative_to(root)) if r.path.is_relative_to(root) else str(r.path)
            cells = [name if name != "." else r.path.name, r.objective, f"{r.step:,}", _num(r.final.get("loss")),
                     _num(r.final.get("heldout_loss"))]
            for j, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                item.setToolTip(str(r.path))
                self.table.setItem(i, j, item)
        self.table.resizeColumnsToContents()
        self.table.blockSignals(False)
        self.listed_folder = root
        skipped = f" · skipped {len(problems)} unreadable: {problems[0]}" if problems else ""
        self.message.setText(f"{len(runs)} run{'s' if len(runs) != 1 else ''} in {root}{skipped}. Select two or "
                             "more to compare them (Ctrl/Shift-click)")
        if self._wanted:
            self.select_runs(self._wanted)

    def select_runs(self, paths: list[str]) -> None:
        """Select the listed runs at ``paths`` (which compares them)."""
        wanted = {str(Path(p)) for p in paths}
        flags = QtCore.QItemSelectionModel.SelectionFlag.Select | QtCore.QItemSelectionModel.SelectionFlag.Rows
        self.table.blockSignals(True)
        self.table.clearSelection()
        for i, r in enumerate(self.runs):
            if str(r.path) in wanted:
                self.table.selectionModel().select(self.table.model().index(i, 0), flags)
        self.table.blockSignals(False)
        self._on_selection()

    def selected_paths(self) -> list[str]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [str(self.runs[r].path) for r in rows if r < len(self.runs)]

    # ---- comparing -----------------------------------------------------------------------------
    def _on_selection(self):
        paths = self.selected_paths()
        if len(paths) < 2:
            self.message.setText("Select two or more runs to compare them (Ctrl/Shift-click)")
            return
        self.compare(paths)

    def show_experiment(self, folder: str, labels: dict[str, str], note: str, compare: str = "") -> None:
        """List ``folder`` and compare an experiment's runs (``labels``: run path -> its label),
        with the sentence saying what to look at and, first in the Evaluation plot, the series
        ``compare`` it names (not a loss its note says is not comparable)."""
        labels = {str(Path(p)): label for p, label in labels.items()}
        self.known_labels.update(labels)
        self._notes[frozenset(labels)] = note
        self._compare[frozenset(labels)] = compare
        self.folder.setText(str(folder))
        self.refresh(select=list(labels))

    def compare(self, paths: list[str]) -> None:
        """Read the runs at ``paths`` in a worker and show them."""
        self.message.setText(f"Reading {len(paths)} runs …")
        self.state.run_latest(COMPARE_JOB, compare_job, list(paths), label="Comparing runs", show_progress=False,
                              wants_progress=False, on_result=self._show, on_error=self._fail)

    def _show(self, result):
        if self.state.has_waiting(COMPARE_JOB):
            return                              # another selection is on its way
        comparison, events = result
        self.comparison, self.events = comparison, events
        paths = [r["path"] for r in comparison["runs"]]
        self.labels = {p: self.known_labels.get(p) or Path(p).name for p in paths}
        if len(set(self.labels.values())) < len(self.labels):     # same folder names: show the paths
            self.labels = {p: self.known_labels.get(p) or p for p in paths}
        note = self._notes.get(frozenset(paths), "")
        self.note.setText(f"What to look at: {note}" if note else "")
        self.note.setVisible(bool(note))
        self.curves.set_runs({self.labels[p]: events[p] for p in self.labels},
                             evaluation=self._compare.get(frozenset(paths)) or None)
        self._fill_tables(comparison)
        ignored = ", ".join(comparison["ignored"])
        self.message.setText(f"Comparing {len(comparison['runs'])} runs; they differ in "
                             f"{', '.join(comparison['differs']) or 'no setting'} ({ignored} are never "
                             "compared: they name where a run is, not how it learns)")
        self._update_enabled()
        self.compared.emit(comparison)

    def _fill_tables(self, comparison: dict) -> None:
        runs = comparison["runs"]
        names = [self.labels[r["path"]] for r in runs]
        differs = comparison["differs"]
        t = _reset(self.differ_table, rows=names, columns=differs)
        for i, r in enumerate(runs):
            t.verticalHeaderItem(i).setForeground(_brush(color(i)))
            for j, name in enumerate(differs):
                t.setItem(i, j, QtWidgets.QTableWidgetItem(str(r["config"].get(name, "—"))))
        metrics = sorted(set().union(*(r["final"].keys() for r in runs)))
        f = _reset(self.final_table, rows=metrics, columns=names)
        for j in range(len(runs)):
            f.horizontalHeaderItem(j).setForeground(_brush(color(j)))
            f.horizontalHeaderItem(j).setToolTip(names[j])
        for i, m in enumerate(metrics):
            for j, r in enumerate(runs):
                f.setItem(i, j, QtWidgets.QTableWidgetItem(_num(r["final"].get(m))))
        for table in (t, f):
            table.resizeColumnsToContents()

    def _fail(self, message: str):
        self.message.setText(f"error: {message}")
        self.state.status.emit(message)

    # ---- export ------------------------------------------------------------------------------
    def _save(self, suggested: str, filt: str, write) -> None:
        path = ask_save_path(self, "Save", suggested, filt)
        if path is not None:
            try:
                write(path)
            except OSError as e:
                self._fail(f"cannot write {path}: {e.strerror or e}")
                return
            self.state.status.emit(f"Saved {path}")

    def export_png(self, path) -> bool:
        if not self.curves.grab().save(str(path), "PNG"):
            raise OSError(f"the image could not be written to {path}")
        return True

    def export_curves_csv(self, path) -> int:
        from core.train.runs import write_curves_csv
        return write_curves_csv(path, {self.labels[p]: ev for p, ev in self.events.items()})

    def export_table_csv(self, path) -> None:
        from core.train.runs import write_comparison_csv
        write_comparison_csv(path, self.comparison)


def _reset(table: QtWidgets.QTableWidget, rows: list[str], columns: list[str]) -> QtWidgets.QTableWidget:
    """`table` emptied and sized for these row and column headers."""
    table.clear()
    table.setRowCount(len(rows))
    table.setColumnCount(len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setVerticalHeaderLabels(rows)
    return table


def _brush(hex_color: str):
    from PySide6.QtGui import QBrush, QColor
    return QBrush(QColor(hex_color))
