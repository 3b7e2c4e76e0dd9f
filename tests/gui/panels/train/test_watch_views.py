"""The Train tab's watch views (pytest-qt): fed from a real run's events, the step slider, a past
run opened from its folder, and a live run in the panel."""
from __future__ import annotations

import numpy as np
import pytest
from safetensors.numpy import load_file

from core.train import run_folder
from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished 2-layer, dim-32 run of 30 steps: (folder, its events)."""
    from core.train.trainer import Trainer
    root = tmp_path_factory.mktemp("watch-views")
    corpus = write_corpus(root / "gen.txt", n=500)
    events = []
    Trainer(tiny_config(corpus, root / "run", layers=2, dim=32, heads=2, ffn=64, steps=30, batch_size=16,
                        log_every=5, eval_every=10, eval_sentences=60, probe_every=10)).run(progress=events.append)
    return root / "run", events


@pytest.fixture
def views(qtbot):
    from app.gui.panels.train.watch_views import WatchViews
    v = WatchViews()
    qtbot.addWidget(v)
    v.resize(900, 600)
    v.show()
    return v


def check_drawn(v, events):
    grads = [e for e in events if e["kind"] == "grads"]
    probes = [e for e in events if e["kind"] == "probe"]
    groups = grads[0]["groups"]
    assert v.record.groups == groups
    for i, g in enumerate(groups):
        x, y = v.grad_curves[g].xData, v.grad_curves[g].yData           # the data, not its log display
        assert list(x) == [e["step"] for e in grads]
        np.testing.assert_allclose(y, [e["grad_norm"][i] for e in grads])
    expect = np.log10(np.array([e["grad_norm"] for e in grads]).T)          # groups x steps
    np.testing.assert_allclose(v.grad_heatmap.raw, expect)
    assert v.grad_heatmap.col_labels == [str(e["step"]) for e in grads]
    L, H = np.array(probes[0]["entropy"]).shape
    assert len(v.entropy_curves) == L * H
    x, y = v.entropy_curves[1, 0].getData()
    assert list(x) == [p["step"] for p in probes]
    np.testing.assert_allclose(y, [p["entropy"][1][0] for p in probes])
    x, y = v.drawn_anisotropy()
    assert x == [p["step"] for p in probes] and y == pytest.approx([p["anisotropy"] for p in probes])
    x, y = v.accuracy_curve.getData()
    evals = [e for e in events if e["kind"] == "eval"]
    assert list(x) == [e["step"] for e in evals]
    np.testing.assert_allclose(y, [e["heldout_mlm_accuracy"] for e in evals])


def test_plots_fed_from_events_redraw_coalesced(views, run_dir, qtbot):
    folder, events = run_dir
    for ev in events:                               # as fast as a trainer could send them
        views.add_event(ev)
    assert views.redraws == 0                       # nothing drawn per event ...
    qtbot.waitUntil(lambda: views.redraws >= 1, timeout=5000)
    assert views.redraws == 1                       # ... one redraw for the whole burst
    check_drawn(views, events)
    assert views.shown_step() == 30                 # the slider follows the newest snapshot


def test_slider_scrubs_to_the_stored_step(views, run_dir, qtbot):
    folder, events = run_dir
    views.show_run(folder, events)
    assert views.heads_slider.steps == [0, 10, 20, 30]
    views.heads_slider.slider.setValue(1)           # step 10
    views.flush()
    qtbot.waitUntil(lambda: views.grid_step == 10, timeout=10_000)   # read by a worker
    stored = load_file(str(folder / "snapshots" / "step-0000010.safetensors"))
    assert views.shown_step() == 10 and views.embed_slider.step() == 10        # both pages follow
    np.testing.assert_array_equal(views.head_grid.attentions, stored["attentions"].astype(np.float32))
    probe10 = next(e for e in events if e["kind"] == "probe" and e["step"] == 10)
    np.testing.assert_allclose(views.cosine.raw, probe10["probe_cosine"])
    assert views.head_grid.tokens == probe10["tokens"]
    assert views.entropy_marker.value() == 10
    views.embed_slider.slider.setValue(3)           # the other page's slider moves the heads too
    views.flush()
    qtbot.waitUntil(lambda: views.grid_step == 30, timeout=10_000)
    stored = load_file(str(folder / "snapshots" / "step-0000030.safetensors"))
    np.testing.assert_array_equal(views.head_grid.attentions, stored["attentions"].astype(np.float32))
    assert not np.array_equal(views.head_grid.attentions, load_file(
        str(folder / "snapshots" / "step-0000010.safetensors"))["attentions"].astype(np.float32))


def test_update_ratio_measure(views, run_dir):
    folder, events = run_dir
    views.show_run(folder, events)
    views.measure.setCurrentIndex(1)
    views.flush()
    grads = [e for e in events if e["kind"] == "grads"]
    np.testing.assert_allclose(views.grad_heatmap.raw, np.log10(np.array([e["update_ratio"] for e in grads]).T))


def test_open_a_past_run(views, run_dir, qtbot):
    folder, events = run_dir
    views.load_run(folder)
    check_drawn(views, run_folder.read_metrics(folder))
    views.heads_slider.slider.setValue(0)
    views.flush()
    qtbot.waitUntil(lambda: views.grid_step == 0, timeout=10_000)
    np.testing.assert_array_equal(views.head_grid.attentions, run_folder.read_snapshot(folder, 0)["attentions"])


@pytest.fixture
def panel(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    from app.gui.panels.train.panel import TrainPanel
    from app.gui.state import AppState

    state = AppState()
    p = TrainPanel(state)
    qtbot.addWidget(p)
    p.show()
    yield p
    state.shutdown(30_000)


def test_panel_opens_a_run_folder_in_a_worker(panel, run_dir, qtbot, tmp_path):
    folder, events = run_dir
    assert panel.open_run(folder)
    qtbot.waitUntil(lambda: len(panel.views.record.probes) == 4, timeout=20_000)
    panel.views.flush()
    check_drawn(panel.views, events)
    assert panel.train_points == [(e["step"], e["loss"]) for e in events if e["kind"] == "step"]
    errors = []
    panel.state.error.connect(errors.append)
    (tmp_path / "empty").mkdir()
    assert panel.open_run(tmp_path / "empty")
    qtbot.waitUntil(lambda: bool(errors), timeout=20_000)
    assert "holds no training run" in errors[0] and len(panel.views.record.probes) == 4   # the last good view kept


def test_panel_watches_a_live_run(panel, qtbot, tmp_path):
    panel.set_corpus(write_corpus(tmp_path / "gen.txt", n=400))
    for w, v in ((panel.layers, 2), (panel.dim, 32), (panel.heads, 2), (panel.ffn, 64), (panel.batch, 16),
                 (panel.steps, 24), (panel.watch_box.probe_every, 8)):
        w.setValue(v)
    panel.device.setCurrentIndex(panel.device.findData("cpu"))
    panel.out.setText(str(tmp_path / "live"))
    panel.watch_box.probe_sentence.setText("the cat meows in the garden .")
    panel.watch_box.probe_set.setPlainText("the cat meows.\nthe dog barks.\nanna lives in paris.")
    panel.overrides = dict(threads=1, precision="fp32", max_length=24, eval_every=8, eval_sentences=40,
                           dropout=0.0, lr=3e-3, log_every=4)
    cfg = panel.config()
    assert cfg.probe_set == ("the cat meows.", "the dog barks.", "anna lives in paris.") and cfg.probe_every == 8
    seen = []
    panel.bridge.event.connect(seen.append)
    assert panel.start()
    qtbot.waitUntil(lambda: panel.summary is not None and not panel.running, timeout=120_000)
    panel.views.flush()
    qtbot.waitUntil(lambda: panel.views.grid_step is not None, timeout=10_000)
    events = run_folder.read_metrics(tmp_path / "live")
    assert events == seen
    check_drawn(panel.views, events)
    assert panel.views.redraws < len(events)           # coalesced, not one redraw per event
    assert panel.views.head_grid.tokens[:3] == ["[CLS]", "the", "cat"]
    assert panel.views.cosine.raw.shape == (3, 3)


def test_panel_rejects_a_probe_set_of_one_sentence(panel):
    panel.watch_box.probe_set.setPlainText("just one")
    with pytest.raises(ValueError, match="at least two sentences"):
        panel.config()
    assert not panel.start() and "at least two sentences" in panel.stats.text()


def test_panel_resume_shows_the_run_so_far(panel, run_dir, qtbot, tmp_path):
    import shutil
    folder, events = run_dir
    copy = tmp_path / "resumed"
    shutil.copytree(folder, copy)
    panel.steps.setValue(40)
    panel.overrides = dict(threads=1)
    assert panel.resume(copy)
    qtbot.waitUntil(lambda: panel.summary is not None and not panel.running, timeout=120_000)
    panel.views.flush()
    assert panel.views.heads_slider.steps == [0, 10, 20, 30, 40]          # the past run's probes, then the new
    assert [e["step"] for e in panel.views.record.grads] == [5, 10, 15, 20, 25, 30, 35, 40]
    check_drawn(panel.views, run_folder.read_metrics(copy))


def test_spearman_and_next_token_accuracy_are_drawn_beside_mlm_accuracy(views, qtbot):
    """A clm run with --eval-pairs: its next-token accuracy and its Spearman are drawn, each
    at the steps of the evaluations that have it."""
    evals = [{"kind": "eval", "step": s, "total": 20, "heldout_mlm_accuracy": None,
              "heldout_clm_accuracy": 0.1 + s / 100, "spearman": None if s == 0 else s / 40}
             for s in (0, 10, 20)]
    for ev in evals:
        views.add_event(ev)
    qtbot.waitUntil(lambda: views.redraws >= 1, timeout=5000)
    x, y = views.accuracy_curve.getData()
    assert list(x) == [0, 10, 20] and y == pytest.approx([0.1, 0.2, 0.3])
    x, y = views.spearman_curve.getData()
    assert list(x) == [10, 20] and y == pytest.approx([0.25, 0.5])


def test_the_slider_never_reads_a_snapshot_on_the_ui_thread(views, run_dir, qtbot, monkeypatch):
    import threading
    folder, events = run_dir
    readers = []
    real = run_folder.read_snapshot

    def recorded(*a, **k):
        readers.append(threading.current_thread() is threading.main_thread())
        return real(*a, **k)

    monkeypatch.setattr(run_folder, "read_snapshot", recorded)
    views.show_run(folder, events)
    for i, step in enumerate([0, 10, 20, 30]):
        views.heads_slider.slider.setValue(i)
        views.flush()
        qtbot.waitUntil(lambda s=step: views.grid_step == s, timeout=10_000)
        stored = load_file(str(folder / "snapshots" / f"step-{step:07d}.safetensors"))
        np.testing.assert_array_equal(views.head_grid.attentions, stored["attentions"].astype(np.float32))
    assert readers and not any(readers)


def test_open_run_starts_in_the_models_folder(panel, monkeypatch):
    from PySide6 import QtWidgets

    from core.paths import models_dir
    asked = []
    monkeypatch.setattr(QtWidgets.QFileDialog, "getExistingDirectory",
                        staticmethod(lambda *a, **k: asked.append(a) or ""))
    assert not panel.open_run()
    assert asked and asked[0][2] == str(models_dir())


def test_the_evaluate_list_offers_the_runs_of_experiments(qtbot, panel, tiny_distilbert):
    from app.gui.panels.train.evaluate_view import EvaluateView
    from core.encoder.backends import get_backend
    from core.encoder.weights import save_checkpoint
    from core.paths import models_dir
    b = get_backend(str(tiny_distilbert))
    run = save_checkpoint(b.model, b.tokenizer, models_dir() / "experiments" / "pooling-1" / "cls")
    view = EvaluateView(panel.state)
    qtbot.addWidget(view)
    view.folder.showPopup()
    view.folder.hidePopup()
    assert view.folder.findText(str(run)) >= 0
