"""Widgets that keep their place in a layout while hidden: a progress bar and its Cancel button
that appear when a run starts never push the buttons beside them (a click meant for Cancel would
land on the bar)."""
from __future__ import annotations

from PySide6 import QtWidgets


def keep_place(*widgets: QtWidgets.QWidget) -> None:
    for w in widgets:
        policy = w.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        w.setSizePolicy(policy)
