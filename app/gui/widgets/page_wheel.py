"""The mouse wheel scrolls the page, not the plot under the cursor, unless a modifier is held.

    wheel = PageWheel(scroll_area)
    wheel.watch(heatmap)            # any QGraphicsView (pyqtgraph plots): plain wheel -> page,
                                    # Ctrl/Shift/Alt + wheel -> the plot (zoom)

A plot inside a scrolling page otherwise swallows every wheel turn to zoom itself, and the
page stops scrolling as soon as the cursor crosses a heatmap.
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import Qt


class PageWheel(QtCore.QObject):
    """An event filter on plot viewports that hands plain wheel turns to a scroll area."""

    def __init__(self, scroll_area: QtWidgets.QAbstractScrollArea):
        super().__init__(scroll_area)
        self.scroll_area = scroll_area

    def watch(self, view: QtWidgets.QAbstractScrollArea) -> None:
        if not view.property("page_wheel_watched"):         # once per view, however often watch_all runs
            view.viewport().installEventFilter(self)
            view.setProperty("page_wheel_watched", True)

    def watch_all(self, root: QtWidgets.QWidget) -> None:
        """Every QGraphicsView under ``root`` (heatmaps and plots, present now)."""
        for view in root.findChildren(QtWidgets.QGraphicsView):
            self.watch(view)

    def eventFilter(self, obj, event) -> bool:
        if event.type() != QtCore.QEvent.Type.Wheel or event.modifiers() != Qt.KeyboardModifier.NoModifier:
            return False
        bar = self.scroll_area.verticalScrollBar()
        steps = event.angleDelta().y() / 120.0
        pixels = event.pixelDelta().y()
        bar.setValue(bar.value() - (pixels if pixels else round(steps * bar.singleStep() * 3)))
        event.accept()
        return True
