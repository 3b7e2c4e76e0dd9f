"""Defects a new user hit (issue 17 item 3), each driven as the user met it: fill-mask kept the
previous model's tables, the loss plot kept a zoom across runs, Delete had no undo and stayed
enabled with nothing selected, the search hint counted 0 sentences, the attention controls
overflowed a 1,200 px window, long status messages were cut."""
from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence

from core.encoder.backends import get_backend
from tests.support.app_fixtures import wait_idle


def test_fill_mask_clears_the_previous_models_results(qtbot, tiny_distilbert):
    from app.gui.panels.fillmask import panel as F
    from app.gui.state import AppState

    state = AppState()
    panel = F.FillMaskPanel(state, auto_predict=False)
    qtbot.addWidget(panel)
    panel.show()
    mlm = get_backend(str(tiny_distilbert), backend="scratch")
    state.backend = mlm
    state.backend_changed.emit(mlm)
    panel.text_edit.setText("the [MASK] sat on the [MASK] .")
    with qtbot.waitSignal(panel.predicted, timeout=15_000):
        panel.predict()
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=15_000)
    assert panel.mask_tables and panel.joint_box.isVisibleTo(panel) and panel.layer_box.isVisibleTo(panel)

    state.backend = None                         # another model starts loading
    state.backend_changed.emit(None)
    assert panel.result is None and not panel.mask_tables and panel.tables_layout.count() == 0
    assert not panel.joint_box.isVisibleTo(panel) and not panel.layer_box.isVisibleTo(panel)

    minilm = get_backend("minilm", backend="scratch")   # ... and it has no masked-LM head
    state.backend = minilm
    state.backend_changed.emit(minilm)
    assert panel.has_explanation and panel.result is None and not panel.mask_tables

    with qtbot.waitSignal(panel.predicted, timeout=15_000):   # back to an MLM model: predicted again
        state.backend = mlm
        state.backend_changed.emit(mlm)
    assert len(panel.mask_tables) == 2 and panel.result_backend is mlm
    state.shutdown(5000)


def _shows_all(plot, points):
    (x0, x1), (y0, y1) = plot.getPlotItem().viewRange()
    xs, ys = zip(*points)
    return x0 <= min(xs) and max(xs) <= x1 and y0 <= min(ys) and max(ys) <= y1


def test_loss_plot_refits_at_each_start_and_has_a_fit_button(qtbot, tmp_path, monkeypatch):
    from tests.support.train_corpus import write_corpus
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    from app.gui.panels.train.panel import TrainPanel
    from app.gui.state import AppState

    state = AppState()
    panel = TrainPanel(state)
    qtbot.addWidget(panel)
    panel.resize(1100, 700)
    panel.show()
    panel.set_corpus(write_corpus(tmp_path / "gen.txt", n=300))
    for spin, v in ((panel.layers, 1), (panel.dim, 16), (panel.heads, 2), (panel.ffn, 32), (panel.batch, 8),
                    (panel.steps, 40)):
        spin.setValue(v)
    panel.device.setCurrentIndex(panel.device.findData("cpu"))
    panel.out.setText(str(tmp_path / "run"))
    panel.overrides = {"threads": 1, "precision": "fp32", "max_length": 16, "eval_every": 20,
                       "eval_sentences": 20, "log_every": 2}
    with qtbot.waitSignal(panel.run_finished, timeout=60_000):
        assert panel.start()
    assert panel.fit_button.isVisible() and panel.fit_button.text() == "Fit"

    panel.plot.getPlotItem().setRange(xRange=(5000, 6000), yRange=(50, 60))   # the user zooms away
    qtbot.wait(50)
    assert not _shows_all(panel.plot, panel.train_points)
    with qtbot.waitSignal(panel.run_finished, timeout=60_000):
        assert panel.start()                                                # a new run: fitted again
    qtbot.wait(50)
    assert _shows_all(panel.plot, panel.train_points)

    panel.plot.getPlotItem().setRange(xRange=(5000, 6000), yRange=(50, 60))
    qtbot.mouseClick(panel.fit_button, Qt.MouseButton.LeftButton)
    qtbot.wait(50)
    assert _shows_all(panel.plot, panel.train_points)
    state.shutdown(30_000)


