"""The Features tab's tests' shared pieces: the tiny models (ours, another, transformers' reference), a
tiny corpus file, a panel on a fresh AppState, and one SAE trained and indexed through the tab's worker
function (session-scoped: trained once for every test module here)."""
from __future__ import annotations

import pytest

from tests.support.feature_models import tiny_bert_pair, tiny_corpus

SETTINGS = {"width": 64, "k": 4, "tokens": 3000, "batch": 256, "seed": 0}


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    """(the tiny MLM model, another model, transformers' BertModel of the first: the reference)."""
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    folder = tmp_path_factory.mktemp("features_panel")
    ours, ref = tiny_bert_pair(folder / "pair")
    other = get_backend(str(make_tiny_distilbert(folder / "other", n_layers=1, n_heads=2, seed=2)), "scratch",
                        device="cpu", precision="fp32")
    return ours, other, ref


@pytest.fixture(scope="session")
def corpus_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("features_corpus") / "corpus.txt"
    path.write_text("\n".join(tiny_corpus(120)) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def make_panel(qtbot):
    from app.gui.panels.features.panel import FeaturesPanel
    from app.gui.state import AppState
    states = []

    def make(backend):
        state = AppState()
        states.append(state)
        panel = FeaturesPanel(state)
        qtbot.addWidget(panel)
        panel.resize(1200, 800)
        panel.show()
        switch_model(state, backend)
        return panel

    yield make
    for state in states:
        state.shutdown(20_000)


def switch_model(state, backend):
    state.backend = backend
    state.backend_changed.emit(backend)


@pytest.fixture(scope="session")
def trained(tmp_path_factory, models, corpus_file):
    """One SAE trained and indexed through the tab's worker function, shared by the read-only tests."""
    import threading

    from app.gui.panels.features import compute as C
    folder = tmp_path_factory.mktemp("sae") / "sae"
    settings = {**SETTINGS, "site": "L2.resid"}
    return C.train_fn(models[0], C.Sentences("file", file=str(corpus_file)), settings, folder,
                      progress=lambda *a: None, cancel=threading.Event())
