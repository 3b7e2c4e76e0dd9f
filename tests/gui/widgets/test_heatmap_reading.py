"""A heatmap reads at any shape: a cell's tooltip stays while the mouse rests, and a matrix of one
column (or few rows) fills the plot instead of a corner of it."""
from __future__ import annotations

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.widgets.heatmap import HeatmapWidget


def test_a_heatmap_cells_tooltip_stays_while_the_mouse_rests(qtbot):
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(400, 300)
    w.set_matrix(np.eye(3), ["a", "b", "c"])
    w.show()
    qtbot.waitExposed(w)
    centre = w.mapFromScene(w.plot.vb.mapViewToScene(QtCore.QPointF(1, 1)))
    QtWidgets.QToolTip.showText(w.mapToGlobal(centre), w.tooltip_text(1, 1), w)   # as a mouse move does
    assert QtWidgets.QToolTip.isVisible()
    asked = []

    class SceneHelp(QtCore.QObject):        # the scene's help event is what hid it (its items have no tooltip)
        def eventFilter(self, obj, ev):
            if ev.type() == QtCore.QEvent.Type.GraphicsSceneHelp:
                asked.append(ev)
            return False

    spy = SceneHelp()
    w.scene().installEventFilter(spy)
    rest = QtGui.QHelpEvent(QtCore.QEvent.Type.ToolTip, centre, w.mapToGlobal(centre))   # the mouse rests
    QtWidgets.QApplication.sendEvent(w.viewport(), rest)
    assert asked == [] and QtWidgets.QToolTip.isVisible() and "weight" in QtWidgets.QToolTip.text()
    QtWidgets.QToolTip.hideText()


def test_one_column_or_few_rows_fill_the_plot(qtbot):
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(600, 400)
    w.show()
    qtbot.waitExposed(w)
    w.set_matrix(np.arange(6, dtype=float)[:, None], [f"L{i}" for i in range(1, 7)], ["ffn"])
    w.resize(640, 420)                                               # a layout pass after the matrix
    qtbot.waitUntil(lambda: w.plot.vb.width() > 0 and w.width() == 640)
    assert w.plot.vb.viewRange() == [[-0.5, 0.5], [-0.5, 5.5]]
    w.set_matrix(np.ones((1, 2)), ["pooled"], ["a", "b"])
    w.resize(600, 400)
    qtbot.waitUntil(lambda: w.width() == 600)
    assert w.plot.vb.viewRange() == [[-0.5, 1.5], [-0.5, 0.5]]


def test_the_colour_bar_is_as_wide_as_its_tick_numbers(qtbot):
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(600, 400)
    w.show()
    qtbot.waitExposed(w)
    w.set_matrix(np.linspace(-4e-4, 3e-4, 12).reshape(6, 2), list("abcdef"), ["x", "y"], levels=(-4e-4, 4e-4))
    w.colorbar.getAxis("right").setLabel("Δp")
    axis = w.colorbar.getAxis("right")
    qtbot.waitUntil(lambda: axis.width() > 0)
    widest = QtGui.QFontMetrics(axis.style.get("tickFont") or QtGui.QFont()).horizontalAdvance("-0.0004")
    assert axis.width() >= widest + axis.style["tickTextOffset"][0]      # "−0.0004" is not dropped


def test_a_colour_bars_title_clears_its_tick_numbers(qtbot):
    """"after − before" and "Δp" are read beside their ticks, never over them: both ends of the scale
    are written, and the title's glyphs (rotated, right of the numbers) start at least 2 px right of
    the widest tick number."""
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(320, 420)
    w.show()
    qtbot.waitExposed(w)
    for title, (lo, hi), ends in (("after − before", (-0.45, 0.45), {"-0.4", "0.4"}),
                                  ("Δp", (-4e-4, 4e-4), {"-0.0004", "0.0004"}), ("weight", (0.0, 1.0), {"0", "1.0"})):
        w.set_matrix(np.linspace(lo, hi, 12).reshape(6, 2), list("abcdef"), ["x", "y"], levels=(lo, hi))
        axis = w.colorbar.getAxis("right")
        axis.setLabel(title)
        qtbot.wait(30)
        image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_ARGB32)
        painter = QtGui.QPainter(image)
        ticks = axis.generateDrawSpecs(painter)[2]
        painter.end()
        assert ends <= {text for _rect, _flags, text in ticks}, f"{title!r}: an end of its scale is not written"
        numbers_end = max(rect.right() for rect, _flags, _text in ticks)
        label = axis.label
        glyphs_start = label.mapRectToParent(label.boundingRect()).left() + label.document().documentMargin()
        assert glyphs_start >= numbers_end + 2, f"{title!r} starts at {glyphs_start:.1f}, its ticks end at " \
                                                f"{numbers_end:.1f}"
        assert glyphs_start + QtGui.QFontMetricsF(label.font()).height() <= axis.width() + 6   # inside the bar's room


def test_a_marked_cells_number_stays_readable(qtbot):
    """A cut edge is marked by a frame and a cross in the cell's corner, not a cross through the
    middle where its number is written (".925" under two strokes was unreadable)."""
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.set_matrix(np.full((3, 3), 0.5), list("abc"))
    w.set_marks([(1, 2)])
    path = w.marks.path()
    number = QtCore.QRectF(2 - 0.22, 1 - 0.2, 0.44, 0.4)        # where the cell's number is written
    stroke = QtGui.QPainterPathStroker()
    stroke.setWidth(0.02)
    assert not stroke.createStroke(path).intersects(number)
    assert path.boundingRect().contains(QtCore.QPointF(2.4, 0.6))     # the mark is on that cell


def test_the_first_column_label_of_a_wide_matrix_is_whole(qtbot):
    """384 narrow columns: the vertical label "0" of the first stays inside the axis (half of it
    was past the plot's left edge, clipped), and so does the last."""
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(500, 300)
    w.show()
    qtbot.waitExposed(w)
    w.set_matrix(np.zeros((4, 384)), list("abcd"), [str(j) for j in range(384)])
    qtbot.wait(30)
    axis = w.top_axis
    image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(image)
    texts = axis.generateDrawSpecs(painter)[2]
    painter.end()
    bounds = axis.mapRectFromParent(axis.geometry())
    for rect, _flags, text, _hl in (texts[0], texts[-1]):
        half = rect.height() / 2                 # drawn upwards, centred on rect.x()
        assert bounds.left() <= rect.x() - half and rect.x() + half <= bounds.right(), (text, rect.x(), bounds)
