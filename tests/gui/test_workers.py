"""app/gui/workers.py: jobs run off the UI thread, report progress/result/error, cancel, no double starts."""
from __future__ import annotations

import threading
import time

from app.gui.workers import JobRunner
from core.errors import Cancelled, InputError
from tests.support.tiny_models import hold_writer_lock


def test_result_progress_and_thread(qtbot):
    runner = JobRunner()
    seen = {}

    def work(n, progress, cancel):
        seen["thread"] = threading.current_thread()
        for i in range(n):
            progress(i + 1, n, "counting")
        return n * 2

    job = runner.start("count", work, 5)
    progress = []
    job.progress.connect(lambda d, t, m: progress.append((d, t, m)))
    with qtbot.waitSignal(job.finished, timeout=5000):
        pass
    assert job.value == 10 and job.state == "done"
    assert seen["thread"] is not threading.main_thread()
    assert progress and progress[-1] == (5, 5, "counting")
    assert not runner.busy


def test_readable_errors_and_log(qtbot, data_dir):
    from app.gui.logs import log_file, setup_logging
    setup_logging()
    runner = JobRunner()

    def people(progress, cancel):
        raise InputError("the file holds no sentences")

    def bug(progress, cancel):
        return {}["missing"]

    job = runner.start("a", people, label="Import")
    with qtbot.waitSignal(job.error, timeout=5000) as blocker:
        pass
    assert blocker.args == ["the file holds no sentences"]

    job = runner.start("b", bug, label="Import")
    with qtbot.waitSignal(job.error, timeout=5000) as blocker:
        pass
    message = blocker.args[0]
    assert "KeyError" in message and "Traceback" not in message and str(log_file()) in message
    qtbot.waitUntil(lambda: not runner.busy)
    assert "Traceback" in log_file().read_text(encoding="utf-8")


def test_no_double_start_and_cancel(qtbot):
    runner = JobRunner()
    started = threading.Event()

    def long(progress, cancel):
        started.set()
        while not cancel.is_set():
            time.sleep(0.01)
        raise Cancelled("stopped")

    job = runner.start("long", long)
    assert job is not None
    assert runner.start("long", long) is None          # a double click starts nothing
    assert started.wait(5)
    with qtbot.waitSignal(job.cancelled, timeout=5000):
        job.cancel()
    qtbot.waitUntil(lambda: not runner.is_running("long"))
    assert runner.start("long", lambda progress, cancel: 1) is not None   # free again
    runner.wait(5000)


def test_shutdown_cancels_and_waits(qtbot):
    runner = JobRunner()
    stopped = []

    def long(progress, cancel):
        while not cancel.is_set():
            time.sleep(0.01)
        stopped.append(True)
        raise Cancelled("stopped")

    runner.start("one", long)
    runner.start("two", long)
    assert runner.shutdown(5000)
    assert stopped == [True, True]
    assert runner.start("three", long) is None          # closing: nothing new starts


def test_state_run_callbacks(qtbot):
    from app.gui.state import AppState
    state = AppState()
    got = []
    errors = []
    state.error.connect(errors.append)
    job = state.run("x", lambda a, b, progress, cancel: a + b, 2, 3, on_result=got.append)
    with qtbot.waitSignal(job.finished, timeout=5000):
        pass
    assert got == [5]
    job = state.run("y", lambda progress, cancel: 1 / 0)
    with qtbot.waitSignal(job.finished, timeout=5000):
        pass
    assert errors and "ZeroDivisionError" in errors[0]


def test_pinned_pyside_does_not_leak_singleton_references(qtbot):
    """PySide6 6.12.0 on Python 3.11 took a reference from None/True/False on every void call and
    aborted long sessions; pyproject.toml pins PySide6 below 6.12, so no workaround is needed.
    This guards the pin: 20k void calls and signal emits leave the counts where they were."""
    import sys

    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel

    class Emitter(QObject):
        fired = Signal()

    e, label = Emitter(), QLabel()
    before = sys.getrefcount(None), sys.getrefcount(True)
    for _ in range(20_000):
        e.fired.emit()
        label.setText("x")
    after = sys.getrefcount(None), sys.getrefcount(True)
    assert after[0] > before[0] - 1000 and after[1] > before[1] - 1000, (before, after)


