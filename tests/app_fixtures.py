"""Fixtures for the app tests: an isolated data folder, a prebuilt sample store, a window.

Import them into a test module with ``from tests.app_fixtures import *``.
"""
from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest

ASSETS = Path(__file__).resolve().parent.parent / "assets"
__all__ = ["data_dir", "sample_store_template", "tiny_store_template", "make_window",
           "wait_idle", "ASSETS", "noop_progress", "make_walkthrough_panel", "explain_and_wait"]


def noop_progress(*_a, **_k):
    pass


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """ENCODERSCOPE_DATA_DIR -> a fresh tmp folder: stores, settings.ini and logs go there."""
    folder = tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(folder))
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    monkeypatch.delenv("ENCODERSCOPE_STORE", raising=False)
    return folder


def _build(folder: Path, minilm, texts=None):
    from app.gui.corpus_service import create_store_job, ingest_job

    if texts is None:
        store, _ = create_store_job(folder, minilm, "mean", sample=ASSETS / "sample_corpus.txt",
                                    progress=noop_progress, cancel=threading.Event())
    else:
        store, _ = create_store_job(folder, minilm, "mean", sample=None, progress=noop_progress,
                                    cancel=threading.Event())
        ingest_job(store, minilm, "mean", texts, progress=noop_progress, cancel=threading.Event())
    store.close()
    return folder


@pytest.fixture(scope="session")
def sample_store_template(tmp_path_factory, minilm):
    """The bundled sample corpus, embedded once per test session with minilm (mean)."""
    return _build(tmp_path_factory.mktemp("sample_template") / "sample", minilm)


@pytest.fixture(scope="session")
def tiny_store_template(tmp_path_factory, minilm):
    lines = (ASSETS / "sample_corpus.txt").read_text(encoding="utf-8").splitlines()[:24]
    return _build(tmp_path_factory.mktemp("tiny_template") / "tiny", minilm, lines)


def wait_idle(qtbot, window, timeout=60_000):
    """Wait until no background job runs."""
    qtbot.waitUntil(lambda: not window.state.jobs.busy, timeout=timeout)


@pytest.fixture
def make_window(qtbot, data_dir):
    """make_window(template=None) -> a shown MainWindow on a copy of a template store, loaded."""
    windows = []

    def make(template: Path | None = None, start=True, wait=True):
        from app.gui.main_window import MainWindow
        from app.gui.settings import stores_dir

        folder = stores_dir() / "sample"
        if template is not None and not folder.exists():
            shutil.copytree(template, folder)
        w = MainWindow()
        qtbot.addWidget(w)
        w.show()
        windows.append(w)
        if start:
            w.start(folder)
            if wait:
                qtbot.waitUntil(lambda: w.state.backend is not None and w.state.store is not None
                                and not w.state.jobs.busy, timeout=60_000)
        return w

    yield make
    for w in windows:
        if w.isVisible():
            w.close()
        w.state.jobs.shutdown(20_000)


@pytest.fixture
def make_walkthrough_panel(qtbot):
    """make(backend, width, height) -> a shown Step by step panel on its own AppState holding
    ``backend``, explaining nothing until asked; its jobs are shut down after the test."""
    from app.gui.panels.walkthrough.panel import WalkthroughPanel
    from app.gui.state import AppState

    states = []

    def make(backend, width=1200, height=800):
        state = AppState()
        states.append(state)
        panel = WalkthroughPanel(state, auto_explain=False)
        qtbot.addWidget(panel)
        panel.resize(width, height)
        panel.show()
        state.backend = backend
        state.backend_changed.emit(backend)
        return panel

    yield make
    for state in states:
        state.shutdown(10000)


def explain_and_wait(qtbot, panel, text, **kw):
    """Explain ``text`` in a Step by step panel; the walkthrough it shows."""
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.explain_text(text, **kw)
    return sig.args[0]
