"""Drive the main window as a user would (offscreen, real minilm, isolated data folder)."""
from __future__ import annotations

import csv

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from tests.support.app_fixtures import ASSETS, wait_idle


def _type(qtbot, widget, text):
    widget.setFocus()
    qtbot.keyClicks(widget, text)


def _error_text(window):
    boxes = [b for b in window.findChildren(QMessageBox, "error_box") if b.isVisible()]
    return boxes[-1].text() if boxes else None


def test_first_launch_indexes_sample_then_reuses(qtbot, make_window, monkeypatch, tmp_path):
    import app.gui.corpus_service as cs
    sample = tmp_path / "sample.txt"
    lines = (ASSETS / "sample_corpus.txt").read_text(encoding="utf-8").splitlines()[:300]
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setattr(cs, "SAMPLE_CORPUS", sample)
    monkeypatch.setattr(cs.create_store_job, "__defaults__", (sample, None, None))

    w = make_window(start=False)
    assert w.windowTitle().startswith("Encoderscope")
    w.start()
    # a progress bar with a Cancel button shows while the sample corpus is indexed
    qtbot.waitUntil(lambda: w.job_progress.isVisible() and w.job_progress.bar.maximum() == 300, timeout=30_000)
    wait_idle(qtbot, w)
    assert w.state.store.count() == 300
    assert w.corpus_panel.model.total() == 300
    assert "300" in w.count_label.text()
    assert w.device_label.text().strip().startswith("Device: cpu")
    w.close()

    w2 = make_window(start=False)
    w2.start()
    qtbot.waitUntil(lambda: w2.state.store is not None and not w2.state.jobs.busy, timeout=30_000)
    assert w2.state.store.count() == 300           # reused, not re-indexed
    assert "Opened" in w2.status_message.message or w2.corpus_panel.model.total() == 300


@pytest.mark.parametrize("row", [0, 3, 7])
def test_search_finds_expected_top_hit(qtbot, make_window, sample_store_template, row):
    examples = list(csv.DictReader(open(ASSETS / "search_examples.tsv", encoding="utf-8"), delimiter="\t"))
    query, expected = examples[row]["query"], examples[row]["expected"]
    w = make_window(sample_store_template)
    panel = w.search_panel
    with qtbot.waitSignal(panel.results_shown, timeout=20_000,
                          check_params_cb=lambda r: r.query == query):
        _type(qtbot, panel.query, query)
    assert panel.results.hits[0].text == expected
    assert panel.results.rowCount() == 10
    # the score column is drawn as bars and holds the cosine
    assert 0 < panel.results.hits[0].score <= 1.0001
    # k changes the number of rows
    with qtbot.waitSignal(panel.results_shown, timeout=20_000):
        panel.k.setValue(3)
    assert panel.results.rowCount() == 3


