"""The Causal tab in the main window (minilm): a click on the Attention heatmap cuts that edge in
the Causal tab (the numbers `ablate --cut` gives), and a sweep cell applies its one patch in the
Intervene tab and opens it in Step by step."""
from __future__ import annotations

import pytest

from core.intervene import effects as E
from core.intervene.edges import Cut
from core.intervene.spec import Intervention, Site

TEXT = "the cat sat on the mat"


@pytest.mark.slow
def test_an_attention_click_cuts_and_a_sweep_cell_patches(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.show_panel("Attention")
    att = w.optional_panels["Attention"]
    with qtbot.waitSignal(att.inspected, timeout=60_000):
        att.inspect_text(TEXT)
    att.set_mode("head")
    att.set_layer_head(5, 11)                                     # head 6.12
    causal = w.optional_panels["Causal"]
    with qtbot.waitSignal(causal.shown, timeout=60_000) as sig:
        att.heatmap.cell_clicked.emit(2, 2)                        # "cat" -> "cat", as a click does
    page, result = sig.args
    assert page == "cuts" and result.spec == Intervention(cuts={Cut(5, 11, 2, 2)})
    want = E.compare_vector(w.state.inspect_backend, TEXT, result.spec)
    assert result.cosine == pytest.approx(want.cosine, abs=1e-7) and result.cosine < 0.9999
    assert causal.cuts_view.cuts.text() == "6.12:2>2"

    causal.text_a.setText(TEXT)
    causal.text_b.setText("the dog sat on the mat")
    with qtbot.waitSignal(causal.shown, timeout=120_000):
        causal.run("sweep", {"kind": "heads"})
    intervene = w.optional_panels["Intervene"]
    with qtbot.waitSignal(intervene.effects_shown, timeout=120_000) as sig:
        causal.sweep_view.heatmap.cell_clicked.emit(5, 11)
    assert sig.args[0].spec.patch == (Site("head", 5, 11),)
    assert w.tabs.currentWidget() is w._panel_tabs["Step by step"]
    walk = w.optional_panels["Step by step"]                       # minilm walked with B's head 6.12
    qtbot.waitUntil(lambda: walk.walkthrough is not None and walk.walkthrough.patched_from == "the dog sat on the mat"
                    and walk.current_step_name() == "patched_head", timeout=120_000)
    assert (walk.walkthrough.layer, walk.walkthrough.head) == (5, 11) and walk.walkthrough.worst_diff < 1e-9
    fraction = causal.sweep_view.result.values[5, 11]
    assert fraction > 0.5                                          # head 6.12 carries most of the way to B
