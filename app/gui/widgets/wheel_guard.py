"""A wheel turn over a combo box or spin box that does not have the keyboard focus scrolls the page
it sits on, instead of silently changing the value (a form scrolled past its "Device: Auto" must
not end on "CPU"). Click or Tab into the box first, and the wheel changes it as before.

    WheelGuard.install(app)        # once: every combo and spin box of the application
"""
from __future__ import annotations

from PySide6 import QtCore, QtWidgets

GUARDED = (QtWidgets.QComboBox, QtWidgets.QAbstractSpinBox)


class WheelGuard(QtCore.QObject):
    @classmethod
    def install(cls, app: QtWidgets.QApplication) -> WheelGuard:
        """Once per application (each window may ask)."""
        guard = app.findChild(cls)
        if guard is None:
            guard = cls(app)
            app.installEventFilter(guard)
        return guard

    def eventFilter(self, obj, event) -> bool:
        kind = event.type()
        if kind == QtCore.QEvent.Type.Polish and isinstance(obj, GUARDED):
            # the default (WheelFocus) would hand the box the focus on the first turn
            obj.setFocusPolicy(QtCore.Qt.FocusPolicy.StrongFocus)
        elif kind == QtCore.QEvent.Type.Wheel and isinstance(obj, GUARDED) and not obj.hasFocus():
            area = _scroll_area_of(obj)
            if area is not None:
                bar = area.verticalScrollBar()
                pixels = event.pixelDelta().y()
                steps = event.angleDelta().y() / 120.0
                bar.setValue(bar.value() - (pixels if pixels else round(steps * bar.singleStep() * 3)))
            return True
        return False


def _scroll_area_of(widget: QtWidgets.QWidget) -> QtWidgets.QAbstractScrollArea | None:
    w = widget.parentWidget()
    while w is not None:
        if isinstance(w, QtWidgets.QScrollArea):
            return w
        w = w.parentWidget()
    return None