def test_add_sentence_and_paste_lines(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    before = panel.model.total()
    _type(qtbot, panel.add_edit, "A lighthouse keeper polished the giant lens every evening.")
    with qtbot.waitSignal(w.service.ingest_done, timeout=20_000):
        qtbot.keyClick(panel.add_edit, Qt.Key.Key_Return)
    assert panel.model.total() == before + 1
    assert panel.add_edit.text() == ""
    assert w.state.store.count() == before + 1

    with qtbot.waitSignal(w.service.ingest_done, timeout=20_000) as blocker:
        panel.paste_lines("Penguins huddle together to survive the winter.\n\n"
                          "Glaciers carve deep valleys over thousands of years.\n"
                          "A lighthouse keeper polished the giant lens every evening.\n")
    assert blocker.args[0].added == 2 and blocker.args[0].duplicates == 1
    assert panel.model.total() == before + 3
    assert f"{before + 3}" in w.count_label.text()

    # the new sentence is searchable at once
    with qtbot.waitSignal(w.search_panel.results_shown, timeout=20_000):
        _type(qtbot, w.search_panel.query, "birds that live in Antarctica keep warm in groups")
    assert w.search_panel.results.hits[0].text.startswith("Penguins")


def test_import_csv_with_chosen_column(qtbot, make_window, tiny_store_template, tmp_path):
    path = tmp_path / "reviews.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        wr = csv.writer(f)
        wr.writerow(["id", "title", "body"])
        wr.writerow([1, "Great", "The hotel room had a wonderful view of the harbour."])
        wr.writerow([2, "Awful", "Our flight was delayed for six hours without any explanation."])
        wr.writerow([3, "Fine", "The museum guide explained every painting with real passion."])
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    before = panel.model.total()
    dialog = panel.import_file(path)
    assert dialog is not None and dialog.isVisible()
    assert dialog.fields == ["id", "title", "body"]
    dialog.combo.setCurrentText("body")
    assert dialog.preview.item(0).text().startswith("The hotel room")
    with qtbot.waitSignal(w.service.ingest_done, timeout=20_000) as blocker:
        dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert blocker.args[0].added == 3
    assert panel.model.total() == before + 3
    texts = {rec["text"]: rec["metadata"] for rec in w.state.store.iter()}
    assert texts["Our flight was delayed for six hours without any explanation."]["row"] == 3
    # the table filter finds them
    panel.filter_edit.setText("harbour")
    qtbot.waitUntil(lambda: panel.model.rowCount() == 1, timeout=3000)
    assert "1 of" in panel.count_label.text()


def test_bad_file_shows_a_message(qtbot, make_window, tiny_store_template, tmp_path):
    w = make_window(tiny_store_template)
    bad = tmp_path / "broken.jsonl"
    bad.write_bytes(b"{not json\n\xff\xfe garbage\n")
    w.corpus_panel.import_file(bad)
    qtbot.waitUntil(lambda: _error_text(w) is not None, timeout=10_000)
    assert "broken.jsonl" in _error_text(w)
    for box in w.findChildren(QMessageBox, "error_box"):
        box.close()

    assert w.isVisible() and w.state.store.count() == w.corpus_panel.model.total()


def test_delete_selected(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    w.tabs.setCurrentWidget(panel)
    before = panel.model.total()
    first, second = panel.model.text_at(0), panel.model.text_at(1)
    panel.table.selectRow(0)
    panel.table.selectionModel().select(panel.model.index(1, 0), panel.table.selectionModel().SelectionFlag.Select
                                        | panel.table.selectionModel().SelectionFlag.Rows)
    assert panel.delete_button.isEnabled()
    with qtbot.waitSignal(w.service.rows_removed, timeout=20_000):
        qtbot.mouseClick(panel.delete_button, Qt.MouseButton.LeftButton)
    assert panel.model.total() == before - 2
    remaining = {rec["text"] for rec in w.state.store.iter()}
    assert first not in remaining and second not in remaining


def test_switch_pooling_and_accept_reembed(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    bar = w.model_bar
    assert w.state.store.pooling == "mean"
    bar.pooling.setCurrentIndex(bar.pooling.findData("cls"))
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    qtbot.waitUntil(lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
                    and w.corpus_panel._reembed_box.isVisible(), timeout=10_000)
    box = w.corpus_panel._reembed_box
    assert "mean" in box.text() and "cls" in box.text()
    box.clickedButton = lambda: w.corpus_panel.reembed_yes   # offscreen: click() on a box button
    w.corpus_panel.reembed_yes.click()
    qtbot.waitUntil(lambda: w.state.store.pooling == "cls" and not w.state.jobs.busy, timeout=30_000)
    assert w.state.choice.pooling == "cls"
    assert w.service.compatible() is True
    with qtbot.waitSignal(w.search_panel.results_shown, timeout=20_000):
        _type(qtbot, w.search_panel.query, "cooking")
    assert w.search_panel.results.hits


def test_decline_reembed_keeps_corpus_model(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    bar = w.model_bar
    bar.pooling.setCurrentIndex(bar.pooling.findData("max"))
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    qtbot.waitUntil(lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None, timeout=10_000)
    w.corpus_panel.reembed_no.click()
    qtbot.waitUntil(lambda: w.state.choice.pooling == "mean", timeout=10_000)
    assert bar.pooling.currentData() == "mean"
    assert w.state.store.pooling == "mean"


def test_cancel_long_ingest_keeps_committed(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    before = w.state.store.count()
    lines = [f"Test sentence number {i} about a quiet village by the sea." for i in range(6000)]
    job = w.corpus_panel.paste_lines("\n".join(lines))
    assert job is not None
    # a second start is refused while it runs (double click)
    assert w.corpus_panel.paste_lines("another line") is None
    # Texts are embedded a window at a time, then committed: wait for the first commit.
    qtbot.waitUntil(lambda: w.state.store.count() > before, timeout=60_000)
    assert w.job_progress.isVisible() and w.job_progress.cancel_button.isEnabled()
    with qtbot.waitSignal(w.service.ingest_done, timeout=30_000) as blocker:
        qtbot.mouseClick(w.job_progress.cancel_button, Qt.MouseButton.LeftButton)
    result = blocker.args[0]
    assert result.cancelled and 0 < result.added < 6000
    wait_idle(qtbot, w)
    assert w.state.store.count() == before + result.added
    assert w.corpus_panel.model.total() == before + result.added
    assert not w.job_progress.isVisible()


def test_close_during_job_cancels_cleanly(qtbot, make_window, tiny_store_template):
    from index.faiss.store import VectorStore
    w = make_window(tiny_store_template)
    folder = w.service.folder
    before = w.state.store.count()
    lines = [f"Closing test line {i} on a rainy afternoon." for i in range(6000)]
    assert w.corpus_panel.paste_lines("\n".join(lines)) is not None
    qtbot.waitUntil(lambda: w.state.store.count() > before, timeout=60_000)
    w.close()
    assert not w.state.jobs.busy or w.state.jobs.wait(1)
    store = VectorStore.open(folder)             # closed cleanly: readable, committed rows kept
    assert before < store.count() < before + 6000
    assert store.index_ids().size == store.count()
    store.close()


def test_unavailable_model_shows_core_message(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    bar = w.model_bar
    bar.weights.setCurrentText("distilbert-base-uncased")
    bar.encoder.setCurrentIndex(bar.encoder.findData("hf"))
    with qtbot.waitSignal(w.state.error, timeout=30_000) as blocker:
        bar._apply()
    message = blocker.args[0]
    assert "distilbert-base-uncased" in message and "minilm" in message and "Traceback" not in message
    qtbot.waitUntil(lambda: _error_text(w) is not None, timeout=5000)
    qtbot.waitUntil(lambda: w.state.backend is not None, timeout=10_000)
    assert w.state.choice.model == "minilm"           # back to the model that works
    assert bar.weights.currentText() == "minilm"


def test_settings_remembered(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(760, 540)
    w.search_panel.k.setValue(7)
    w.tabs.setCurrentWidget(w.corpus_panel)
    w.close()
    w2 = make_window(start=False)
    assert w2.search_panel.k.value() == 7
    assert w2.tabs.currentWidget() is w2.corpus_panel
    assert (w2.size().width(), w2.size().height()) == (760, 540)
    assert w2.settings.value("store/folder").endswith("sample")


def test_inspect_request_and_about(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.search_panel
    with qtbot.waitSignal(panel.results_shown, timeout=20_000):
        _type(qtbot, panel.query, "weather")
    with qtbot.waitSignal(w.state.inspect_requested, timeout=5000) as blocker:
        panel.inspect_button.click()
    assert blocker.args == [panel.results.hits[0].text, "weather"]
    from app.gui.shell.about import about_text
    text = about_text(w.state)
    assert "torch" in text and "cpu" in text and "PySide6" in text


def test_window_has_every_panel_as_a_tab(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    titles = [w.tabs.tabText(i) for i in range(w.tabs.count())]
    assert titles == ["Search", "Corpus", "Attention", "Step by step", "Fill-mask", "Intervene", "Causal",
                       "Features", "Train", "Map"]
    assert type(w.optional_panels["Attention"]).__name__ == "AttentionPanel"
    assert w.findChild(type(w.optional_panels["Train"]), "train_panel") is w.optional_panels["Train"]
    view = next(a.menu() for a in w.menuBar().actions() if a.text() == "&View")
    keys = {a.text(): a.shortcut().toString() for a in view.actions()}
    assert keys["Search"] == "Ctrl+1" and keys["Train"] == "Ctrl+9" and keys["Map"] == "Ctrl+0"   # ten tabs


def test_open_other_corpora_folder_and_milvus_lite(qtbot, make_window, tiny_store_template, tmp_path):
    """File > Open corpus: an empty folder becomes a new empty corpus; a milvus-lite: location
    works the same (add, search); the last location is remembered for the next start."""
    w = make_window(tiny_store_template)
    assert w.windowTitle() == "Encoderscope — sample"

    def open_and_wait(location):
        w.service.open(location, sample_if_new=False)
        qtbot.waitUntil(lambda: w.state.store is not None and not w.state.jobs.busy
                        and w.service.location is not None
                        and str(w.service.location).endswith(str(location).split(":")[-1]),
                        timeout=60_000)
        wait_idle(qtbot, w)

    open_and_wait(tmp_path / "empty")
    assert w.state.store.count() == 0 and w.corpus_panel.model.total() == 0
    assert w.windowTitle() == "Encoderscope — empty"

    pytest.importorskip("milvus_lite")
    lite = f"milvus-lite:{tmp_path / 'team'}"
    open_and_wait(lite)
    assert type(w.state.store).__name__ == "MilvusStore"
    assert w.windowTitle() == "Encoderscope — team (Milvus Lite)"
    lines = ["The ferry leaves the harbour at dawn.", "Bees carry pollen between flowers.",
             "A compiler turns source code into machine code."]
    with qtbot.waitSignal(w.service.ingest_done, timeout=30_000):
        w.corpus_panel.paste_lines("\n".join(lines))
    assert w.state.store.count() == 3 and w.corpus_panel.model.total() == 3
    panel = w.search_panel
    with qtbot.waitSignal(panel.results_shown, timeout=20_000,
                          check_params_cb=lambda r: r.query == "insects and flowers"):
        _type(qtbot, panel.query, "insects and flowers")
    assert panel.results.hits[0].text == lines[1]
    w.close()
    w2 = make_window(start=False)
    w2.start()                                     # no location given: the last one
    qtbot.waitUntil(lambda: w2.state.store is not None and not w2.state.jobs.busy, timeout=60_000)
    assert str(w2.service.location) == lite and w2.state.store.count() == 3


def test_bad_location_is_a_message(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.service.open("ftp://nowhere/x", sample_if_new=False)
    qtbot.waitUntil(lambda: _error_text(w) is not None, timeout=10_000)
    assert "unknown store scheme" in _error_text(w)
    assert w.state.store is not None and w.windowTitle() == "Encoderscope — sample"


def test_corpus_row_goes_to_the_inspector(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    w.tabs.setCurrentWidget(panel)
    assert not panel.inspect_button.isEnabled()
    panel.table.selectRow(2)
    assert panel.inspect_button.isEnabled()
    with qtbot.waitSignal(w.state.inspect_requested, timeout=5_000,
                          check_params_cb=lambda t, _c: t == panel.model.text_at(2)):
        qtbot.mouseClick(panel.inspect_button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(w.state.inspect_requested, timeout=5_000,
                          check_params_cb=lambda t, _c: t == panel.model.text_at(3)):
        panel.table.doubleClicked.emit(panel.model.index(3, 1))


def test_opening_a_corpus_of_another_model_offers_reembed(qtbot, make_window, tiny_store_template,
                                                          minilm, tmp_path):
    """The window runs minilm + mean; a corpus embedded with CLS pooling must not be mixed."""
    import threading

    from app.gui.corpus_jobs import create_store_job, ingest_job
    from tests.support.app_fixtures import noop_progress
    store, _ = create_store_job(tmp_path / "cls", minilm, "cls", sample=None,
                                progress=noop_progress, cancel=threading.Event())
    ingest_job(store, minilm, "cls", ["One sentence.", "Another sentence."],
               progress=noop_progress, cancel=threading.Event())
    store.close()
    w = make_window(tiny_store_template)
    w.service.open(tmp_path / "cls", sample_if_new=False)
    qtbot.waitUntil(lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
                    and w.corpus_panel._reembed_box.isVisible(), timeout=20_000)
    assert w.state.store.pooling == "cls" and w.state.store.count() == 2
