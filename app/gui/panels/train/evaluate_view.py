"""The Evaluate page: how well a model's sentence vectors order graded sentence pairs (Spearman,
Pearson) and how anisotropic they are, before and after BERT-whitening, side by side.

The model is the corpus model or a model / run folder; the pairs file defaults to the shipped
evaluation set; the whitening is fitted on a corpus (default: the sample corpus). The work
(loading, embedding, fitting) runs in a worker with progress and Cancel; a failed or cancelled
evaluation keeps the last results on screen. The maths is core/evaluate/pairs.py, as for
`encoderscope eval --pairs`.
"""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.gui.widgets.model_choice import WeightsCombo, add_trained_checkpoints
from app.gui.widgets.run_bar import RunBar
from app.gui.wording import BACKEND_LABELS
from core.names import BACKENDS, POOLINGS

JOB_KEY = "evaluate"
CORPUS_MODEL, FOLDER_MODEL = "corpus", "folder"
ROWS = (("Spearman", "spearman"), ("Pearson", "pearson"), ("Anisotropy", "anisotropy"))
TABLE_FILES = "Tables (*.tsv *.csv);;All files (*)"
CORPUS_FILES = "Text, CSV or JSONL (*.txt *.csv *.tsv *.jsonl);;All files (*)"


def evaluate_job(model: str, backend: str, device: str | None, pooling: str, pairs_file: str,
                 whiten: bool, dims: int | None, corpus_file: str, progress=None, cancel=None):
    """Worker-side: load the model, read the files, score the pairs (and their whitened vectors)."""
    from core import assets
    from core.encoder.backends import get_backend
    from core.evaluate.pairs import evaluate_pairs, read_scored_pairs
    from core.train.data import read_corpus

    def step(done, total):
        progress(done, total, f"Embedding {done}/{total} sentences")
    progress(0, 0, f"Loading {model} …")
    pairs = read_scored_pairs(pairs_file or assets.eval_pairs())
    corpus = read_corpus(corpus_file or assets.sample_corpus()) if whiten else None
    model_backend = get_backend(model, backend, device=device)
    return evaluate_pairs(model_backend, pairs, pooling, whiten_corpus=corpus, whiten_dims=dims,
                          progress=step, cancel=cancel)


