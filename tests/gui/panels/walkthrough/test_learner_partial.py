"""Step by step at the default window, partly fixed before: the architecture map fits its column
with labels that wrap instead of shrinking (D8); Batch of two says no line twice (D13); no step is
wider than its page (D16)."""
from __future__ import annotations

import re

import pytest


@pytest.mark.slow     # 12-14 s at load 12 (six helpers on 2 cores)
def test_the_architecture_map_fits_its_column_with_labels_that_wrap_not_shrink(qtbot, make_window,
                                                                               tiny_store_template):
    """D8: at the default window the map needs no horizontal scrollbar, and no block's label is
    shrunk below the others (a long one goes onto two lines): every label at least MIN_LABEL_PX."""
    from app.gui.panels.walkthrough.architecture_map import MIN_LABEL_PX, BlockItem
    from tests.support.app_fixtures import explain_and_wait
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Step by step")
    panel = w.optional_panels["Step by step"]
    explain_and_wait(qtbot, panel, "The cat sat on the mat because it was tired.", layer=0, head=0)
    arch = panel.arch_map
    qtbot.waitUntil(lambda: arch.isVisible() and bool(arch.items), timeout=5_000)
    qtbot.wait(50)
    assert not arch.horizontalScrollBar().isVisible()
    k = arch.transform().m11()
    blocks = [b for b in arch.scene().items() if isinstance(b, BlockItem)]
    assert blocks
    for b in blocks:
        assert b.text.scale() == 1.0, f"{b.block.label!r} shrunk to {b.text.scale():.2f}"
        from PySide6 import QtGui
        on_screen = QtGui.QFontMetricsF(b.text.font()).height() * k
        assert on_screen >= MIN_LABEL_PX - 0.01


@pytest.mark.slow     # 12-14 s at load 12 (six helpers on 2 cores)
def test_batch_of_two_says_no_line_twice(qtbot, make_window, tiny_store_template):
    """D13: a note the tab's info line says (the steps ran in fp32, the model is loaded in bf16) is
    not said again in the batch's own (the note only appears where the model runs in bf16, so it
    is set here whatever this CPU does)."""
    from dataclasses import replace

    from PySide6 import QtWidgets
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Step by step")
    panel = w.optional_panels["Step by step"]
    panel.text_edit.setText("The dog slept.")
    panel.other_edit.setText("The animal didn't cross the street because it was too tired.")
    with qtbot.waitSignal(panel.batch_view.shown, timeout=60_000):
        panel.set_view(2)
    qtbot.waitUntil(lambda: not w.state.jobs.busy, timeout=60_000)
    note = "the steps run on the CPU in fp32 (the model is loaded for cpu (2 threads), bf16)"
    panel.info_label.setText(f"{panel.info_label.text()}<br><span>{note}</span>")
    panel.batch_view.set_result(replace(panel.batch_view.result, note=note))
    lines = []
    for label in panel.findChildren(QtWidgets.QLabel):
        if label.isVisible():
            lines += [re.sub(r"<[^>]+>", "", s).strip() for s in re.split(r"<br>|\n", label.text())]
    lines = [s for s in lines if len(s) > 12]
    assert note in lines
    assert len(lines) == len(set(lines)), [s for s in lines if lines.count(s) > 1]


@pytest.mark.slow     # every step of a walk at 1200×780: ~15 s at load 12
def test_no_step_is_wider_than_its_page_at_the_default_size(qtbot, make_window, tiny_store_template):
    """D16: at 1200×780 every step fits the page's width (the page has no horizontal scrollbar, so
    what was wider was cut: the input's title, the output strip, the "= model" badge)."""
    from tests.support.app_fixtures import explain_and_wait
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Step by step")
    panel = w.optional_panels["Step by step"]
    walk = explain_and_wait(qtbot, panel, "The cat sat on the mat because it was tired.", layer=0, head=0)
    page = panel.page
    for step in walk.steps:
        panel.show_step(step.name)
        qtbot.wait(20)
        content = page.widget()
        assert content.minimumSizeHint().width() <= page.viewport().width(), step.name
        assert content.width() <= page.viewport().width(), step.name
        badge = panel.step_view.badge
        if badge.isVisible():
            right = badge.mapTo(page.viewport(), badge.rect().topRight()).x()
            assert right <= page.viewport().width(), f"{step.name}: the badge is cut"
