"""Hover labels are never cut off: the map's hover box stays inside the plot wherever the point
is and however long the sentence; a token axis's hovered (bold) label gets the room it needs."""
from __future__ import annotations

import numpy as np
import pytest
from PySide6 import QtCore, QtGui

LONG = ("A remarkably long sentence about the orbit of the outer planets and their many moons, "
        "written so that the hover box is wider than half of a small plot")


@pytest.fixture
def small_map(qtbot):
    from app.gui.panels.map.plot import MapPlot
    plot = MapPlot()
    qtbot.addWidget(plot)
    plot.resize(420, 300)
    plot.show()
    xy = np.array([[0, 0], [10, 0], [0, 10], [10, 10], [5, 5], [4.6, 5.2], [0, 5], [10, 5]], np.float32)
    plot.set_points(xy, np.zeros(len(xy), np.int64), ["all"])
    qtbot.waitUntil(lambda: plot.vb.viewPixelSize()[0] > 0)
    return plot


def _inside(inner: QtCore.QRectF, outer: QtCore.QRectF, slack: float = 1.0) -> bool:
    return (inner.left() >= outer.left() - slack and inner.right() <= outer.right() + slack
            and inner.top() >= outer.top() - slack and inner.bottom() <= outer.bottom() + slack)


@pytest.mark.parametrize("text", ["short", LONG])
def test_map_hover_box_lies_inside_the_plot_for_every_point(small_map, text):
    area = small_map.vb.sceneBoundingRect()
    for row in range(len(small_map.xy)):
        small_map.show_tip(row, text)
        box = small_map.tip_scene_rect()
        assert box.width() > 0 and _inside(box, area), (row, box, area)
    small_map.vb.scaleBy((0.5, 0.5))                   # zoomed in: the middle points near the edges
    for row in (4, 5):
        small_map.show_tip(row, text)
        assert _inside(small_map.tip_scene_rect(), small_map.vb.sceneBoundingRect()), row


def test_map_hover_box_stays_next_to_its_point_when_there_is_room(small_map):
    small_map.resize(1200, 800)
    QtGui.QGuiApplication.processEvents()
    small_map.show_tip(0, "short")                      # bottom-left point, short text: no shift
    anchor = small_map.scene_pos_of(0)
    box = small_map.tip_scene_rect()
    assert abs(box.left() - anchor.x()) < 2 and abs(box.bottom() - anchor.y()) < 2


def test_hovered_token_label_is_drawn_whole_in_bold(qtbot):
    from app.gui.widgets.heatmap import HeatmapWidget
    hm = HeatmapWidget()
    qtbot.addWidget(hm)
    hm.resize(700, 500)
    hm.show()
    tokens = ["[CLS]", "WWWWWWWWWWWWWWW", "mmmmmmmmmmmmmmm", "[SEP]"]
    hm.set_matrix(np.full((4, 4), 0.25), tokens)
    QtGui.QGuiApplication.processEvents()
    for axis in (hm.left_axis, hm.top_axis):
        image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_ARGB32)
        for index in range(len(tokens)):
            axis.set_highlight(index)
            painter = QtGui.QPainter(image)
            painter.setFont(axis.style["tickFont"] or painter.font())
            bold = QtGui.QFont(painter.font())
            bold.setBold(True)
            need = QtGui.QFontMetrics(bold).horizontalAdvance(axis.labels[index])
            _, _, texts = axis.generateDrawSpecs(painter)
            painter.end()
            rect = next(r for r, _, text, hl in texts if hl)
            assert rect.width() >= need, (axis.orientation, axis.labels[index], rect.width(), need)
            # the room the axis keeps for its labels holds the bold one
            extent = axis.width() if axis.orientation == "left" else axis.height()
            assert need + 4 <= extent, (axis.orientation, need, extent)
