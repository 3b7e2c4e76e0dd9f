"""The lab's Experiments page: the teaching notebook's exercises as one-click experiments.

Pick one (pre- vs post-norm, positions, objective, pooling, width, heads, layers); its runs — the
same data, seed and steps, differing only in the experiment's setting — train one after another in
a worker with progress and Cancel; when they are done, the Runs page compares them, with one
sentence saying what to look at. Whitening is not a training queue: it links to the Evaluate page.
"""
from __future__ import annotations

import time
from pathlib import Path

from PySide6 import QtWidgets
from PySide6.QtCore import Signal

from app.gui.panels.train.loss_page import add_progress
from app.gui.panels.train.panel import (  # one training job at a time: a run or an experiment
    JOB_KEY,
    EventBridge,
    cancel_job,
    finish_job,
    show_failure,
)
from app.gui.widgets.browse_row import browse_row

DEFAULT_STEPS = 300


def experiment_job(exp, base, pairs, sink, progress=None, cancel=None):
    """Worker side: run the experiment's queue; every event goes to ``sink`` (a queued signal)."""
    from core.train.experiments import run_experiment
    from index.corpus.door import read_training_corpus

    count = len(exp.variants)

    def on_event(ev):
        sink(ev)
        if progress is not None and ev["kind"] == "step":
            done = ev["run"] * ev["total"] + ev["step"]
            progress(done, count * ev["total"], f"Experiment {exp.name}: run {ev['run'] + 1}/{count}, "
                                                f"step {ev['step']:,}, loss {ev['loss']:.3f}")
    return run_experiment(exp, base, pairs=pairs, progress=on_event, cancel=cancel,
                          read_corpus=read_training_corpus)


def default_experiment_folder(name: str) -> Path:
    from core.paths import models_dir
    return models_dir() / "experiments" / time.strftime(f"{name}-%Y%m%d-%H%M%S")


