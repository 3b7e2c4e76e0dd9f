"""The Train panel: train the from-scratch encoder on a corpus, watch the loss fall, use the result.

Left: the corpus (the current store, the bundled sample corpus, or a .txt/.csv/.jsonl file), the
starting point (fresh with a word-level or minilm's WordPiece vocabulary, minilm with a fresh
MLM head, or any model folder), the objective, the architecture (fresh runs) and the main
hyper-parameters, each with a default that trains something useful in minutes on a CPU.
Right: a live pyqtgraph curve of the training loss and the held-out loss, with the learning
rate, tokens/s, ETA, the device and precision, and the latest evaluation in words; beside it the
watch views (watch_views.py): gradient flow, heads forming, embeddings taking shape. "Open run…"
shows a finished or past run folder the same way (its metrics.jsonl and snapshots).

Start / Cancel / Resume run ``core.train.trainer.Trainer`` through ``state.run`` (the worker pool); the
trainer's events reach this panel through a queued Qt signal, so the UI stays responsive. Cancel
stops at the next step and saves a checkpoint; Resume continues a checkpoint's run; "Use this
model" makes the trained folder the inspected model (attention, fill-mask; the corpus keeps its own).
The settings' widgets: settings_form.py; the Loss page: loss_page.py.
"""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import QObject, Signal

from app.gui.panels.train.loss_page import build_loss_page
from app.gui.panels.train.settings_form import build_settings, default_output_folder, output_folder
from app.gui.panels.train.watch_settings import read_run_job
from app.gui.panels.train.watch_views import WatchViews
from core.assets import eval_pairs, paraphrase_pairs, sample_corpus

JOB_KEY = "train"

def train_job(config, sink, progress=None, cancel=None):
    """Worker side: run the trainer; every event goes to ``sink`` (a queued signal's emit)."""
    from core.train.trainer import Trainer
    from index.corpus.door import read_training_corpus

    def on_event(ev):
        sink(ev)
        if progress is not None:
            if ev["kind"] == "step":
                progress(ev["step"], ev["total"], f"Training: step {ev['step']:,}, loss {ev['loss']:.3f}")
            elif ev["kind"] == "status":
                progress(0, 0, ev["message"])
    return Trainer(config, read_corpus=read_training_corpus).run(progress=on_event, cancel=cancel)


class EventBridge(QObject):
    """Lives on the UI thread; emitting from the worker thread queues the event to it."""
    event = Signal(object)


def show_failure(view, message: str) -> None:
    """A training job's error: in the view's status line, and said by the app (its dialog)."""
    view.stats.setText(f"error: {message}")
    view.state.error.emit(message)


def cancel_job(view, what_happens: str) -> None:
    """Cancel the view's running training job, its status line saying `what_happens` meanwhile."""
    if view.job is not None:
        view.stats.setText(view.stats.text() + what_happens)
        view.job.cancel()


def finish_job(view, result, finished) -> None:
    """A training job is over (done, cancelled or failed): the view's buttons again, and its
    result, if there is one, sent on through the signal `finished`."""
    view.job = None
    view._update_enabled()
    if result is not None:
        finished.emit(result)


