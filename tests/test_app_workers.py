"""app/workers.py: jobs run off the UI thread, report progress/result/error, cancel, no double starts."""
from __future__ import annotations

import threading
import time

import pytest

from app.workers import JobRunner
from core.errors import Cancelled, InputError

from tests.app_fixtures import data_dir  # noqa: F401


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


def test_readable_errors_and_log(qtbot, data_dir):  # noqa: F811
    from app.logs import log_file, setup_logging
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
    from app.state import AppState
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


def test_pyside_refcount_guard(qtbot):
    """PySide6 6.12 on Python 3.11 leaks references of None/True/False (app/pyside_fix.py)."""
    import sys

    from PySide6.QtCore import QObject, Signal
    from PySide6.QtWidgets import QLabel

    import app  # noqa: F401 - installs the guard

    class Emitter(QObject):
        fired = Signal()

    e, label = Emitter(), QLabel()
    for _ in range(20_000):
        e.fired.emit()
        label.setText("x")
    assert sys.getrefcount(None) > 1 << 30 or sys.version_info >= (3, 12)
    assert sys.getrefcount(True) > 1 << 30 or sys.version_info >= (3, 12)
