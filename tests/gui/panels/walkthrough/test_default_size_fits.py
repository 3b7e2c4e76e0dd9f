"""Step by step at the default window (1200×780 gives the tab about 1200×645): the embeddings steps'
maps are whole in the page's view (only the table of a wide matrix under them may scroll), a 13 × 13
score matrix fits the page with every row labelled (no scroll), the weight strip's
titles are whole on one line, and a patched step ("Patched from B") gets a heatmap tall enough
for its rows, each row's label whole ("[CLS] ← [CLS] (B)", not "[CLS] ← [CLS] (…")."""
from __future__ import annotations

import re

import pytest
from PySide6 import QtGui

from core.intervene.patching import patched_run
from core.intervene.spec import NOTHING, parse_site
from core.walkthrough import patched as P
from core.walkthrough import steps as W
from tests.support.tiny_models import make_tiny_bert

TAB = (1200, 645)          # the Step by step tab's size in the main window at 1200×780
A = "the cat sat on the mat and the dog ran ."          # 13 tokens with [CLS] and [SEP]
B = "the bird sat on the mat and the dog ran ."
EMBEDDING_STEPS = ("token_embeddings", "position_embeddings", "token_type_embeddings", "embeddings_sum")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from core.encoder.backends import get_backend
    folder = make_tiny_bert(tmp_path_factory.mktemp("walk_fits") / "m", dim=128, hidden_dim=256, n_layers=2,
                            n_heads=4, mlm=False)       # 128 wide: summarised in a table under the map
    return get_backend(str(folder), "scratch", device="cpu")


def shown(qtbot, make_walkthrough_panel, backend, walk):
    panel = make_walkthrough_panel(backend, *TAB)
    panel._last_request = (walk.text, "", False, walk.layer, walk.head, "mean")
    panel.set_result(walk, backend)
    qtbot.waitUntil(lambda: panel.walkthrough is walk)
    return panel


def fits(qtbot, panel) -> bool:
    page = panel.page
    return settled(qtbot, lambda: page.widget().height() <= page.viewport().height()
                   and not page.verticalScrollBar().isVisible())


def settled(qtbot, check, ms: int = 3000) -> bool:
    """``check()`` once the page's layout has settled: polled up to ``ms`` (a loaded machine lays out late)."""
    try:
        qtbot.waitUntil(check, timeout=ms)
    except AssertionError:
        return False
    return True


def heatmap_whole_in_view(panel) -> bool:
    """The step's heatmap is wholly in the page's view, unscrolled (a table under it may scroll)."""
    heat = panel.step_view.heatmap
    bottom = heat.mapTo(panel.page.viewport(), heat.rect().bottomLeft()).y()
    return panel.page.verticalScrollBar().value() == 0 and bottom <= panel.page.viewport().height()


def one_line(label) -> bool:
    plain = re.sub(r"<[^>]+>", "", label.text()).replace("&amp;", "&")
    return QtGui.QFontMetrics(label.font()).horizontalAdvance(plain) <= label.contentsRect().width()


def test_the_embeddings_steps_and_13_by_13_scores_fit_with_every_row_labelled(qtbot, make_walkthrough_panel,
                                                                              tiny):
    walk = W.explain(tiny, A, layer=0, head=0, pooling="mean")
    assert len(walk.tokens) == 13
    panel = shown(qtbot, make_walkthrough_panel, tiny, walk)
    names = [s.name for s in walk.steps]
    for name in names[:names.index("scores") + 1]:       # in order: a step shown before must not make the next scroll
        panel.show_step(name)
        heat, page = panel.step_view.heatmap, panel.page
        assert settled(qtbot, lambda: heatmap_whole_in_view(panel)), (
            f"{name}: the step's map is cut at the page's bottom: it ends at "
            f"{heat.mapTo(page.viewport(), heat.rect().bottomLeft()).y()} of {page.viewport().height()} px")
        if not panel.step_view.wide_summary.isVisible():
            assert fits(qtbot, panel), f"{name}: the page scrolls"
        heat = panel.step_view.heatmap
        if name in EMBEDDING_STEPS + ("scores",):
            assert heat.left_axis.visible_labels() == list(range(13)), f"{name}: rows without their label"
        if name in ("embeddings_layernorm", "q"):
            for box in (panel.step_view.weights_strip.input_box, panel.step_view.weights_strip.first,
                        panel.step_view.weights_strip.second, panel.step_view.weights_strip.output_box):
                assert one_line(box.title), f"{box.title.text()!r} does not fit its {box.title.width()} px"


def test_a_patched_step_has_room_for_its_rows_and_their_whole_labels(qtbot, make_walkthrough_panel, tiny):
    spec, _, alignment, _ = patched_run(tiny, A, B, [parse_site("L2.H3")], NOTHING)
    walk = W.explain(tiny, A, layer=1, head=2, pooling="mean", intervention=spec,
                     patch_from=P.PatchFrom(A, B, alignment))
    panel = shown(qtbot, make_walkthrough_panel, tiny, walk)
    panel.show_step("patched_head")
    assert fits(qtbot, panel)
    heat = panel.step_view.heatmap
    rows = walk.step("patched_head").row_labels
    assert "[CLS] ← [CLS] (B)" in rows and "cat ← bird (B)" in rows
    assert heat.left_axis.labels == list(rows)                       # none cut with "…"
    line = QtGui.QFontMetrics(heat.font()).height()
    assert heat.plot.vb.height() >= len(rows) * line, f"{heat.plot.vb.height():.0f} px for {len(rows)} rows"
    assert heat.left_axis.visible_labels() == list(range(len(rows)))
    panel.show_step("head_output")                      # a plain step gets its usual label room back
    assert max(len(t) for t in heat.left_axis.labels) <= 16
