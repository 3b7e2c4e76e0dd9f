"""The Train ▸ Run page fits the window at 1200 x 780 and 1600 x 1000: the page does not scroll,
Start and Cancel are on screen, the loss plot and the heads grid lie inside the window."""
from __future__ import annotations

import pytest
from PySide6 import QtCore, QtWidgets


def inside(widget, window) -> bool:
    top_left = widget.mapTo(window, QtCore.QPoint(0, 0))
    rect = QtCore.QRect(top_left, widget.size())
    return widget.isVisible() and window.rect().contains(rect)


@pytest.mark.parametrize("size", [(1200, 780), (1600, 1000)])
def test_the_run_page_fits_the_window(qtbot, make_window, tiny_store_template, size):
    w = make_window(tiny_store_template)
    w.resize(*size)
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == "Train"))
    panel = w.optional_panels["Train"].run_panel
    qtbot.waitExposed(panel)
    qtbot.wait(100)
    holder = panel.parentWidget()
    while holder is not w and not isinstance(holder, QtWidgets.QScrollArea):
        holder = holder.parentWidget()
    assert holder is w or holder.verticalScrollBar().maximum() == 0, "the page itself does not scroll"
    assert w.height() == size[1]
    for b in (panel.start_button, panel.cancel_button):
        assert inside(b, w), b.text()
    assert inside(panel.plot, w)
    views = panel.views
    views.setCurrentIndex(next(i for i in range(views.count()) if views.tabText(i) == "Heads"))
    qtbot.wait(50)
    assert inside(views.head_grid, w)
    assert views.head_grid.height() >= 250