# ---- the window's model choice, corpus table, drops and re-embed (issue 5) -----------------------
from PySide6.QtCore import Qt  # noqa: E402


def _close_boxes(window):
    from PySide6.QtWidgets import QMessageBox
    for box in window.findChildren(QMessageBox):
        box.close()


def test_weights_switch_then_keep_reverts_to_corpus_model(qtbot, make_window, tiny_store_template,
                                                          tiny_distilbert):
    """Switching the weights (a model that must load) and declining the re-embed goes back to
    the model the corpus was built with; the new choice is never recorded as the corpus's."""
    w = make_window(tiny_store_template)
    bar = w.model_bar
    bar.set_weights(str(tiny_distilbert))
    bar._apply()
    qtbot.waitUntil(lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
                    and w.corpus_panel._reembed_box.isVisible(), timeout=30_000)
    assert w.service.store_model_choice().model == "minilm"
    w.corpus_panel.reembed_no.click()
    qtbot.waitUntil(lambda: w.state.choice.model == "minilm" and w.state.backend is not None
                    and not w.state.jobs.busy, timeout=30_000)
    assert w.service.compatible() is True
    assert bar.weights.currentText() == "minilm"
    assert w.state.store.fingerprint_dict["model"] == "minilm"


def test_cancel_reembed_keeps_previous_vectors(qtbot, make_window, sample_store_template):
    w = make_window(sample_store_template)
    before = w.state.store.count()
    bar = w.model_bar
    bar.pooling.setCurrentIndex(bar.pooling.findData("cls"))
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    qtbot.waitUntil(lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
                    and w.corpus_panel._reembed_box.isVisible(), timeout=10_000)
    w.corpus_panel._reembed_box.clickedButton = lambda: w.corpus_panel.reembed_yes
    w.corpus_panel.reembed_yes.click()
    job = w.state.jobs.get("store")
    assert job is not None and "Re-embedding" in job.label
    assert w.job_progress.isVisible() and w.job_progress.current is job
    with qtbot.waitSignal(job.cancelled, timeout=30_000):
        qtbot.mouseClick(w.job_progress.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not w.state.jobs.busy and w.state.choice.pooling == "mean", timeout=30_000)
    assert w.state.store.pooling == "mean" and w.state.store.count() == before
    assert w.service.compatible() is True and bar.pooling.currentData() == "mean"
    assert not w.job_progress.isVisible()


def _drop(widget, paths):
    from PySide6.QtCore import QMimeData, QPointF, QUrl
    from PySide6.QtGui import QDropEvent
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(p)) for p in paths])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    widget.dropEvent(event)
    return event


def test_drop_files_on_the_corpus_panel(qtbot, make_window, tiny_store_template, tmp_path):
    import json
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join(json.dumps({"n": i, "body": t}) for i, t in enumerate(
        ["Owls hunt silently at night.", "A sourdough starter needs feeding every day."])) + "\n",
        encoding="utf-8")
    other = tmp_path / "more.txt"
    other.write_text("Volcanoes can create new islands.\n", encoding="utf-8")
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    before = panel.model.total()
    statuses = []
    w.state.status.connect(statuses.append)
    assert panel.acceptDrops()
    _drop(panel, [path, other])
    dialog = panel._dialogs[-1]
    assert dialog.isVisible() and dialog.fields == ["body"]     # only string fields are offered
    assert any("other 1 file" in s for s in statuses)     # the second file is not dropped silently
    with qtbot.waitSignal(w.service.ingest_done, timeout=20_000) as blocker:
        dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    assert blocker.args[0].added == 2 and panel.model.total() == before + 2
    with qtbot.waitSignal(w.service.ingest_done, timeout=20_000):   # a .txt needs no picker
        _drop(panel, [other])
    assert panel.model.total() == before + 3