def test_delete_can_be_undone_and_needs_a_selection(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    w.tabs.setCurrentWidget(panel)
    assert not panel.delete_button.isEnabled() and not panel.inspect_button.isEnabled()
    assert not w.delete_action.isEnabled() and not w.undo_delete_action.isEnabled()
    before = {rec["text"]: rec["metadata"] for rec in w.state.store.iter()}
    first, second = panel.model.text_at(0), panel.model.text_at(1)
    panel.table.selectRow(0)
    panel.table.selectionModel().select(panel.model.index(1, 0), panel.table.selectionModel().SelectionFlag.Select
                                        | panel.table.selectionModel().SelectionFlag.Rows)
    assert w.delete_action.isEnabled() and not panel.inspect_button.isEnabled()   # inspect: one row
    with qtbot.waitSignal(w.service.rows_removed, timeout=20_000):
        w.delete_action.trigger()
    # the deleted rows are gone from the selection: nothing left to delete or inspect
    assert not panel.delete_button.isEnabled() and not panel.inspect_button.isEnabled()
    assert not w.delete_action.isEnabled()
    assert w.undo_delete_action.isEnabled() and "2 sentences" in w.undo_delete_action.text()
    assert "Ctrl+Z" in w.status_message.message
    assert w.undo_delete_action.shortcut() == QKeySequence(QKeySequence.StandardKey.Undo)

    panel.table.setFocus()
    qtbot.keySequence(panel.table, QKeySequence(QKeySequence.StandardKey.Undo))
    qtbot.waitUntil(lambda: panel.model.total() == len(before) and not w.state.jobs.busy, timeout=30_000)
    after = {rec["text"]: rec["metadata"] for rec in w.state.store.iter()}
    assert set(after) == set(before) and first in after and second in after
    for text in (first, second):          # source and row come back; "added" is the new time
        assert {k: v for k, v in after[text].items() if k != "added"} == \
            {k: v for k, v in before[text].items() if k != "added"}
    assert "Restored 2 sentences" in w.status_message.message and "embedded again" in w.status_message.message
    assert not w.undo_delete_action.isEnabled()
    with qtbot.waitSignal(w.search_panel.results_shown, timeout=20_000):   # and they are found again
        w.search_panel.query.setText(first)
    assert w.search_panel.results.hits[0].text == first


def test_search_hint_counts_the_opened_corpus(qtbot, make_window, tiny_store_template, tmp_path):
    w = make_window(tiny_store_template)
    wait_idle(qtbot, w)
    n = w.state.store.count()
    assert n == 24
    assert f"Type to search {n} sentences" in w.search_panel.info.text()
    # Another corpus, with the model already loaded: the hint was written before the count was
    # updated, so it gave the previous corpus's count (the first launch said 0 after indexing 576).
    with qtbot.waitSignal(w.state.store_changed, timeout=30_000):
        w.service.open(tmp_path / "empty", sample_if_new=False)
    wait_idle(qtbot, w)
    assert w.state.store.count() == 0
    assert "Type to search 0 sentences" in w.search_panel.info.text()


def test_attention_controls_fit_a_1200_px_window(qtbot):
    from app.gui.panels.attention.panel import AttentionPanel
    from app.gui.state import AppState

    panel = AttentionPanel(AppState(), auto_inspect=False)
    qtbot.addWidget(panel)
    for i in range(panel.mode_combo.count()):
        panel.mode_combo.setCurrentIndex(i)
        # the window's frame, the tab's margins and a scroll bar take some 40 px of the 1,200
        assert panel.sizeHint().width() <= 1160, panel.mode_combo.currentText()
        assert panel.minimumSizeHint().width() <= 1160


def test_long_status_messages_are_elided_with_the_whole_message_in_the_tooltip(qtbot, make_window):
    w = make_window(start=False)
    w.resize(1200, 780)
    message = "Imported 12,345 sentences from /home/someone/a/very/long/path/" + "x" * 400 + ".csv (3 skipped)"
    w.state.status.emit(message)
    label = w.status_message
    qtbot.waitUntil(lambda: label.width() > 0, timeout=2000)
    assert label.message == message and label.toolTip() == message
    assert label.is_elided() and label.text().endswith("…")
    assert label.fontMetrics().horizontalAdvance(label.text()) <= label.width()
    w.state.status.emit("Short")
    assert label.text() == "Short" and not label.is_elided()