def _fmt_time(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class TrainPanel(QtWidgets.QWidget):
    run_finished = Signal(object)     # the summary dict (also after a cancel)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.job = None
        self.summary: dict | None = None
        self.trained_folder: Path | None = None
        self.overrides: dict = {}          # extra TrainConfig fields (tests, power users)
        self.train_points: list[tuple[int, float]] = []
        self.eval_points: list[tuple[int, float]] = []
        self._resumed_into_existing = False
        self.bridge = EventBridge(self)
        self.bridge.event.connect(self._on_event)
        self._build()
        state.store_changed.connect(lambda *_: self._refresh_corpora())
        self._refresh_corpora()
        self._update_enabled()

    # ---- layout ----------------------------------------------------------------------------
    def _build(self):
        outer = QtWidgets.QHBoxLayout(self)
        column = QtWidgets.QVBoxLayout()
        outer.addLayout(column, 0)
        # The settings scroll on their own, the buttons stay under them, and the plots on the
        # right get the window's height: the page itself never scrolls (a plot taller than the
        # window would hide the newest part of the curve, and Start would sit below the fold).
        self.form_scroll = QtWidgets.QScrollArea()
        self.form_scroll.setObjectName("train_form_scroll")
        self.form_scroll.setWidgetResizable(True)
        self.form_scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.form_scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        form_page = QtWidgets.QWidget()
        left = QtWidgets.QVBoxLayout(form_page)
        left.setContentsMargins(0, 0, 0, 0)
        self.form_scroll.setWidget(form_page)
        column.addWidget(self.form_scroll, 1)

        build_settings(self, left)

        buttons = QtWidgets.QHBoxLayout()
        self.start_button = QtWidgets.QPushButton("Start")
        self.cancel_button = QtWidgets.QPushButton("Cancel")
        self.resume_button = QtWidgets.QPushButton("Resume…")
        self.use_button = QtWidgets.QPushButton("Use this model")
        self.start_button.clicked.connect(self.start)
        self.cancel_button.clicked.connect(self.cancel)
        self.resume_button.clicked.connect(self.resume)
        self.use_button.clicked.connect(self.use_model)
        self.resume_button.setToolTip("Continue a saved run (the output folder, or one you choose) to the step "
                                      "count above")
        self.use_button.setToolTip("Inspect with the trained model (Attention, Fill-mask); the corpus and "
                                   "search keep their model")
        self.open_button = QtWidgets.QPushButton("Open run…")
        self.open_button.setToolTip("Show a finished or past run folder: its curves, gradients and snapshots")
        self.open_button.clicked.connect(lambda: self.open_run())
        for b in (self.start_button, self.cancel_button, self.resume_button, self.use_button, self.open_button):
            buttons.addWidget(b)
        left.addStretch(1)
        column.addLayout(buttons)
        # as wide as the settings, with room for the scroll bar they may need
        self.form_scroll.setMinimumWidth(form_page.sizeHint().width()
                                         + self.form_scroll.verticalScrollBar().sizeHint().width())

        self.views = WatchViews()
        outer.addWidget(self.views, 1)
        self.views.insertTab(0, build_loss_page(self), "Loss")
        self.views.setCurrentIndex(0)

    # ---- choices -----------------------------------------------------------------------------
    def _refresh_corpora(self):
        current = self.corpus.currentData()
        self.corpus.blockSignals(True)
        self.corpus.clear()
        store = getattr(self.state, "store", None)
        folder = getattr(store, "folder", None) or getattr(store, "path", None)
        # A Milvus store (Lite or server) is read through its location; a server has no folder.
        location = getattr(store, "location", None) or folder
        if location is not None:
            name = Path(folder).name if folder is not None else str(location)
            self.corpus.addItem(f"Current store ({name})", str(location))
        self.corpus.addItem("Sample corpus (576 sentences)", str(sample_corpus()))
        if current and self.corpus.findData(current) < 0:
            self.corpus.addItem(Path(current).name, current)
        i = self.corpus.findData(current) if current else 0
        self.corpus.setCurrentIndex(max(i, 0))
        self.corpus.blockSignals(False)

    def set_corpus(self, path) -> None:
        path = str(path)
        if self.corpus.findData(path) < 0:
            self.corpus.addItem(Path(path).name, path)
        self.corpus.setCurrentIndex(self.corpus.findData(path))

    def set_init_folder(self, folder) -> None:
        folder = str(folder)
        # findData cannot match a tuple (Qt compares a converted copy), so look item by item.
        wanted = (folder, "word")
        i = next((k for k in range(self.start_from.count())
                  if tuple(self.start_from.itemData(k) or ()) == wanted), -1)
        if i < 0:
            self.start_from.addItem(f"Folder: {Path(folder).name}", (folder, "word"))
            i = self.start_from.count() - 1
        self.start_from.setCurrentIndex(i)

    def _browse_corpus(self):
        path, _ = QtWidgets.QFileDialog.getOpenFileName(
            self, "Choose a corpus", "", "Text (*.txt *.csv *.tsv *.jsonl);;All files (*)")
        if path:
            self.set_corpus(path)

    def _browse_init(self):
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Continue training this model folder")
        if folder:
            self.set_init_folder(folder)

    def _browse_out(self):
        folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Output folder")
        if folder:
            self.out.setText(folder)

    @property
    def running(self) -> bool:
        return self.job is not None

    def _objective_changed(self, *_):
        if self.objective.currentData() == "clm":     # next-token prediction is only honest under it
            self.attention.setCurrentIndex(self.attention.findData("causal"))

    def _update_enabled(self, *_):
        init, _tok = self.start_from.currentData() or ("fresh", "word")
        busy = self.running
        self.arch_box.setEnabled(init == "fresh" and not busy)
        for w in (self.corpus, self.corpus_browse, self.heldout, self.start_from, self.init_browse,
                  self.objective, self.attention, self.pooling, self.steps, self.batch, self.lr, self.seed,
                  self.device, self.out, self.watch_box, self.open_button):
            w.setEnabled(not busy)
        self.start_button.setEnabled(not busy)
        self.resume_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.use_button.setEnabled(not busy and self.trained_folder is not None)

    def config(self):
        """The TrainConfig the form describes."""
        from core.train.config import TrainConfig

        init, tok = self.start_from.currentData()
        text = self.lr.text().strip()
        try:
            lr = float(text) if text else 0.0
        except ValueError:
            raise ValueError(f"learning rate {text!r} is not a number (e.g. 5e-4), or leave it empty") from None
        steps = self.steps.value()
        cfg = dict(
            corpus=self.corpus.currentData() or "",
            out=str(output_folder(self.out.text())) if self.out.text().strip() else "",
            objective=self.objective.currentData(), init=init, tokenizer=tok,
            layers=self.layers.value(), dim=self.dim.value(), heads=self.heads.value(), ffn=self.ffn.value(),
            positions=self.positions.currentText(), norm=self.norm.currentData(),
            steps=steps, batch_size=self.batch.value(), lr=lr, seed=self.seed.value(),
            device=self.device.currentData(), heldout=self.heldout.value() / 100.0,
            log_every=max(1, min(10, steps // 200)),
            pairs=str(paraphrase_pairs()) if "simcse" in self.objective.currentData() else "",
            eval_pairs=str(eval_pairs()),       # the shipped scored pairs: Spearman at each evaluation
            attention=self.attention.currentData(), pooling=self.pooling.currentData(),
            **self.watch_box.settings())
        cfg.update(self.overrides)
        return TrainConfig(**cfg)

    # ---- actions -----------------------------------------------------------------------------
    def start(self) -> bool:
        try:
            cfg = self.config()
            cfg.validate()
        except Exception as e:  # noqa: BLE001 - shown to the user
            self._fail(str(e))
            return False
        out = Path(cfg.out)
        if cfg.out != self.out.text().strip():
            self.out.setText(cfg.out)                  # where it goes, spelled out
        try:
            used = out.exists() and any(out.iterdir())
        except OSError as e:       # a name the file system refuses (too long, ...)
            self._fail(f"cannot use the output folder {str(out)[:120]!r}: {e.strerror}")
            return False
        if used:
            # A used folder: give this run a fresh one next to it rather than overwrite.
            out = out.parent / default_output_folder().name
            self.out.setText(str(out))
            from dataclasses import replace
            cfg = replace(cfg, out=str(out))
        self._resumed_into_existing = False
        return self._launch(cfg, f"Training on {Path(cfg.corpus).name}")

    def resume(self, folder=None) -> bool:
        from core.train.checkpoint import STATE_JSON
        from core.train.config import TrainConfig

        if not folder:
            here = output_folder(self.out.text())
            try:
                folder = here if (here / STATE_JSON).is_file() else None
            except OSError:        # not a usable path: ask for the folder instead
                folder = None
        if not folder:
            folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Resume the run saved in this folder")
        if not folder:
            return False
        try:
            cfg = TrainConfig.from_checkpoint(folder, steps=self.steps.value(), device=self.device.currentData(),
                                              **{k: v for k, v in self.overrides.items() if k != "out"})
        except Exception as e:  # noqa: BLE001
            self._fail(str(e))
            return False
        self.out.setText(cfg.out)
        self._resumed_into_existing = True
        return self._launch(cfg, f"Resuming {Path(folder).name}")

    def fit_plot(self) -> None:
        """Undo the user's zoom/pan: the axes fit the whole curve and follow it again."""
        self.plot.getPlotItem().enableAutoRange()

    def open_run(self, folder=None) -> bool:
        """Show a finished or past run folder (read in a worker)."""
        if not folder:
            from core.paths import models_dir
            folder = QtWidgets.QFileDialog.getExistingDirectory(self, "Open a training run folder",
                                                                str(models_dir()))    # where runs are saved
        if not folder:
            return False
        return self.state.run("train-open", read_run_job, Path(folder), label=f"Opening {Path(folder).name}",
                              on_result=lambda r: self.show_run(*r), on_error=self._fail) is not None

    def show_run(self, folder, events: list[dict]) -> None:
        """A run's loss curves and watch views, from its events."""
        self.train_points = [(e["step"], e["loss"]) for e in events if e["kind"] == "step"]
        self.eval_points = [(e["step"], e["heldout_loss"]) for e in events
                            if e["kind"] == "eval" and e.get("heldout_loss") is not None]
        self._redraw()
        self.fit_plot()
        self.views.show_run(folder, events)
        self.trained_folder = Path(folder)
        last = self.train_points[-1] if self.train_points else None
        self.stats.setText(f"Run {folder}" + (f": step {last[0]:,}, loss {last[1]:.3f}" if last else ""))
        self._update_enabled()

    def _launch(self, cfg, label) -> bool:
        self.train_points, self.eval_points = [], []
        self.views.clear()
        self._redraw()
        self.fit_plot()            # a zoom kept from the last run would hide the new curve
        self.summary = None
        self.eval_label.setText("")
        self.stats.setText("Starting …")
        self.progress.setRange(0, cfg.steps)
        self.progress.setValue(0)
        job = self.state.run(JOB_KEY, train_job, cfg, self.bridge.event.emit, label=label,
                             on_result=self._on_result, on_error=self._fail,
                             on_cancelled=lambda: None, on_finished=self._on_finished)
        if job is None:
            return False
        self.job = job
        self.trained_folder = None
        self._update_enabled()
        return True

    def cancel(self):
        cancel_job(self, " — stopping after this step, saving a checkpoint …")

    def use_model(self) -> bool:
        if self.trained_folder is None:
            return False
        if self._resumed_into_existing:
            # The folder's weights changed under a possibly cached backend: load it afresh.
            from core.encoder.backends import clear_cache
            clear_cache()
        # the inspected model (attention, fill-mask): the corpus and its search stay as they are
        choice = self.state.choice.with_(model=str(self.trained_folder), backend="scratch")
        self.state.set_inspect_choice(choice)
        self.state.status.emit(f"Inspecting with the trained model {self.trained_folder} "
                               "(to search with it, choose it as the corpus model)")
        return True

    # ---- events from the trainer (UI thread) --------------------------------------------------
    def _on_event(self, ev: dict):
        kind = ev["kind"]
        self.views.add_event(ev)
        if kind == "status":
            self.stats.setText(ev["message"])
        elif kind == "start":
            for h in ev.get("history", {}).get("train", []):
                self.train_points.append((h["step"], h["loss"]))
            for h in ev.get("history", {}).get("eval", []):
                if h.get("heldout_loss") is not None:
                    self.eval_points.append((h["step"], h["heldout_loss"]))
            self.device_text = f"{ev['device']}, {ev['precision']}"
            self.progress.setRange(0, ev["total"])
            self.progress.setValue(ev["step"])
            self.stats.setText(f"{ev['params']:,} parameters, vocabulary {ev['vocab_size']:,}, "
                               f"{ev['train_sentences']:,} sentences ({ev['heldout_sentences']:,} held out) "
                               f"on {self.device_text}")
            self._redraw()
        elif kind == "step":
            self.train_points.append((ev["step"], ev["loss"]))
            self.progress.setValue(ev["step"])
            self.stats.setText(
                f"step {ev['step']:,}/{ev['total']:,} · {ev['phase']} loss {ev['loss']:.3f} · "
                f"lr {ev['lr']:.2e} · {ev['tokens_per_s']:,.0f} tokens/s · ETA {_fmt_time(ev['eta_s'])} · "
                f"{getattr(self, 'device_text', '')}")
            self._redraw()
        elif kind == "eval":
            if ev.get("heldout_loss") is not None:
                self.eval_points.append((ev["step"], ev["heldout_loss"]))
                self._redraw()
            from core.train.evaluation import describe_eval
            self.eval_label.setText("Held-out " + describe_eval(ev))
        elif kind == "checkpoint":
            self.trained_folder = Path(ev["path"])
        elif kind == "done":
            self.summary = ev

    def _redraw(self):
        if self.train_points:
            x, y = zip(*self.train_points)
            self.train_curve.setData(list(x), list(y))
        else:
            self.train_curve.setData([], [])
        if self.eval_points:
            x, y = zip(*self.eval_points)
            self.eval_curve.setData(list(x), list(y))
        else:
            self.eval_curve.setData([], [])

    def _on_result(self, summary: dict):
        self.summary = summary
        self.trained_folder = Path(summary["out"])
        what = "Cancelled" if summary["cancelled"] else "Done"
        parts = [f"{what} at step {summary['steps']:,} in {_fmt_time(summary['seconds'])}"]
        if summary.get("heldout_mlm_loss") is not None:
            parts.append(f"held-out MLM loss {summary['heldout_mlm_loss']:.3f} "
                         f"(unigram {summary['unigram_loss']:.3f}), accuracy "
                         f"{100 * summary['heldout_mlm_accuracy']:.1f}%")
        parts.append(f"saved to {summary['out']}")
        self.stats.setText(" · ".join(parts))
        self.state.status.emit(f"Training {what.lower()}: {summary['out']}")

    _fail = show_failure

    def _on_finished(self):
        finish_job(self, self.summary, self.run_finished)
