"""Step by step at the default window (1200×780): the weighted sum of V gives each of its rows (a
token's term, then the sum) a readable height, and with Numbers on every matrix either prints
its numbers or says why not - the 13 × 32 Q, K, V and head output and the weighted sum too."""
from __future__ import annotations

from tests.gui.widgets.test_cell_numbers import painted

SENTENCE = "The cat sat on the mat because it was tired."      # 13 tokens with [CLS] and [SEP]


def test_the_weighted_sum_has_readable_rows_and_numbers_print_or_say_why(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Step by step")
    panel = w.optional_panels["Step by step"]
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        panel.explain_text(SENTENCE, layer=1, head=1)
    assert len(sig.args[0].tokens) == 13
    panel.show_step("weights")
    build = panel.step_view.build_up
    qtbot.waitUntil(lambda: build.isVisible() and build.rows.shape[0] == 14)
    hm = build.heatmap
    line = hm.fontMetrics().height()
    qtbot.waitUntil(lambda: hm.plot.vb.height() / 14 >= line, timeout=5_000)   # was 14 rows in ~85 px

    panel.step_view.numbers.setChecked(True)
    for name in ("q", "k", "v", "head_output", "weights"):
        panel.show_step(name)
        qtbot.wait(50)
        views = [panel.step_view.heatmap] + ([build.heatmap] if name == "weights" else [])
        for view in views:
            view.reset_zoom()
            qtbot.wait(30)
            said = view.values_hint.scene() is not None and "too small for numbers" in view.values_hint.text
            assert painted(view) or said, f"{name}: Numbers on, nothing printed and nothing said"
    assert painted(panel.step_view.heatmap)              # 13 × 13 weights: written in
