"""Panels that other modules may or may not provide yet: imported if present.

Each entry: (module, class, tab title). A panel class takes ``(state)``. A module that is
missing is skipped; one that fails to import shows its error in a placeholder tab (and the log).
"""
from __future__ import annotations

import importlib
import importlib.util

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from .logs import log

OPTIONAL_PANELS = [
    ("app.attention_panel", "AttentionPanel", "Attention"),
    ("app.fillmask_panel", "FillMaskPanel", "Fill-mask"),
    ("app.train_panel", "TrainPanel", "Train"),
    ("app.walkthrough_panel", "WalkthroughPanel", "Step by step"),
]


def load_optional_panels(state) -> list[tuple[str, object]]:
    """[(title, widget)] for every optional panel whose module exists."""
    panels = []
    for module_name, class_name, title in OPTIONAL_PANELS:
        try:
            if importlib.util.find_spec(module_name) is None:
                continue
        except (ImportError, ValueError):
            continue
        try:
            cls = getattr(importlib.import_module(module_name), class_name)
            widget = cls(state)
        except Exception as exc:  # noqa: BLE001 - one broken panel must not break the window
            log.exception("panel %s.%s failed to load", module_name, class_name)
            widget = QLabel(f"The {title} panel could not be loaded:\n{type(exc).__name__}: {exc}")
            widget.setAlignment(Qt.AlignmentFlag.AlignCenter)
            widget.setWordWrap(True)
        widget.setObjectName(f"{title.lower().replace('-', '')}_panel")
        panels.append((title, widget))
    return panels
