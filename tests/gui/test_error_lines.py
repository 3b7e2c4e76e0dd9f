"""Expected user errors (a hub model while offline, too many masks, a binary file) are one log
line - the message the user sees - never a traceback in the terminal or the log."""
from __future__ import annotations

import logging

import pytest

from app.gui.state import AppState, ModelChoice, load_backend_fn


@pytest.fixture
def state(qtbot, data_dir):
    s = AppState()
    yield s
    s.shutdown(10_000)


def run_job(qtbot, state, fn, *args, **kwargs):
    errors = []
    job = state.run("expected-error", fn, *args, label="Expected error", on_error=errors.append, **kwargs)
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=60_000)
    assert job is not None and len(errors) == 1
    return errors[0]


def assert_one_line(caplog, capsys, message):
    records = [r for r in caplog.records if r.name.startswith("encoderscope") and r.levelno >= logging.WARNING]
    assert records, "the error was not logged"
    for r in records:
        text = r.getMessage()
        assert "\n" not in text and "Traceback" not in text and r.exc_info is None, text
    assert message.splitlines()[0] in records[-1].getMessage()
    err = capsys.readouterr().err
    assert "Traceback" not in err


def test_a_hub_model_while_offline(qtbot, state, caplog, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    caplog.set_level(logging.INFO)
    message = run_job(qtbot, state, load_backend_fn, ModelChoice(model="someone/a-model-never-downloaded"),
                      wants_progress=True)
    assert "someone/a-model-never-downloaded" in message and "unexpected" not in message
    assert_one_line(caplog, capsys, message)


def test_thirty_masks(qtbot, state, caplog, capsys, tiny_distilbert):
    from app.gui.panels.fillmask.panel import predict_fn
    from core.encoder.backends import get_backend
    caplog.set_level(logging.INFO)
    backend = get_backend(str(tiny_distilbert))
    message = run_job(qtbot, state, predict_fn, backend, " ".join(["the [MASK]"] * 30), 5, wants_progress=False)
    assert "30 masks" in message
    assert_one_line(caplog, capsys, message)


def test_a_binary_file(qtbot, make_window, tiny_store_template, caplog, capsys, tmp_path):
    caplog.set_level(logging.INFO)
    w = make_window(tiny_store_template)
    path = tmp_path / "picture.txt"
    path.write_bytes(bytes(range(256)) * 64)
    shown = []
    w.state.error.connect(shown.append)
    w.corpus_panel.import_file(path)
    qtbot.waitUntil(lambda: bool(shown) and not w.state.jobs.busy, timeout=60_000)
    assert "binary" in shown[0]
    assert_one_line(caplog, capsys, shown[0])


def test_through_the_window_a_hub_model_and_thirty_masks(qtbot, make_window, tiny_store_template, caplog, capfd,
                                                          tiny_distilbert, monkeypatch):
    """The same errors reached the way a user reaches them: the Inspect-with box and Fill-mask."""
    from PySide6.QtCore import Qt
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    caplog.set_level(logging.INFO)
    w = make_window(tiny_store_template)
    shown = []
    w.state.error.connect(shown.append)
    bar = w.inspect_bar
    bar.weights.setCurrentText("someone/a-model-never-downloaded")
    bar.weights.lineEdit().setFocus()
    qtbot.keyClick(bar.weights.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: bool(shown) and not w.state.jobs.busy, timeout=60_000)
    assert "someone/a-model-never-downloaded" in shown[0]
    fill = w.optional_panels["Fill-mask"]
    w.state.set_inspect_choice(w.state.choice.with_(model=str(tiny_distilbert)))
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None and not w.state.jobs.busy, timeout=60_000)
    fill.text_edit.setText(" ".join(["the [MASK]"] * 30))
    fill.predict()
    qtbot.waitUntil(lambda: not w.state.jobs.busy, timeout=60_000)
    qtbot.wait(100)
    records = [r for r in caplog.records if r.name.startswith("encoderscope") and r.levelno >= logging.WARNING]
    assert any("30 masks" in r.getMessage() for r in records)
    for r in records:
        assert "\n" not in r.getMessage() and r.exc_info is None, r.getMessage()
    out, err = capfd.readouterr()
    assert "Traceback" not in err and "Traceback" not in out


def test_a_file_the_system_refuses_is_one_line_too(qtbot, state, caplog, capsys, tmp_path):
    def save(path):
        raise PermissionError(13, "Permission denied", str(path))
    caplog.set_level(logging.INFO)
    message = run_job(qtbot, state, save, tmp_path / "out.csv", wants_progress=False)
    assert "Permission denied" in message and "unexpected" not in message
    assert_one_line(caplog, capsys, message)


def test_an_unexpected_error_keeps_its_traceback_in_the_log(qtbot, state, caplog):
    def broken():
        raise ZeroDivisionError("a bug")
    caplog.set_level(logging.INFO)
    message = run_job(qtbot, state, broken, wants_progress=False)
    assert "unexpected ZeroDivisionError" in message
    assert any("Traceback" in r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR)
