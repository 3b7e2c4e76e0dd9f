"""A click on the Attention tab's heatmap cuts that edge: the heatmap says so on hover, crosses the
cut cells out, and its side panel offers the way to the Causal tab's Edge cuts page."""
from __future__ import annotations

import pytest

from tests.support.app_fixtures import switch_model
from tests.support.causal_models import tiny_pair

TEXT = "the cat sat on the mat today"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("attention_cuts"))[0]


def test_an_attention_click_is_said_marked_and_leads_to_edge_cuts(qtbot, make_window, tiny):
    w = make_window(start=False)
    switch_model(w.state, tiny)
    w.show_panel("Attention")
    att = w.optional_panels["Attention"]
    with qtbot.waitSignal(att.inspected, timeout=60_000):
        att.inspect_text(TEXT)
    att.set_mode("head")
    att.set_layer_head(1, 2)                                          # head 2.3
    assert "click: cut this edge" in att.heatmap.tooltip_text(2, 1)
    causal = w.optional_panels["Causal"]
    with qtbot.waitSignal(causal.shown, timeout=60_000) as sig:
        att.heatmap.cell_clicked.emit(2, 1)                            # as a click on the cell does
    cut = next(iter(sig.args[1].spec.cuts))
    q, k = att.heatmap.positions.index(cut.query), att.heatmap.positions.index(cut.key)
    assert (q, k) == (2, 1) and att.heatmap.marked == [(2, 1)]
    assert "<b>cut</b>" in att.heatmap.tooltip_text(2, 1) and "<b>cut</b>" not in att.heatmap.tooltip_text(1, 2)
    att.set_layer_head(0, 2)                                          # another layer: nothing cut there
    assert att.heatmap.marked == []
    att.set_layer_head(1, 2)
    assert att.heatmap.marked == [(2, 1)] and "open Edge cuts" in att.cuts_label.text()
    att.cuts_label.linkActivated.emit("#cuts")                        # as a click on the link does
    assert w.tabs.currentWidget() is w._panel_tabs["Causal"] and causal.pages.currentWidget() is causal.cuts_view
