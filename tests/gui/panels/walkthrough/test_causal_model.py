"""The Step by step tab on a causal model: the masked-scores step drawn with the −∞ triangle, its
note and a green badge (the walk itself: tests/core/walkthrough/test_causal.py)."""
import numpy as np
import pytest
import torch

from core.encoder.backends.scratch import RandomScratchBackend
from core.walkthrough.steps import TOLERANCE, explain

CAUSAL = "random:dim=32,layers=2,heads=4,ffn=64,attention=causal"


@pytest.fixture(scope="module")
def causal():
    return RandomScratchBackend(CAUSAL, torch.device("cpu"))


def test_app_step_view_draws_the_causal_triangle(qtbot, causal):
    from app.gui.panels.walkthrough.steps_view import GREEN, StepView, badge_text
    walk = explain(causal, "the cat sat on the mat", layer=1)
    view = StepView()
    qtbot.addWidget(view)
    step = walk.step("masked_scores")
    view.set_step(walk, step)
    assert np.array_equal(np.isneginf(view.heatmap.raw), np.isneginf(step.values))
    assert view.badge.text() == badge_text(step.max_abs_diff) and GREEN in view.badge.styleSheet()
    assert view.extra.isVisibleTo(view) and "Causal mask" in view.extra.text()
    view.set_step(walk, walk.step("scores"))                 # no note where nothing is masked
    assert "Causal mask" not in view.extra.text()


def test_step_by_step_tab_on_a_causal_model(qtbot, causal):
    """The tab itself: the masked-scores step of a causal model drawn with its note and a green
    badge; attention pooling asked of a model without a query is the one clear message."""
    from app.gui.panels.walkthrough.panel import WalkthroughPanel
    from app.gui.state import AppState
    state = AppState()
    panel = WalkthroughPanel(state, auto_explain=False)
    qtbot.addWidget(panel)
    panel.show()
    state.backend = causal
    state.backend_changed.emit(causal)
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.explain_text("the cat sat on the mat")
    walk = sig.args[0]
    panel.show_step("masked_scores")
    view = panel.step_view
    assert "Causal mask" in view.extra.text() and "causal" in view.title.text().lower()
    assert np.isneginf(view.heatmap.raw[0, 1]) and view.badge.text().startswith("=")
    assert walk.step("masked_scores").max_abs_diff <= TOLERANCE
    panel.pooling_combo.setCurrentText("attention")
    qtbot.waitUntil(lambda: "no learned query vector" in panel.info_label.text(), timeout=60000)
    state.shutdown(10000)
