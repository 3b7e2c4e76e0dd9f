"""Where the tour's floating panel goes, and where a window opened during the tour goes.

The panel is a child of the main window, so no other window may lie over it: a window the
learner opens at a stop (Why?) is fitted beside the panel, and the panel itself looks for the
place, inside the current tab, that hides the least of what the stop asks the learner to use.
Costs per hidden pixel, highest first: another window of the app over the panel, a widget the
stop names, any other control (button, box, slider), the ringed widget (which may be large: a
quarter of it may be hidden, never more).
"""
from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QDialog,
    QGraphicsView,
    QHeaderView,
    QLineEdit,
    QScrollBar,
    QTabBar,
    QWidget,
)

MARGIN = 12                       # the panel's distance from the tab's edges
STEP_Y = 16                       # candidate places: every 16 px down the tab ...
COLUMNS = 6                       # ... in this many columns between the left and right edge
WINDOW_COST = 1_000_000           # per pixel of another window over the panel
NAMED_COST = 1_000                # per pixel of a widget the stop's text names
CONTROL_COST = 20                 # per pixel of any other control
VIEW_COST = 2                     # per pixel of a plot, heatmap or table (data: hide words first)
RING_COST = 1                     # per pixel of the ringed widget ...
RING_MAX_HIDDEN = 0.25            # ... of which at most this share may be hidden
CONTROLS = (QAbstractButton, QLineEdit, QComboBox, QAbstractSpinBox, QAbstractSlider, QTabBar)
VIEWS = (QGraphicsView, QAbstractItemView)


def window_rect(window: QWidget, widget: QWidget) -> QRect:
    """The part of ``widget`` its parents show, in ``window``'s coordinates (empty when it is
    scrolled away or hidden)."""
    if not widget.isVisible():
        return QRect()
    rect = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not window:
        rect = rect.intersected(QRect(parent.mapTo(window, QPoint(0, 0)), parent.size()))
        parent = parent.parentWidget()
    return rect.intersected(window.rect())


def controls_in(page: QWidget, window: QWidget) -> list[QRect]:
    """The visible controls of a tab page (scroll bars left out: covering one hides no task)."""
    found = [c for c in page.findChildren(QWidget) if isinstance(c, CONTROLS) and not isinstance(c, QScrollBar)]
    rects = [window_rect(window, c) for c in found]
    return [r for r in rects if not r.isEmpty()]


def views_in(page: QWidget, window: QWidget) -> list[QRect]:
    """The visible plots, heatmaps and tables of a tab page (the outermost: a plot's own
    children count once)."""
    found = [v for v in page.findChildren(QWidget) if isinstance(v, VIEWS) and not isinstance(v, QHeaderView)]
    rects = [_data_rect(window, v) for v in found]
    return [r for r in rects if not r.isEmpty()]


def _data_rect(window: QWidget, view: QWidget) -> QRect:
    """A table's rows down to its last (its empty part hides nothing); a plot whole."""
    model = view.model() if isinstance(view, QAbstractItemView) else None
    if model is None:
        return window_rect(window, view)
    rows = model.rowCount()
    if rows == 0:
        return QRect()
    port = view.viewport()
    last = view.visualRect(model.index(rows - 1, 0))
    filled = QRect(port.mapTo(window, QPoint(0, 0)), port.size())
    filled.setHeight(max(0, min(port.height(), last.bottom() + 1)))
    return filled.intersected(window_rect(window, port))


def other_windows(window: QWidget, panel: QWidget) -> list[QRect]:
    """The other visible windows of the app over the main window, in its coordinates."""
    rects = []
    for child in window.findChildren(QWidget):
        if child.isWindow() and child.isVisible() and child is not panel and isinstance(child, QDialog):
            g = child.frameGeometry()
            rects.append(QRect(window.mapFromGlobal(g.topLeft()), g.size()))
    return rects


def _area(r: QRect) -> int:
    return max(r.width(), 0) * max(r.height(), 0)


def place_cost(rect: QRect, windows, named, controls, ring: QRect | None, views=()) -> int:
    cost = WINDOW_COST * sum(_area(w.intersected(rect)) for w in windows)
    cost += VIEW_COST * sum(_area(v.intersected(rect)) for v in views)
    cost += NAMED_COST * sum(_area(n.intersected(rect)) for n in named)
    cost += CONTROL_COST * sum(_area(c.intersected(rect)) for c in controls)
    if ring is not None and not ring.isEmpty():
        hidden = _area(ring.intersected(rect))
        cost += RING_COST * hidden
        if hidden > RING_MAX_HIDDEN * _area(ring):
            cost += NAMED_COST * hidden
    return cost


def candidates(area: QRect, size) -> list[QPoint]:
    """Places for a panel of ``size`` inside ``area``, bottom-right first, then bottom-left,
    then up and inwards (the order decides between equally good places)."""
    left, right = area.left() + MARGIN, area.right() - size.width() - MARGIN
    top, bottom = area.top() + MARGIN, area.bottom() - size.height() - MARGIN
    if right < left:
        right = left
    if bottom < top:
        bottom = top
    xs = [right, left] + [right - (right - left) * k // COLUMNS for k in range(1, COLUMNS)]
    ys = list(range(bottom, top, -STEP_Y)) + [top]
    return [QPoint(x, y) for y in ys for x in xs]


def best_place(area: QRect, size, current: QPoint | None, windows, named, controls, ring, views=()) -> QPoint:
    """The candidate that hides least; the current place when it is as good (no jumping)."""
    def cost(p: QPoint) -> int:
        return place_cost(QRect(p, size), windows, named, controls, ring, views)
    places = candidates(area, size)
    best = min(places, key=cost)                 # the first of equals: the order of ``candidates``
    if current is not None and area.contains(QRect(current, size)) and cost(current) <= cost(best):
        return current
    return best


def fit_beside(window: QWidget, panel: QWidget, dialog: QWidget) -> None:
    """Move (and narrow, down to its minimum) a window opened during the tour so that it lies
    over the main window beside the panel, never over it: the side with more room."""
    frame = window.frameGeometry()
    pg = QRect(panel.mapToGlobal(QPoint(0, 0)), panel.size())
    if not dialog.frameGeometry().intersects(pg):
        return
    extra_w = dialog.frameGeometry().width() - dialog.width()
    extra_h = dialog.frameGeometry().height() - dialog.height()
    room_left = pg.left() - MARGIN - frame.left()
    room_right = frame.right() - pg.right() - MARGIN
    room = max(room_left, room_right)
    min_w = max(dialog.minimumSizeHint().width(), dialog.minimumWidth())
    width = min(dialog.width(), room - extra_w)
    height = min(dialog.height(), frame.height() - extra_h)
    if width >= min_w:
        x = frame.left() if room_left >= room_right else pg.right() + MARGIN + 1
        dialog.resize(width, height)
        dialog.move(x, frame.top())
        return
    room_top = pg.top() - MARGIN - frame.top()
    room_bottom = frame.bottom() - pg.bottom() - MARGIN
    min_h = max(dialog.minimumSizeHint().height(), dialog.minimumHeight())
    height = min(dialog.height(), max(room_top, room_bottom) - extra_h)
    if height >= min_h:
        y = frame.top() if room_top >= room_bottom else pg.bottom() + MARGIN + 1
        dialog.resize(min(dialog.width(), frame.width() - extra_w), height)
        dialog.move(frame.left(), y)
