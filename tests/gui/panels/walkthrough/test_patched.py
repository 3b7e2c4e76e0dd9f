"""Step by step follows a patch applied in the Intervene tab: sentence A walked with B's numbers at
the site, the "Patched from B" step shown (follow_patch), its badge green, the map's patched
block marked; a model switch clears the patch from the walk."""
from __future__ import annotations

import numpy as np
import pytest

from core.intervene.spec import parse_site
from tests.support.app_fixtures import switch_model
from tests.support.causal_models import tiny_pair_and_another

A, B = "the cat sat on the mat today", "the dog ran on the mat today"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_pair_and_another(tmp_path_factory.mktemp("walk_panel_patched"))


def test_the_walk_follows_the_intervene_tabs_patch_and_a_model_switch_clears_it(
        qtbot, make_walkthrough_panel, models):
    from app.gui.current_intervention import current_intervention
    from app.gui.panels.intervene.panel import InterventionPanel
    from core.walkthrough.steps import explain
    backend, other = models
    panel = make_walkthrough_panel(backend)
    intervene = InterventionPanel(panel.state)
    qtbot.addWidget(intervene)
    intervene.text_edit.setText(A)
    intervene.editor.text_b.setText(B)
    intervene.editor.sites.setText("L2.resid@cat")
    panel.follow_patch(A, parse_site("L2.resid@cat")[0])
    intervene.apply()
    qtbot.waitUntil(lambda: panel.walkthrough is not None and panel.walkthrough.patched_from == B, timeout=60_000)
    w = panel.walkthrough
    current = current_intervention(panel.state)
    assert current.patch_from.text_b == B and current.patch_from.model == backend.model_name
    assert w.layer == 1 and panel.layer_spin.value() == 2 and panel.text_edit.text() == A
    assert panel.current_step_name() == "patched_resid"                  # opened where B comes in
    view = panel.step_view
    assert "Patched from B: layer 2" in view.title.text() and view.badge.text().startswith("=")
    assert "cat ← dog (B)" in w.step("patched_resid").row_labels
    assert view.side.isHidden()           # whose numbers is said by the rows' labels, not a column of 1 and 0
    info = panel.info_label.text()
    assert "patched from B" in info and "L2.resid@2" in info and "NOT all equal" not in info
    patched = panel.arch_map.items["patched_resid"]
    assert patched.patched and not patched.switched_off        # B's numbers come in; nothing is off
    vp = view.value_panel
    vp.show_cell(w, w.step("patched_resid"), 2, 0)                     # the "cat" row: B's
    assert "sentence B's number" in vp.label.text()
    vp.show_cell(w, w.step("patched_resid"), 1, 0)
    assert "A's own number" in vp.label.text()
    want = explain(backend, A, layer=1, head=0, intervention=current.spec, patch_from=current.patch_from,
                   pooling=w.pooling)
    np.testing.assert_array_equal(w.step("normalized").values, want.step("normalized").values)

    switch_model(panel.state, other)                                   # B's alignment was the old model's
    qtbot.waitUntil(lambda: panel.walkthrough is not None and panel.walkthrough.model == other.model_name,
                    timeout=60_000)
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    assert current.patch_from is None and not current.spec.patch
    w = panel.walkthrough
    assert w.patched_from is None and not [s for s in w.steps if s.name.startswith("patched")]
    assert "patched_resid" not in panel.arch_map.items and "patched from B" not in panel.info_label.text()
