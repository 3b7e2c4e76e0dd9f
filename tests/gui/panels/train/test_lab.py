"""The Train tab's lab (pytest-qt): the Runs page compares selected runs (curves, the settings that
differ, final metrics, exports); the Experiments page runs a queue, cancels it, and hands the
result to the Runs page."""
from __future__ import annotations

import csv
import json
import shutil
from dataclasses import replace

import pytest

from tests.support.train_corpus import tiny_config, write_corpus

TINY = dict(threads=1, precision="fp32", max_length=24, eval_every=10, eval_sentences=50, dropout=0.0,
            layers=2, dim=32, heads=2, ffn=64, batch_size=16, log_every=5, device="cpu")


@pytest.fixture(scope="module")
def runs_root(tmp_path_factory):
    """Two tiny runs that differ in norm: "pre" as a run from before runs were watched (no
    metrics.jsonl), "post" with a metrics.jsonl of known gradient norms and anisotropy."""
    from core.train.trainer import Trainer

    root = tmp_path_factory.mktemp("lab")
    corpus = write_corpus(root / "c.txt", n=200)
    a = tiny_config(corpus, root / "runs" / "pre", steps=20, **{k: v for k, v in TINY.items() if k != "device"})
    b = replace(a, out=str(root / "runs" / "post"), norm="post")
    for cfg in (a, b):
        Trainer(cfg).run()
    events = [{"kind": "step", "step": s, "total": 20, "phase": "mlm", "loss": 7.0 - s / 10, "lr": 1e-3}
              for s in (5, 10, 15, 20)]
    events += [{"kind": "grads", "step": s, "total": 20, "groups": ["embeddings", "layer 1 FFN"],
                "grad_norm": [1.0 / s, 1.0 / s], "update_ratio": [1e-3, 1e-3], "total_grad_norm": 2.0 / s}
               for s in (5, 10, 15, 20)]
    events += [{"kind": "probe", "step": 20, "total": 20, "anisotropy": 0.5}]
    (root / "runs" / "pre" / "metrics.jsonl").unlink(missing_ok=True)
    (root / "runs" / "post" / "metrics.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return root


@pytest.fixture
def lab(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    from app.gui.panels.train.lab import TrainLab
    from app.gui.state import AppState

    state = AppState()
    w = TrainLab(state)
    qtbot.addWidget(w)
    w.resize(1280, 800)
    w.show()
    yield w
    state.shutdown(30_000)


def _list(qtbot, lab, folder):
    view = lab.runs_view
    lab.show_page("Runs")
    view.folder.setText(str(folder))
    view.refresh()
    qtbot.waitUntil(lambda: view.listed_folder == folder and not lab.state.jobs.busy, timeout=15_000)
    return view


def test_the_lab_has_its_pages_and_forwards_the_train_panel(lab, tmp_path):
    from app.gui.panels.train.panel import TrainPanel

    assert lab.page_titles() == ["Run", "Runs", "Experiments", "Evaluate"]
    assert isinstance(lab.page("Run"), TrainPanel) and lab.run_panel is lab.page("Run")
    corpus = write_corpus(tmp_path / "mine.txt", n=20)
    lab.set_corpus(corpus)
    assert lab.run_panel.corpus.currentData() == str(corpus) and lab.config().corpus == str(corpus)
    assert lab.running is False
    lab.overrides = {"steps": 7}
    assert lab.run_panel.config().steps == 7 and lab.experiments_view.base_config().steps == 7


def test_selecting_two_runs_overlays_their_curves_and_tables(qtbot, lab, runs_root, tmp_path):
    view = _list(qtbot, lab, runs_root)
    assert [r.path.name for r in view.runs] == ["post", "pre"]            # newest first
    assert view.table.rowCount() == 2 and view.comparison is None
    view.table.selectRow(0)
    assert view.comparison is None and "two or more" in view.message.text()
    with qtbot.waitSignal(view.compared, timeout=15_000):
        view.select_runs([str(runs_root / "runs" / n) for n in ("pre", "post")])
    assert view.comparison["differs"] == ["norm"]
    # the curves drawn are the runs' own numbers
    state = json.loads((runs_root / "runs" / "pre" / "trainer_state.json").read_text())
    loss = view.curves.loss_plot.drawn
    assert loss["pre"] == [(h["step"], h["loss"]) for h in state["history"]["train"]]
    assert loss["post"] == [(5, 6.5), (10, 6.0), (15, 5.5), (20, 5.0)]
    assert view.curves.grad_plot.series_name == "grads.total_grad_norm"
    assert view.curves.grad_plot.drawn == {"post": [(5, 0.4), (10, 0.2), (15, 2 / 15), (20, 0.1)]}
    assert view.curves.grad_plot.picker.findText("grads.grad_norm.layer 1 FFN") >= 0
    assert view.curves.anisotropy_plot.drawn == {"post": [(20, 0.5)]}
    assert set(view.curves.eval_plot.drawn) == {"pre"}        # post's metrics.jsonl has no eval lines
    assert view.curves.eval_plot.series_name == "eval.heldout_loss"
    # the differ table: one column per differing setting, one row per run
    t = view.differ_table
    assert [t.horizontalHeaderItem(j).text() for j in range(t.columnCount())] == ["norm"]
    rows = {t.verticalHeaderItem(i).text(): t.item(i, 0).text() for i in range(t.rowCount())}
    assert rows == {"pre": "pre", "post": "post"}
    f = view.final_table
    metrics = [f.verticalHeaderItem(i).text() for i in range(f.rowCount())]
    assert "loss" in metrics and "anisotropy" in metrics
    post_col = [f.horizontalHeaderItem(j).text() for j in range(f.columnCount())].index("post")
    assert f.item(metrics.index("loss"), post_col).text() == "5"
    # exports
    from PySide6.QtGui import QImage
    assert view.png_button.isEnabled()
    view.export_png(tmp_path / "p.png")
    assert not QImage(str(tmp_path / "p.png")).isNull()
    n = view.export_curves_csv(tmp_path / "c.csv")
    rows = list(csv.DictReader(open(tmp_path / "c.csv")))
    assert len(rows) == n and {r["run"] for r in rows} == {"pre", "post"}
    view.export_table_csv(tmp_path / "t.csv")
    table = {r["run"]: r["norm"] for r in csv.DictReader(open(tmp_path / "t.csv"))}
    assert table == {str(runs_root / "runs" / n): n for n in ("pre", "post")}


def test_the_save_buttons_write_where_the_dialog_says(qtbot, lab, runs_root, tmp_path, monkeypatch):
    from PySide6 import QtWidgets
    from PySide6.QtGui import QImage

    view = _list(qtbot, lab, runs_root)
    assert not view.png_button.isEnabled()                 # nothing compared yet
    with qtbot.waitSignal(view.compared, timeout=15_000):
        view.select_runs([str(r.path) for r in view.runs])
    for button, name in ((view.png_button, "plots.png"), (view.curves_button, "curves.csv"),
                         (view.table_button, "table.csv")):
        monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                            staticmethod(lambda *a, name=name, **k: (str(tmp_path / name), "")))
        button.click()
    assert not QImage(str(tmp_path / "plots.png")).isNull()
    assert open(tmp_path / "curves.csv").readline().strip() == "run,series,step,value"
    assert open(tmp_path / "table.csv").readline().strip().startswith("run,norm,")
    monkeypatch.setattr(QtWidgets.QFileDialog, "getSaveFileName",
                        staticmethod(lambda *a, **k: (str(tmp_path / "no" / "such" / "t.csv"), "")))
    view.table_button.click()                               # a folder that is not there: a message
    assert view.message.text().startswith("error: cannot write")


def test_an_unreadable_run_is_skipped_and_named(qtbot, lab, runs_root, tmp_path):
    root = tmp_path / "mixed"
    shutil.copytree(runs_root / "runs" / "pre", root / "good")
    shutil.copytree(runs_root / "runs" / "pre", root / "bad")
    (root / "bad" / "trainer_state.json").write_text("{")
    view = _list(qtbot, lab, root)
    assert [r.path.name for r in view.runs] == ["good"] and "skipped 1 unreadable" in view.message.text()
    view.folder.setText(str(tmp_path / "nowhere"))
    view.refresh()
    assert "no such folder" in view.message.text() and [r.path.name for r in view.runs] == ["good"]


def test_an_experiment_runs_its_queue_then_the_runs_page_compares_it(qtbot, lab, tmp_path):
    view = lab.experiments_view
    lab.show_page("Experiments")
    view.select("positions")
    view.corpus.setText(str(write_corpus(tmp_path / "c.txt", n=200)))
    view.steps.setValue(20)
    view.out.setText(str(tmp_path / "pos"))
    view.overrides = dict(TINY)
    with qtbot.waitSignal(view.finished, timeout=120_000) as done:
        assert view.start()
        assert not view.start_button.isEnabled() and view.cancel_button.isEnabled()
    result = done.args[0]
    assert result["completed"] == ["learned positions", "sinusoidal positions"]
    assert view.progress.value() == view.progress.maximum() == 40
    runs = lab.runs_view
    qtbot.waitUntil(lambda: runs.comparison is not None, timeout=15_000)
    assert lab.pages.currentWidget() is runs
    assert runs.comparison["differs"] == ["positions"]
    assert set(runs.curves.loss_plot.drawn) == {"learned positions", "sinusoidal positions"}
    assert runs.note.isVisibleTo(lab) and "held-out loss" in runs.note.text()


def test_an_experiment_can_be_cancelled(qtbot, lab, tmp_path):
    view = lab.experiments_view
    view.select("norm")
    view.corpus.setText(str(write_corpus(tmp_path / "c.txt", n=200)))
    view.steps.setValue(400)
    view.out.setText(str(tmp_path / "norm"))
    view.overrides = dict(TINY)
    assert view.start()
    qtbot.waitUntil(lambda: view.progress.value() >= 10, timeout=60_000)
    with qtbot.waitSignal(view.finished, timeout=60_000) as done:
        view.cancel()
    assert done.args[0]["cancelled"] and done.args[0]["completed"] == []
    assert "Cancelled" in view.stats.text() and view.start_button.isEnabled()
    saved = json.loads((tmp_path / "norm" / "pre-norm-warm-up" / "trainer_state.json").read_text())
    assert 10 <= saved["step"] < 400
    assert not (tmp_path / "norm" / "pre-norm-no-warm-up").exists()
    # the same output folder again is refused, not overwritten
    assert not view.start() and "not empty" in view.stats.text()


def test_the_shared_settings_reach_every_run_and_the_varied_one_is_the_experiments(lab):
    from core.assets import paraphrase_pairs
    from core.train.experiments import experiment_configs

    view = lab.experiments_view
    view.select("width")
    fields = view.model_fields
    assert not fields["dim"].isEnabled() and fields["layers"].isEnabled()
    fields["layers"].setValue(6)
    fields["ffn"].setValue(256)
    view.lr.setText("3e-3")
    base = view.base_config()
    assert (base.layers, base.ffn, base.lr) == (6, 256, 3e-3)
    runs = experiment_configs(view.experiment, base, str(paraphrase_pairs()))
    assert [c.dim for _, c in runs] == [32, 64, 128] and {(c.layers, c.ffn, c.lr) for _, c in runs} == {(6, 256, 3e-3)}
    view.select("layers")
    assert fields["dim"].isEnabled() and not fields["layers"].isEnabled()
    view.lr.setText("fast")
    assert not view.start() and "learning rate 'fast'" in view.stats.text()


def test_whitening_links_to_the_evaluate_page(qtbot, lab):
    view = lab.experiments_view
    view.select("whitening")
    assert not view.page_button.isHidden() and view.page_button.isEnabled()
    assert not view.start_button.isEnabled()
    view.page_button.click()
    assert lab.pages.currentWidget() is lab.evaluate_view


def test_the_window_train_tab_is_the_lab(qtbot, make_window):
    w = make_window(start=False)
    lab = w.optional_panels["Train"]
    assert type(lab).__name__ == "TrainLab" and lab.objectName() == "train_panel"
    assert lab.page_titles() == ["Run", "Runs", "Experiments", "Evaluate"]


