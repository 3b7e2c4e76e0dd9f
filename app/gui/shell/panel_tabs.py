"""Tabs whose panel is built the first time it is needed, so the window shows before pyqtgraph loads.

The Attention, Step by step, Fill-mask, Train and Map panels import pyqtgraph and build plots:
about half of the window's start-up. Their tabs exist from the start (titles, View menu,
shortcuts) with an empty holder; the panel itself is built when its tab is first shown, when
code asks for it (``window.optional_panels["Attention"]``), or in idle time after the model
has loaded. Nothing here imports pyqtgraph, torch or the panels' modules.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget


def scroll_holder(object_name: str) -> QScrollArea:
    """A tab that scrolls: a panel wider than the window scrolls instead of widening it."""
    scroll = QScrollArea()
    scroll.setObjectName(object_name)
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    return scroll


def plain_holder(object_name: str) -> QWidget:
    """A tab that fills the window with its panel (no scrolling)."""
    holder = QWidget()
    holder.setObjectName(object_name)
    QVBoxLayout(holder).setContentsMargins(0, 0, 0, 0)
    return holder


def put_in_holder(holder: QWidget, panel: QWidget) -> None:
    if isinstance(holder, QScrollArea):
        holder.setWidget(panel)
    else:
        holder.layout().addWidget(panel)


class LazyPanels(Mapping):
    """Panels by tab title, each built by ``build(title)`` on first access.

    A read-only mapping: ``in``, ``len`` and iteration never build; ``[title]`` and ``get``
    build the panel if it is not there yet. ``built(title)`` tells without building."""

    def __init__(self, titles, build: Callable[[str], QWidget]):
        self._titles = list(titles)    # tab titles in tab order
        self._build = build            # title -> the panel, put in its tab
        self._panels: dict[str, QWidget] = {}   # the panels built so far

    def __getitem__(self, title: str) -> QWidget:
        if title not in self._titles:
            raise KeyError(title)
        if title not in self._panels:
            self._panels[title] = self._build(title)
        return self._panels[title]

    def __contains__(self, title) -> bool:
        return title in self._titles

    def __iter__(self) -> Iterator[str]:
        return iter(self._titles)

    def __len__(self) -> int:
        return len(self._titles)

    def built(self, title: str) -> bool:
        return title in self._panels

    def next_unbuilt(self) -> str | None:
        """The first title whose panel is not built yet (for building in idle time)."""
        return next((t for t in self._titles if t not in self._panels), None)
