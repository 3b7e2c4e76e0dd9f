"""Helpers of the app tests (the fixtures they use are in tests/conftest.py): the assets folder,
a store built with minilm, waiting for the window's jobs and for a walkthrough."""
from __future__ import annotations

import threading
from pathlib import Path

from tests.support.paths import ROOT

ASSETS = ROOT / "assets"


def noop_progress(*_a, **_k):
    pass


def build_store(folder: Path, minilm, texts=None):
    from app.gui.corpus_jobs import create_store_job, ingest_job

    if texts is None:
        store, _ = create_store_job(folder, minilm, "mean", sample=ASSETS / "sample_corpus.txt",
                                    progress=noop_progress, cancel=threading.Event())
    else:
        store, _ = create_store_job(folder, minilm, "mean", sample=None, progress=noop_progress,
                                    cancel=threading.Event())
        ingest_job(store, minilm, "mean", texts, progress=noop_progress, cancel=threading.Event())
    store.close()
    return folder


def wait_idle(qtbot, window, timeout=60_000):
    """Wait until no background job runs."""
    qtbot.waitUntil(lambda: not window.state.jobs.busy, timeout=timeout)


def explain_and_wait(qtbot, panel, text, **kw):
    """Explain ``text`` in a Step by step panel; the walkthrough it shows."""
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.explain_text(text, **kw)
    return sig.args[0]


def switch_model(state, backend):
    """What the model bar does when a model has loaded: the app's backend, and the signal the views follow."""
    state.backend = backend
    state.backend_changed.emit(backend)
