"""Scrolling a form with the wheel never changes a combo or spin box it passes over
(app/gui/widgets/wheel_guard.py), on the real window."""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets


def wheel(widget, turns=-1):
    """One wheel notch over the middle of ``widget`` (negative: down)."""
    pos = QtCore.QPointF(widget.width() / 2, widget.height() / 2)
    event = QtGui.QWheelEvent(pos, QtCore.QPointF(widget.mapToGlobal(pos.toPoint())), QtCore.QPoint(),
                              QtCore.QPoint(0, 120 * turns), QtCore.Qt.MouseButton.NoButton,
                              QtCore.Qt.KeyboardModifier.NoModifier, QtCore.Qt.ScrollPhase.NoScrollPhase, False)
    QtWidgets.QApplication.sendEvent(widget, event)


def test_the_wheel_scrolls_the_train_form_and_leaves_device_alone(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(1200, 600)                                # short enough that the settings scroll
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == "Train"))
    lab = w.optional_panels["Train"]
    panel = lab.run_panel
    qtbot.waitExposed(panel)
    device = panel.device
    assert device.currentData() == "auto"
    area = device.parentWidget()
    while not isinstance(area, QtWidgets.QScrollArea):
        area = area.parentWidget()
    bar = area.verticalScrollBar()
    qtbot.wait(50)
    assert bar.maximum() > 0, "the settings scroll"
    before = bar.value()
    wheel(device)
    assert device.currentData() == "auto"              # not silently CPU
    assert bar.value() > before                        # the page scrolled instead
    spins = [s for s in panel.findChildren(QtWidgets.QAbstractSpinBox) if s.isVisible()]
    values = [s.text() for s in spins]
    for s in spins:
        wheel(s)
    assert [s.text() for s in spins] == values
    device.setFocus()                                  # clicked or tabbed into: the wheel changes it
    qtbot.waitUntil(device.hasFocus)
    wheel(device)
    assert device.currentData() != "auto"