class EvaluateView(QWidget):
    """Pick a model, a pairs file, pooling and whitening; see the scores before and after."""

    evaluated = Signal(object)     # core.evaluate.pairs.PairsReport: new results are on screen
    failed = Signal(str)           # the evaluation stopped (error or cancel); old results kept

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.job = None
        self.report = None          # the results on screen

        self.model_source = QComboBox()
        self.model_source.addItem("The corpus model", CORPUS_MODEL)
        self.model_source.addItem("A model or run folder", FOLDER_MODEL)
        # the runs trained in the app are offered; any folder or model name can be typed
        self.folder = WeightsCombo(lambda: add_trained_checkpoints(self.folder), width=28)
        self.folder.lineEdit().setPlaceholderText("a trained run folder, a model folder or a hub id")
        add_trained_checkpoints(self.folder)
        self.folder.setCurrentText("")
        self.browse_folder = QToolButton()
        self.browse_folder.setText("Folder…")
        self.backend = QComboBox()
        for key in BACKENDS:
            self.backend.addItem(BACKEND_LABELS[key], key)
        self.pairs = QLineEdit()
        self.pairs.setPlaceholderText("the shipped evaluation set (94 pairs scored 0-5)")
        self.browse_pairs = QToolButton()
        self.browse_pairs.setText("File…")
        self.pooling = QComboBox()
        for p in POOLINGS:
            self.pooling.addItem(p, p)
        self.whiten = QCheckBox("BERT-whitening, fitted on")
        self.corpus = QLineEdit()
        self.corpus.setPlaceholderText("the sample corpus (576 sentences)")
        self.browse_corpus = QToolButton()
        self.browse_corpus.setText("File…")
        self.dims = QSpinBox()
        self.dims.setRange(0, 4096)
        self.dims.setSpecialValueText("all")
        self.dims.setToolTip("Keep the first k whitened dimensions (all: every direction the corpus spans)")
        self.run_bar = RunBar("Evaluate", "evaluate")
        self.run_button, self.progress, self.cancel_button = (self.run_bar.run_button, self.run_bar.progress,
                                                              self.run_bar.cancel_button)
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.table = QTableWidget(len(ROWS), 2)
        self.table.setHorizontalHeaderLabels(["plain", "whitened"])
        self.table.setVerticalHeaderLabels([label for label, _ in ROWS])
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self._layout()
        self._connect()
        self._sync_model_source()
        self._sync_pooling()

    # ---- layout ---------------------------------------------------------------------------------
    def _layout(self):
        form = QFormLayout()
        model_row = QHBoxLayout()
        for w in (self.model_source, self.folder, self.browse_folder, self.backend):
            model_row.addWidget(w, 1 if w is self.folder else 0)
        form.addRow("Model", model_row)
        pairs_row = QHBoxLayout()
        pairs_row.addWidget(self.pairs)
        pairs_row.addWidget(self.browse_pairs)
        form.addRow("Pairs file", pairs_row)
        form.addRow("Pooling", self.pooling)
        white_row = QHBoxLayout()
        for w in (self.whiten, self.corpus, self.browse_corpus, QLabel("keep"), self.dims, QLabel("dims")):
            white_row.addWidget(w)
        form.addRow("Whitening", white_row)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_bar, 1)
        box = QVBoxLayout(self)
        intro = QLabel("How well the model's cosines order sentence pairs scored by people (Spearman: "
                       "ranks, Pearson: values), and its anisotropy (the mean cosine of random pairs "
                       "of the file's sentences: near 1, every vector points the same way). "
                       "Whitening re-centres the vectors and makes their covariance the identity.")
        intro.setWordWrap(True)
        box.addWidget(intro)
        box.addLayout(form)
        box.addLayout(buttons)
        self.table.horizontalHeader().setStretchLastSection(False)
        self.table.setFixedHeight(self.table.verticalHeader().defaultSectionSize() * len(ROWS)
                                  + self.table.horizontalHeader().sizeHint().height()
                                  + 2 * self.table.frameWidth() + 2)
        box.addWidget(self.table)
        box.addWidget(self.message)
        box.addStretch(1)

    def _connect(self):
        self.model_source.currentIndexChanged.connect(self._sync_model_source)
        self.browse_folder.clicked.connect(lambda: self._pick_folder())
        self.browse_pairs.clicked.connect(lambda: self._pick_file(self.pairs, "Choose a pairs file", TABLE_FILES))
        self.browse_corpus.clicked.connect(
            lambda: self._pick_file(self.corpus, "Choose the sentences to fit the whitening on", CORPUS_FILES))
        self.whiten.toggled.connect(self._sync_whiten)
        self.run_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.state.choice_changed.connect(lambda *_: self._sync_pooling())
        self._sync_whiten(False)

    def _sync_model_source(self, *_):
        own = self.model_source.currentData() == FOLDER_MODEL
        for w in (self.folder, self.browse_folder, self.backend):
            w.setEnabled(own)

    def _sync_pooling(self):
        self.model_source.setItemText(0, f"The corpus model ({self.state.choice.model})")
        if self.model_source.currentData() == CORPUS_MODEL:
            i = self.pooling.findData(self.state.pooling)
            if i >= 0:
                self.pooling.setCurrentIndex(i)

    def _sync_whiten(self, on):
        for w in (self.corpus, self.browse_corpus, self.dims):
            w.setEnabled(bool(on))

    def _pick_folder(self):
        folder = QFileDialog.getExistingDirectory(self, "Choose a run folder or model folder")
        if folder:
            self.folder.setCurrentText(folder)

    def _pick_file(self, edit: QLineEdit, title: str, filters: str):
        path, _ = QFileDialog.getOpenFileName(self, title, "", filters)
        if path:
            edit.setText(path)

    # ---- running --------------------------------------------------------------------------------
    def use_corpus_model(self, pairs_file: str = "") -> None:
        """Evaluate the corpus model (the model bar's action), on ``pairs_file`` when given."""
        self.model_source.setCurrentIndex(self.model_source.findData(CORPUS_MODEL))
        if pairs_file:
            self.pairs.setText(pairs_file)

    def model_arguments(self) -> tuple[str, str, str | None]:
        """(model, backend, device) to evaluate."""
        if self.model_source.currentData() == CORPUS_MODEL:
            c = self.state.choice
            return c.model, c.backend, None if c.device in ("", "auto") else c.device
        return self.folder.currentText().strip(), self.backend.currentData(), None

    def start(self) -> bool:
        """Start an evaluation; False (with the reason shown) when it cannot start."""
        model, backend, device = self.model_arguments()
        if not model:
            self._show_problem("choose a run folder or model folder to evaluate")
            return False
        dims = self.dims.value() or None
        job = self.state.run(JOB_KEY, evaluate_job, model, backend, device, self.pooling.currentData(),
                             self.pairs.text().strip(), self.whiten.isChecked(), dims,
                             self.corpus.text().strip(), label=f"Evaluating {model}",
                             on_result=self._done, on_error=self._error, on_progress=self._progress,
                             on_cancelled=self._cancelled, on_finished=self._finished)
        if job is None:     # the other Evaluate page (lab or model bar) is running one
            self.message.setText("An evaluation is already running; wait for it or cancel it first")
            return False
        self.job = job
        self.run_bar.set_running(True)
        self.message.setText(f"Evaluating {model} …")
        return True

    def cancel(self):
        if self.job is not None:
            self.job.cancel()

    def _progress(self, done: int, total: int, text: str):
        if total > 0:
            self.run_bar.on_progress(done, total, "sentences embedded")
        else:
            self.run_bar.set_running(True, text)     # a step without a count (loading): busy
        if text:
            self.message.setText(text)

    def _done(self, report):
        self.report = report
        self._fill(report)
        plain = report.plain
        white = f"; whitened: {report.whitening['dims']} of {report.whitening['input_dim']} dimensions, " \
                f"fitted on {report.whitening['fitted_on']} sentences" if report.whitened else ""
        self.message.setText(f"{plain.n} pairs; anisotropy from {plain.anisotropy.pairs} random pairs of "
                             f"{plain.anisotropy.vectors} sentences (seed {plain.anisotropy.seed}){white}")
        self.evaluated.emit(report)

    def _fill(self, report):
        self.table.clearContents()
        for col, scores in enumerate((report.plain, report.whitened)):
            if scores is None:
                continue
            values = {"spearman": scores.spearman, "pearson": scores.pearson,
                      "anisotropy": scores.anisotropy.value}
            for row, (_, key) in enumerate(ROWS):
                self.table.setItem(row, col, QTableWidgetItem(f"{values[key]:.4f}"))

    def _show_problem(self, text: str):
        kept = " (the results shown are the previous ones)" if self.report is not None else ""
        self.message.setText(f"{text}{kept}")
        self.failed.emit(text)

    def _error(self, message: str):
        self._show_problem(f"Evaluation failed: {message}")

    def _cancelled(self):
        self._show_problem("Evaluation cancelled")

    def _finished(self):
        self.job = None
        self.run_bar.set_running(False)

    def value(self, metric: str, whitened: bool = False) -> float | None:
        """The number shown for ``metric`` ("spearman", "pearson", "anisotropy"), or None."""
        row = [key for _, key in ROWS].index(metric)
        item = self.table.item(row, int(whitened))
        return None if item is None else float(item.text())


class EvaluateDialog(QDialog):
    """The Evaluate page on its own (the Corpus model bar's "Evaluate…")."""

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Evaluate the corpus model")
        self.view = EvaluateView(state, self)
        box = QVBoxLayout(self)
        box.addWidget(self.view)
        self.resize(760, 420)