def test_double_click_hit_opens_inspector_with_query(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.search_panel
    with qtbot.waitSignal(panel.results_shown, timeout=20_000):
        panel.query.setText("rain and storms")
    view = panel.table
    rect = view.visualRect(panel.results.index(1, 2))
    with qtbot.waitSignal(w.state.inspect_requested, timeout=5000) as blocker:
        # a real double click: press/release, then the double-click event (Qt 6's QTest sends only that)
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        qtbot.mouseDClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert blocker.args == [panel.results.hits[1].text, "rain and storms"]
    if "Attention" in w.optional_panels:
        assert w.tabs.tabText(w.tabs.currentIndex()) == "Attention"


def test_model_bar_lists_trained_checkpoints(qtbot, data_dir):
    from app.gui.settings import models_dir
    from app.gui.shell.model_bar import ModelBar
    from app.gui.state import AppState
    from core.encoder.sources import CHECKPOINT_MARKER

    run = models_dir() / "run-1"
    run.mkdir()
    (run / CHECKPOINT_MARKER).write_text("{}", encoding="utf-8")
    (models_dir() / "not-a-checkpoint").mkdir()
    bar = ModelBar(AppState())
    qtbot.addWidget(bar)
    items = [bar.weights.itemText(i) for i in range(bar.weights.count())]
    assert items[:2] == ["minilm", "distilbert-base-uncased"] and str(run) in items
    assert not any(i.endswith("not-a-checkpoint") for i in items)
    later = models_dir() / "run-2"
    later.mkdir()
    (later / CHECKPOINT_MARKER).write_text("{}", encoding="utf-8")
    bar.refresh_weights()                       # also on opening the list
    assert bar.weights.findText(str(later)) >= 0 and bar.weights.currentText() == "minilm"


def test_model_choice_remembered(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    bar = w.model_bar
    bar.device.setCurrentIndex(bar.device.findData("cpu"))
    bar.device.activated.emit(bar.device.currentIndex())
    qtbot.waitUntil(lambda: w.state.backend is not None and not w.state.jobs.busy, timeout=30_000)
    assert w.state.choice.device == "cpu" and w.device_label.text().strip().startswith("Device: cpu")
    w.close()
    w2 = make_window(start=False)
    assert w2.state.choice.device == "cpu" and w2.model_bar.device.currentData() == "cpu"
    assert w2.state.choice.model == "minilm" and w2.state.choice.pooling == "mean"


def test_corpus_table_is_fast_at_100k_rows(qtbot):
    from PySide6.QtWidgets import QTableView

    from app.gui.panels.corpus.table_model import CorpusModel
    model, view = CorpusModel(), QTableView()
    qtbot.addWidget(view)
    view.setModel(model)
    view.resize(800, 600)
    view.show()
    ids = list(range(100_000))
    texts = [f"sentence {i} about topic {i % 97} near the harbour" for i in ids]
    t0 = time.perf_counter()
    model.set_rows(ids, texts)
    view.scrollToBottom()
    qtbot.wait(1)
    t1 = time.perf_counter()
    model.set_filter("topic 5 near")
    qtbot.wait(1)
    t2 = time.perf_counter()
    assert model.rowCount() == sum(1 for t in texts if "topic 5 near" in t)
    assert model.text_at(0) == texts[5] and model.id_at(0) == 5
    model.remove_ids([5])
    assert model.rowCount() == sum(1 for t in texts if "topic 5 near" in t) - 1
    assert t1 - t0 < 1.0 and t2 - t1 < 1.0, (t1 - t0, t2 - t1)   # measured ≈ 0.02 s / 0.04 s


def test_column_preview_reads_a_bounded_number_of_lines(tmp_path, monkeypatch):
    """The column picker's preview runs on the UI thread: a huge file whose column is empty
    must not be read to its end."""
    import app.gui.importers as importers
    path = tmp_path / "big.csv"
    path.write_text("id,body\n" + "".join(f"{i},\n" for i in range(50_000)) + "50000,The last row.\n",
                    encoding="utf-8")
    seen = [0]
    real = importers.read_file

    def counting(*a, **k):
        for item in real(*a, **k):
            seen[0] += 1
            yield item

    monkeypatch.setattr(importers, "read_file", counting)
    out = importers.preview(path, "body")
    assert seen[0] <= importers.PREVIEW_LINES
    assert len(out) == 1 and "no text in 'body'" in out[0]
    assert importers.preview(path, "id") == ["0", "1", "2", "3", "4"]


def test_key_is_free_once_the_result_is_delivered(qtbot):
    """result/error/cancelled and finished arrive in one turn of the event loop: whoever reacts
    to a result (a user, a test's waitSignal) can start the next job with the same key at once.
    (Two queued signals let a loop that stopped on ``result`` see the key still taken.)"""
    runner = JobRunner()

    def quick(progress, cancel):
        return 1

    def fails(progress, cancel):
        raise InputError("nope")

    for i in range(100):
        fn = quick if i % 2 else fails
        job = runner.start("store", fn)
        with qtbot.waitSignal(job.result if fn is quick else job.error, timeout=5000):
            pass
        assert not runner.is_running("store"), f"round {i}: the key is still taken"
    runner.wait(5000)


def _gated_job(gate, ran):
    """A job that records its argument; the first one waits for ``gate``."""
    def job(n, progress, cancel):
        ran.append(n)
        if len(ran) == 1:
            assert gate.wait(10)
        return n
    return job


def test_run_latest_runs_the_first_and_the_newest(qtbot):
    from app.gui.state import AppState
    state = AppState()
    gate, ran, shown = threading.Event(), [], []
    job = _gated_job(gate, ran)

    def on_result(n):
        if not state.has_waiting("k"):      # what a panel does: a stale result is not shown
            shown.append(n)

    assert state.run_latest("k", job, 1, on_result=on_result) is not None
    assert not state.has_waiting("k")
    assert state.run_latest("k", job, 2, on_result=on_result) is None    # waits ...
    assert state.run_latest("k", job, 3, on_result=on_result) is None    # ... and is replaced
    assert state.has_waiting("k")
    gate.set()
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=10_000)
    assert ran == [1, 3] and shown == [3]
    assert not state.has_waiting("k")


def test_drop_waiting_forgets_the_waiting_call(qtbot):
    from app.gui.state import AppState
    state = AppState()
    gate, ran, got = threading.Event(), [], []
    job = _gated_job(gate, ran)
    state.run_latest("k", job, 1, on_result=got.append)
    state.run_latest("k", job, 2, on_result=got.append)
    assert state.drop_waiting("k") is True
    assert state.drop_waiting("k") is False and not state.has_waiting("k")
    gate.set()
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=10_000)
    assert ran == [1] and got == [1]


def test_opening_a_store_a_cli_ingest_writes_logs_its_message_not_a_traceback(
        qtbot, data_dir, tmp_path):
    """The app's open job meets the CLI's writer lock: the message names the holder, and the
    log holds that line, not a traceback."""

    from app.gui.corpus_jobs import open_store_job
    from app.gui.logs import log_file, setup_logging
    from core.encoder.fingerprint import Fingerprint
    from index.opening import open_store
    setup_logging()
    open_store(tmp_path / "s", writable=True, create=True,
               fingerprint=Fingerprint("fake", "f" * 64, "mean", 8, True)).close()
    holder = hold_writer_lock(tmp_path / "s", "ingest")
    try:
        assert holder.stdout.readline().strip() == "held"
        runner = JobRunner()
        job = runner.start("open", open_store_job, tmp_path / "s", label="Opening the corpus")
        with qtbot.waitSignal(job.error, timeout=20000) as blocker:
            pass
        qtbot.waitUntil(lambda: not runner.busy)
        assert f"process {holder.pid}" in blocker.args[0]
        assert "Traceback" not in log_file().read_text(encoding="utf-8")
    finally:
        holder.kill()
        holder.wait()
