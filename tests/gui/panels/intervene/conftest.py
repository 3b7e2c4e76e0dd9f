"""The Intervene panel tests' shared pieces: two tiny masked-LM models (2 layers x 4 heads, 1 x 2) and
a factory of panels on them, each with its own AppState shut down after the test."""
from __future__ import annotations

import pytest

from tests.support.app_fixtures import switch_model

TEXT = "the cat sat on the mat ."
MASKED = "the cat sat on the [MASK] ."


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    root = tmp_path_factory.mktemp("intervene_models")
    big = make_tiny_distilbert(root / "two", n_layers=2, n_heads=4, seed=1)
    small = make_tiny_distilbert(root / "one", n_layers=1, n_heads=2, seed=2)
    return (get_backend(str(big), "scratch", device="cpu", precision="fp32"),
            get_backend(str(small), "scratch", device="cpu", precision="fp32"))


@pytest.fixture
def make_panel(qtbot, tmp_path, monkeypatch):
    """make_panel(backend, size=(1300, 900), masked="") -> an InterventionPanel on `backend`, TEXT typed."""
    from app.gui.panels import model_calls
    from app.gui.panels.intervene import panel as P
    from app.gui.state import AppState
    monkeypatch.setattr(model_calls, "importance_cache_dir", lambda: tmp_path / "importance")
    states = []

    def make(backend, size=(1300, 900), masked=""):
        state = AppState()
        states.append(state)
        panel = P.InterventionPanel(state)
        qtbot.addWidget(panel)
        panel.resize(*size)
        panel.text_edit.setText(TEXT)
        if masked:
            panel.masked_edit.setText(masked)
        panel.show()
        switch_model(state, backend)
        return panel

    yield make
    for state in states:
        state.shutdown(10_000)
