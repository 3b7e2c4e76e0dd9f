"""A number box the panels share: range, start value, prefix and tooltip in one call."""
from __future__ import annotations

from PySide6.QtWidgets import QSpinBox


def spin_box(object_name: str, low: int, high: int, value: int, prefix: str = "", tooltip: str = "") -> QSpinBox:
    """A spin box from `low` to `high` showing `value`, `prefix` before the number."""
    spin = QSpinBox()
    spin.setObjectName(object_name)
    spin.setRange(low, high)
    spin.setValue(value)
    spin.setPrefix(prefix)
    spin.setToolTip(tooltip)
    return spin