class ExperimentsView(QtWidgets.QWidget):
    finished = Signal(object)          # run_experiment's result (also after a cancel)
    page_requested = Signal(str)       # the lab page an entry links to (whitening: "Evaluate")

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.job = None
        self.result: dict | None = None
        self.overrides: dict = {}      # extra TrainConfig fields (tests, power users)
        self.bridge = EventBridge(self)
        self.bridge.event.connect(self._on_event)
        self._build()
        self._update_enabled()

    # ---- layout ----------------------------------------------------------------------------
    def _build(self):
        from core.train.experiments import EXPERIMENTS

        outer = QtWidgets.QHBoxLayout(self)
        self.list = QtWidgets.QListWidget()
        self.list.setObjectName("experiments_list")
        for exp in EXPERIMENTS.values():
            item = QtWidgets.QListWidgetItem(exp.title + (f"  → {exp.page} page" if exp.page else ""))
            item.setData(256, exp.name)
            self.list.addItem(item)
        self.list.currentRowChanged.connect(self._on_pick)
        outer.addWidget(self.list, 1)

        right = QtWidgets.QVBoxLayout()
        outer.addLayout(right, 2)
        self.about = QtWidgets.QLabel("")
        self.about.setWordWrap(True)
        self.about.setObjectName("experiment_about")
        right.addWidget(self.about)
        self.page_button = QtWidgets.QPushButton("")
        self.page_button.clicked.connect(lambda: self.page_requested.emit(self.experiment.page))
        right.addWidget(self.page_button)

        box = QtWidgets.QGroupBox("Shared by every run")
        form = QtWidgets.QFormLayout(box)
        self.corpus = QtWidgets.QLineEdit(self._sample())
        self.corpus.setToolTip("The sentences every run trains on: a .txt/.csv/.jsonl file or a store folder")
        form.addRow("Corpus", browse_row(self.corpus, "File…", self._browse_corpus))
        self.steps = QtWidgets.QSpinBox(minimum=1, maximum=1_000_000, value=DEFAULT_STEPS, singleStep=100)
        self.seed = QtWidgets.QSpinBox(minimum=0, maximum=2**31 - 1, value=0)
        self.device = QtWidgets.QComboBox()
        from app.gui.widgets.model_choice import offered_devices
        for d in offered_devices():
            self.device.addItem({"auto": "Auto (GPU when present)", "cpu": "CPU"}.get(d, d.upper()), d)
        form.addRow("Steps per run", self.steps)
        form.addRow(self._model_fields())
        form.addRow("Seed", self.seed)
        form.addRow("Device", self.device)
        self.out = QtWidgets.QLineEdit("")
        self.out.setPlaceholderText("a new folder under the models folder")
        self.out.setToolTip("Each run is saved to a subfolder named after it")
        form.addRow("Output", self.out)
        right.addWidget(box)
        self.shared_box = box

        buttons = QtWidgets.QHBoxLayout()
        self.start_button = QtWidgets.QPushButton("Run the experiment")
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        buttons.addWidget(self.start_button)
        buttons.addWidget(self.cancel_button)
        buttons.addStretch(1)
        right.addLayout(buttons)
        add_progress(self, right, "Pick an experiment")
        right.addStretch(1)
        self.list.setCurrentRow(0)

    def _model_fields(self) -> QtWidgets.QWidget:
        """The model and optimisation settings every run shares (TrainConfig's defaults); the
        one an experiment varies is disabled, its values coming from the experiment."""
        from core.train.config import TrainConfig

        d = TrainConfig()
        self.model_fields = {
            "layers": QtWidgets.QSpinBox(minimum=1, maximum=24, value=d.layers),
            "dim": QtWidgets.QSpinBox(minimum=8, maximum=2048, value=d.dim, singleStep=32),
            "heads": QtWidgets.QSpinBox(minimum=1, maximum=32, value=d.heads),
            "ffn": QtWidgets.QSpinBox(minimum=8, maximum=8192, value=d.ffn, singleStep=128),
            "batch_size": QtWidgets.QSpinBox(minimum=2, maximum=4096, value=d.batch_size),
            "max_length": QtWidgets.QSpinBox(minimum=3, maximum=512, value=d.max_length),
        }
        self.lr = QtWidgets.QLineEdit()
        self.lr.setPlaceholderText("auto")
        self.lr.setToolTip("Peak learning rate, e.g. 3e-3; empty: auto (5e-4 for a fresh model)")
        grid = QtWidgets.QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        names = {"layers": "Layers", "dim": "Dim", "heads": "Heads", "ffn": "FFN", "batch_size": "Batch",
                 "max_length": "Max length"}
        for i, (key, w) in enumerate(self.model_fields.items()):
            grid.addWidget(QtWidgets.QLabel(names[key]), i // 3, 2 * (i % 3))
            grid.addWidget(w, i // 3, 2 * (i % 3) + 1)
        grid.addWidget(QtWidgets.QLabel("Learning rate"), 2, 0)
        grid.addWidget(self.lr, 2, 1, 1, 5)
        box = QtWidgets.QWidget()
        box.setLayout(grid)
        return box

    @staticmethod
    def _sample() -> str:
        from core.assets import sample_corpus
        return str(sample_corpus())

    def _browse_corpus(self):
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self, "Training text", "",
                                                        "Text (*.txt *.csv *.tsv *.jsonl);;All files (*)")
        if path:
            self.corpus.setText(path)

    @property
    def experiment(self):
        from core.train.experiments import EXPERIMENTS
        item = self.list.currentItem()
        return EXPERIMENTS[item.data(256)] if item is not None else None

    def select(self, name: str) -> None:
        for i in range(self.list.count()):
            if self.list.item(i).data(256) == name:
                self.list.setCurrentRow(i)
                return
        raise KeyError(name)

    def _on_pick(self, *_):
        exp = self.experiment
        if exp is None:
            return
        if exp.page:
            self.about.setText(f"<b>{exp.title}</b><br>{exp.look_at}<br>This is measured on any model, not "
                               f"trained: it lives on the {exp.page} page.")
            self.page_button.setText(f"Open the {exp.page} page")
        else:
            grid = (" The runs form a grid: neighbours differ in one setting, the diagonal in both."
                    if exp.grid else "")
            runs = "".join(f"<li>{v.label}</li>" for v in exp.variants)
            self.about.setText(f"<b>{exp.title}</b><br>{len(exp.variants)} runs that differ only in "
                               f"<i>{', '.join(exp.varies)}</i>.{grid}<ul>{runs}</ul>"
                               f"<b>Look at:</b> {exp.look_at}")
        self._update_enabled()

    def set_pages(self, pages: list[str]) -> None:
        """The lab's pages, so a link to a page not in this build is shown disabled."""
        self._pages = set(pages)
        self._update_enabled()

    def _update_enabled(self, *_):
        exp = self.experiment
        busy = self.job is not None
        link = exp is not None and bool(exp.page)
        self.page_button.setVisible(link)
        pages = getattr(self, "_pages", set())
        self.page_button.setEnabled(link and exp.page in pages)
        self.page_button.setToolTip("" if not link or exp.page in pages else
                                    f"The {exp.page} page is not part of this build")
        self.shared_box.setEnabled(not busy and not link)
        varied = set(exp.varies) if exp is not None else set()
        for key, w in getattr(self, "model_fields", {}).items():
            w.setEnabled(key not in varied)
            w.setToolTip("Set by the experiment: it is what its runs differ in" if key in varied else "")
        self.start_button.setEnabled(not busy and exp is not None and not link)
        self.cancel_button.setEnabled(busy)
        self.list.setEnabled(not busy)

    # ---- running -----------------------------------------------------------------------------
    def base_config(self):
        from core.train.config import TrainConfig

        exp = self.experiment
        out = self.out.text().strip()
        out = str(Path(out).expanduser()) if out else str(default_experiment_folder(exp.name))
        steps = self.steps.value()
        text = self.lr.text().strip()
        try:
            lr = float(text) if text else 0.0
        except ValueError:
            raise ValueError(f"learning rate {text!r} is not a number (e.g. 3e-3), or leave it empty") from None
        model = {k: w.value() for k, w in self.model_fields.items() if k not in exp.varies}
        cfg = dict(corpus=self.corpus.text().strip(), out=out, steps=steps, seed=self.seed.value(), lr=lr, **model,
                   device=self.device.currentData(), log_every=max(1, min(10, steps // 100)))
        cfg.update(self.overrides)
        return TrainConfig(**cfg)

    def start(self) -> bool:
        from core.assets import paraphrase_pairs
        from core.train.experiments import experiment_configs

        exp = self.experiment
        try:
            base = self.base_config()
            for _, cfg in experiment_configs(exp, base, str(paraphrase_pairs())):
                cfg.validate()
            if Path(base.out).exists() and any(Path(base.out).iterdir()) and not base.overwrite:
                raise ValueError(f"{base.out} is not empty: choose a new output folder (or leave it empty)")
        except Exception as e:  # noqa: BLE001 - shown to the user
            self._fail(str(e))
            return False
        self.out.setText(base.out)
        self.result = None
        self.progress.setRange(0, len(exp.variants) * base.steps)
        self.progress.setValue(0)
        self.stats.setText(f"Starting {exp.title} …")
        job = self.state.run(JOB_KEY, experiment_job, exp, base, str(paraphrase_pairs()), self.bridge.event.emit,
                             label=f"Experiment: {exp.title}", on_result=self._on_result, on_error=self._fail,
                             on_cancelled=lambda: None, on_finished=self._on_finished)
        if job is None:
            self._fail("a training run or another experiment is running: wait for it or cancel it")
            return False
        self.job = job
        self._update_enabled()
        return True

    def cancel(self):
        cancel_job(self, " — stopping after this step (the run is saved) …")

    @property
    def running(self) -> bool:
        return self.job is not None

    def _on_event(self, ev: dict):
        kind = ev["kind"]
        if kind == "experiment":
            self._run_label = f"run {ev['index'] + 1}/{ev['count']}: {ev['label']}"
            self.stats.setText(self._run_label)
        elif kind == "step":
            self.progress.setValue(ev["run"] * ev["total"] + ev["step"])
            self.stats.setText(f"{getattr(self, '_run_label', '')} · step {ev['step']:,}/{ev['total']:,} · "
                               f"loss {ev['loss']:.3f}")
        elif kind == "status":
            self.stats.setText(f"{getattr(self, '_run_label', '')} · {ev['message']}")

    def _on_result(self, result: dict):
        self.result = result
        what = "Cancelled" if result["cancelled"] else "Done"
        self.stats.setText(f"{what}: {len(result['completed'])} of {len(result['planned'])} runs finished"
                           + (" — compared on the Runs page" if result["comparison"] else ""))
        self.state.status.emit(f"Experiment {result['experiment']}: {what.lower()}")

    _fail = show_failure

    def _on_finished(self):
        finish_job(self, self.result, self.finished)
