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
    walks = []
    walk.explained.connect(walks.append)
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
    # no walk of A without the patch came first (it would show the wrong numbers for a moment)
    assert walks and all(x.patched_from == B for x in walks if x.text == A)


def test_a_patch_the_intervene_tab_cannot_apply_is_said_in_step_by_step(qtbot, make_window, tiny):
    """Step by step waits for B's side of the patch; when the Intervene tab fails to apply it
    (here a site token A does not have), it says so rather than waiting on."""
    w = make_window(start=False)
    switch_model(w.state, tiny)
    walk = w.optional_panels["Step by step"]
    with qtbot.waitSignal(w.optional_panels["Intervene"].failed, timeout=60_000) as sig:
        w._open_patch(A, B, "L2.resid@zebra")                          # as a sweep cell's click does
    assert w.tabs.currentWidget() is w._panel_tabs["Step by step"]
    qtbot.waitUntil(lambda: "not applied" in walk.info_label.text(), timeout=10_000)
    assert "zebra" in sig.args[0] and walk.walkthrough is None


def test_a_refusal_that_arrives_before_the_tab_first_shows_stays_said(qtbot, make_window, tiny, monkeypatch):
    """The order that lost the refusal: the Intervene tab's failure reached Step by step before the
    tab's first show ran its deferred example walk, which then wrote over "not applied" (seen on a
    slower machine, where the worker fails before the window's tab switch is laid out)."""
    from app.gui.panels.walkthrough.panel import JOB_KEY, WalkthroughPanel
    from core.intervene.spec import parse_site
    ran = []
    auto = WalkthroughPanel._auto_explain
    monkeypatch.setattr(WalkthroughPanel, "_auto_explain", lambda self: (auto(self), ran.append(self)))
    w = make_window(start=False)
    switch_model(w.state, tiny)
    walk = w.optional_panels["Step by step"]                        # built on a hidden tab: not shown yet
    walk.follow_patch(A, parse_site("L2.resid@zebra")[0], applying=True)
    walk.patch_failed("token 'zebra' occurs 0 times in sentence A")
    ran.clear()                                                     # (its build ran it, hidden)
    w.show_panel("Step by step")                                    # its first show: the deferred example
    qtbot.waitUntil(lambda: walk in ran)
    assert "not applied" in walk.info_label.text() and "zebra" in walk.info_label.text()
    assert not w.state.jobs.is_running(JOB_KEY) and walk.walkthrough is None


def test_edge_cuts_walked_step_by_step_and_dropped_for_another_sentence_or_model(qtbot, make_window, tiny,
                                                                                   tmp_path):
    from core.encoder.backends import get_backend
    from core.intervene import effects as E
    from tests.support.tiny_models import make_tiny_distilbert
    w = make_window(start=False)
    switch_model(w.state, tiny)
    w.show_panel("Causal")
    causal = w.optional_panels["Causal"]
    causal.text_a.setText(A)
    causal.cuts_view.cuts.setText("2.3:sat>cat, 2:cat>0")
    assert not causal.cuts_view.walk_button.isEnabled()
    with qtbot.waitSignal(causal.shown, timeout=60_000) as sig:
        assert causal.run("cuts")
    spec = sig.args[1].spec
    walk = w.optional_panels["Step by step"]
    causal.cuts_view.walk_button.click()
    assert w.tabs.currentWidget() is w._panel_tabs["Step by step"]
    qtbot.waitUntil(lambda: walk.walkthrough is not None and walk.walkthrough.intervention is not None
                    and walk.current_step_name() == "masked_scores", timeout=60_000)
    shown = walk.walkthrough
    assert shown.intervention.cuts == spec.cuts and (shown.layer, shown.head) == (1, 2) and shown.text == A
    cat, sat = shown.tokens.index("cat"), shown.tokens.index("sat")
    masked = shown.step("masked_scores").values
    assert np.isneginf(masked[sat, cat]) and np.isneginf(masked[cat, 0]) and shown.worst_diff < 1e-10
    assert "attention edges cut" in walk.info_label.text()
    vp = walk.step_view.value_panel
    vp.show_cell(shown, shown.step("masked_scores"), sat, cat)
    assert "this attention edge is cut" in vp.label.text()
    vp.show_cell(shown, shown.step("masked_scores"), sat, 0)
    assert "edge is cut" not in vp.label.text()
    want = E.compare_vector(tiny, A, spec).after                          # the cut model's own vector
    np.testing.assert_allclose(shown.step("normalized").values, want, atol=2e-6)
    with qtbot.waitSignal(walk.explained, timeout=60_000) as sig:        # another sentence: its own positions
        walk.explain_text("a bird ran on the mat today")
    assert sig.args[0].intervention is None
    with qtbot.waitSignal(walk.explained, timeout=60_000):
        walk.explain_text(A)
    assert walk.walkthrough.intervention is None                       # the cuts went with their sentence
    causal.cuts_view.walk_button.click()
    qtbot.waitUntil(lambda: walk.walkthrough is not None and walk.walkthrough.intervention is not None,
                    timeout=60_000)
    other = get_backend(str(make_tiny_distilbert(tmp_path / "other", n_layers=2, n_heads=4, seed=3)), "scratch",
                        device="cpu", precision="fp32")
    switch_model(w.state, other)                                       # positions of the last model's tokens
    qtbot.waitUntil(lambda: walk.walkthrough is not None and walk.walkthrough.model == other.model_name,
                    timeout=60_000)
    assert walk.walkthrough.intervention is None and not causal.cuts_view.walk_button.isEnabled()


def test_cuts_are_walked_alone_and_no_old_walk_shows_while_a_new_one_computes(qtbot, make_window, tiny):
    """Edge cuts ▸ Step by step walks the page's cuts alone (what the Intervene tab holds is named, not
    applied), and a walk of another sentence or intervention hides the last one until it arrives."""
    from app.gui.current_intervention import current_intervention
    from core.intervene.spec import Intervention
    w = make_window(start=False)
    switch_model(w.state, tiny)
    walk = w.optional_panels["Step by step"]
    with qtbot.waitSignal(walk.explained, timeout=60_000):
        walk.explain_text(B)
    current_intervention(w.state).set(Intervention(heads=frozenset({(0, 1)})))     # the Intervene tab's
    causal = w.optional_panels["Causal"]
    causal.text_a.setText(A)
    causal.cuts_view.cuts.setText("2.3:sat>cat")
    with qtbot.waitSignal(causal.shown, timeout=60_000) as sig:
        assert causal.run("cuts")
    spec = sig.args[1].spec
    with qtbot.waitSignal(walk.explained, timeout=60_000) as walked:
        causal.cuts_view.walk_button.click()
        assert walk.walkthrough is None and walk.step_list.count() == 0      # B's walk is not shown meanwhile
        assert "computing" in walk.info_label.text()
    assert walked.args[0].intervention == spec and walked.args[0].text == A
    assert "heads 1.2 zeroed is not applied here" in walk.info_label.text()
    step = walked.args[0].step("masked_scores")                      # the cut worded, not the padding mask
    assert "padding" not in step.formula + step.description and "sat(3)>cat(2)" in step.description
    assert "1 of" in step.shape_text and "cut" in step.title
    mask = walk.arch_map.items["masked_scores"]
    assert not mask.text.font().strikeOut() and "cut" in mask.patched
    with qtbot.waitSignal(walk.explained, timeout=60_000):
        w._open_patch(A, B, "L2.H3")                                   # a sweep cell's click
        assert walk.walkthrough is None and "Applying the patch" in walk.info_label.text()
