"""The architecture map's block labels stay readable in the real window (at least MIN_LABEL_PX
tall on screen; the map scrolls rather than shrinking them)."""
from __future__ import annotations

import pytest
from PySide6 import QtGui

from app.gui.panels.walkthrough.architecture_map import MIN_LABEL_PX, BlockItem


def label_px(view, block) -> float:
    """A block label's height on screen, in pixels."""
    metrics = QtGui.QFontMetricsF(block.text.font())
    return metrics.height() * block.text.scale() * view.transform().m22()


@pytest.mark.parametrize("size", [(1200, 780), (1600, 1000)])
def test_block_labels_are_readable(qtbot, make_window, tiny_store_template, size):
    w = make_window(tiny_store_template)
    w.resize(*size)
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == "Step by step"))
    panel = w.optional_panels["Step by step"]
    with qtbot.waitSignal(panel.explained, timeout=60_000):
        panel.explain_text("The cat sat on the mat because it was tired.", layer=2, head=1)
    panel.left_tabs.setCurrentWidget(panel.arch_map)
    qtbot.wait(100)
    view = panel.arch_map
    blocks = [i for i in view.scene().items() if isinstance(i, BlockItem)]
    assert blocks
    smallest = min(label_px(view, b) for b in blocks)
    assert smallest >= MIN_LABEL_PX, smallest
