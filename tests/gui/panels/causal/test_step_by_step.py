"""A patching-sweep cell in the window: its one patch applied in the Intervene tab, and Step by step
opened at the cell's layer (and head) walking A with B's numbers there, the "Patched from B"
step shown, every step equal to the patched model."""
from __future__ import annotations

import numpy as np
import pytest

from core.intervene.spec import Site
from tests.support.app_fixtures import switch_model
from tests.support.causal_models import tiny_pair

A, B = "the cat sat on the mat today", "the dog ran on the mat today"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("causal_step_by_step"))[0]


@pytest.mark.parametrize("kind, cell, site, step", [
    ("heads", (1, 2), Site("head", 1, 2), "patched_head"),
    ("resid", (2, 2), Site("resid", 2, token=2), "patched_resid"),
])
def test_a_sweep_cell_opens_its_patch_in_step_by_step(qtbot, make_window, tiny, kind, cell, site, step):
    w = make_window(start=False)
    switch_model(w.state, tiny)
    w.show_panel("Causal")
    causal = w.optional_panels["Causal"]
    causal.text_a.setText(A)
    causal.text_b.setText(B)
    causal.target.setText("")
    with qtbot.waitSignal(causal.shown, timeout=60_000):
        assert causal.run("sweep", {"kind": kind})
    walk = w.optional_panels["Step by step"]
    intervene = w.optional_panels["Intervene"]
    with qtbot.waitSignal(intervene.effects_shown, timeout=60_000) as sig:
        causal.sweep_view.heatmap.cell_clicked.emit(*cell)              # as a click on the cell does
    assert sig.args[0].spec.patch == (site,)
    assert w.tabs.currentWidget() is w._panel_tabs["Step by step"]
    qtbot.waitUntil(lambda: walk.walkthrough is not None and walk.walkthrough.patched_from == B
                    and walk.current_step_name() == step, timeout=60_000)
    shown = walk.walkthrough
    assert shown.layer == site.layer and (site.head is None or shown.head == site.head)
    assert shown.text == A and shown.intervention.patch == (site,)
    assert shown.worst_diff < 1e-10
    assert "patched from B" in walk.info_label.text() and site.describe() in walk.info_label.text()
    # the walk's sentence vector is the one the Intervene tab shows after the patch
    np.testing.assert_allclose(shown.step("normalized").values, sig.args[0].vector.after, atol=2e-6)
