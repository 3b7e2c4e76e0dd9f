"""Help → Start here: a five-minute tour of the app, shown on first launch until dismissed.

A small panel floats over the window's bottom-right corner (not a dialog: the app stays usable
underneath, so the learner does each stop's task for real). Each stop brings its tab forward
and rings the widget to use; Back / Next walk the path search → attention → step by step →
why → fill-mask. "Don't show this again" is kept in the settings (``tour/dont_show``); the
Help menu opens the tour whatever it says.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QAbstractButton,
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

DONT_SHOW_KEY = "tour/dont_show"
RING = QColor("#ff8c00")          # the highlight's colour: visible on white and on heatmaps
RING_WIDTH = 3
TARGET_WEIGHT = 4                 # hiding a pixel of the ringed widget costs as much as 4 of a button
MARGIN = 12                       # the panel's distance from the window's edges


@dataclass(frozen=True)
class TourStop:
    tab: str                                   # the tab this stop shows
    title: str                                 # the stop's heading
    text: str                                  # what to look at and what to do (rich text)
    target: Callable[[QWidget], QWidget | None]  # main window -> the widget to ring (None: none)


def _panel(window, title):
    return window.optional_panels[title] if title in window.optional_panels else None


def _attr(getter, name):
    def find(window):
        owner = getter(window)
        return getattr(owner, name, None) if owner is not None else None
    return find


def _fillmask_target(panel):
    """The sentence box; when the model has no masked-language head, the page that says so."""
    if panel is None:
        return None
    return panel.text_edit if panel.pages.currentIndex() == 0 else panel.pages.currentWidget()


STOPS = (
    TourStop("Search", "Start here: Search",
             "Encoderscope turns sentences into vectors and finds the nearest ones. Start with "
             "<b>Search</b>: the sample corpus is open (576 sentences). Type a query in the ringed "
             "box, for example <i>a cat sleeping in the sun</i>: the hits and their cosine scores "
             "appear as you type.",
             _attr(lambda w: w.search_panel, "query")),
    TourStop("Attention", "Attention: who looks at whom",
             "Each head of each layer decides how much every token reads from every other token. "
             "Type a sentence in the <b>Text</b> box and press Enter, then hover a cell of the "
             "ringed map: row = the token reading, column = the token read. Try the "
             "<b>All heads</b> view and the Up/Down, Left/Right keys.",
             _attr(lambda w: _panel(w, "Attention"), "heatmap")),
    TourStop("Step by step", "Step by step: inside the encoder",
             "The same sentence, one operation at a time: embeddings, Q, K, V, scores, softmax, "
             "the feed-forward network, pooling. Each step shows its formula, its real numbers and "
             "a badge proving they are the model's. Click a block of the ringed architecture map "
             "(or a step in its <b>List</b> tab), or use <b>Next ▶</b> (Alt+Right).",
             _attr(lambda w: _panel(w, "Step by step"), "left_tabs")),
    TourStop("Search", "Why: a hit explained",
             "Back in Search: select a hit and press the ringed <b>Why?</b> button. The score is "
             "split exactly over pairs of query and hit tokens: which words made it a match.",
             _attr(lambda w: w.search_panel, "why_button")),
    TourStop("Fill-mask", "Fill-mask: what the model expects",
             "Write a sentence with <b>[MASK]</b> where a word is missing, e.g. <i>The cat sat on "
             "the [MASK].</i>: the model's top guesses and their probabilities. It needs a model "
             "with a masked-language head: when the tab says the model has none, choose one in the "
             "<b>Inspect with</b> bar.",
             lambda w: _fillmask_target(_panel(w, "Fill-mask"))),
    TourStop("Map", "And then",
             "The <b>Map</b> draws the whole corpus in 2-D, clustered; <b>Train</b> trains the "
             "from-scratch encoder; <b>Step by step → Export notebook…</b> writes all of it as a "
             "NumPy notebook to hand out. This tour stays in <b>Help → Start here</b>.",
             lambda w: None),
)


class Highlight(QWidget):
    """A ring drawn over the main window around one widget; it lets every click through."""

    def __init__(self, window: QWidget):
        super().__init__(window)
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.setAttribute(Qt.WidgetAttribute.WA_NoSystemBackground)
        self.setObjectName("tour_highlight")
        self.target: QWidget | None = None
        self.hide()

    def follow(self, target: QWidget | None) -> None:
        self.target = target
        self.update_place()

    def update_place(self) -> None:
        t = self.target
        if t is None or not t.isVisible():
            self.hide()
            return
        window = self.parentWidget()
        top_left = t.mapTo(window, t.rect().topLeft())
        rect = QRect(top_left, t.size()).adjusted(-RING_WIDTH - 2, -RING_WIDTH - 2, RING_WIDTH + 2, RING_WIDTH + 2)
        self.setGeometry(rect.intersected(window.rect()))
        self.show()
        self.raise_()

    def paintEvent(self, _event):
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setPen(QPen(RING, RING_WIDTH))
        half = RING_WIDTH // 2 + 1
        p.drawRoundedRect(self.rect().adjusted(half, half, -half, -half), 6, 6)


class Tour(QFrame):
    """The tour's floating panel: a stop's text, Back / Next / Close, "Don't show this again"."""

    stop_changed = Signal(int)       # the index of the stop now shown
    closed = Signal()

    def __init__(self, window, settings, stops=STOPS):
        super().__init__(window)
        self.window_ = window
        self.settings = settings
        self.stops = stops
        self.index = 0
        self.setObjectName("tour")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setStyleSheet("#tour { background: #fffaf0; border: 2px solid #ff8c00; border-radius: 8px; }")
        self.setFixedWidth(380)
        self.highlight = Highlight(window)
        self._build()
        self.hide()
        # the ring and the panel follow the window's size and the target's moves (layouts settle late)
        self._follow = QTimer(self, interval=300)
        self._follow.timeout.connect(self._place)
        window.installEventFilter(self)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        self.heading = QLabel()
        self.heading.setObjectName("tour_heading")
        self.heading.setStyleSheet("font-weight: bold; font-size: 14px;")
        self.body = QLabel()
        self.body.setObjectName("tour_body")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.counter = QLabel()
        self.dont_show = QCheckBox("Don't show this again at start-up")
        self.dont_show.setObjectName("tour_dont_show")
        self.dont_show.setChecked(self.settings.value(DONT_SHOW_KEY, False, type=bool))
        self.dont_show.toggled.connect(self._remember)
        row = QHBoxLayout()
        self.back_button = QPushButton("◀ Back")
        self.next_button = QPushButton("Next ▶")
        self.close_button = QPushButton("Close")
        self.back_button.clicked.connect(self.back)
        self.next_button.clicked.connect(self.next)
        self.close_button.clicked.connect(self.dismiss)
        row.addWidget(self.counter, 1)
        for b in (self.back_button, self.next_button, self.close_button):
            row.addWidget(b)
        for w in (self.heading, self.body):
            layout.addWidget(w)
        layout.addLayout(row)
        layout.addWidget(self.dont_show)

    # ---- walking -------------------------------------------------------------------------------
    def start(self, index: int = 0) -> None:
        self.show()
        self.raise_()
        self._follow.start()
        self.go(index)

    def go(self, index: int) -> None:
        self.index = max(0, min(index, len(self.stops) - 1))
        stop = self.stops[self.index]
        self.window_.show_panel(stop.tab)
        target = stop.target(self.window_)
        if target is not None:
            _scroll_to(target)
        self.heading.setText(stop.title)
        self.body.setText(stop.text)
        self.counter.setText(f"{self.index + 1} of {len(self.stops)}")
        self.back_button.setEnabled(self.index > 0)
        last = self.index == len(self.stops) - 1
        self.next_button.setText("Done" if last else "Next ▶")
        self.highlight.follow(target)
        self._place()
        self.stop_changed.emit(self.index)

    def next(self) -> None:
        if self.index == len(self.stops) - 1:
            self.dismiss()
        else:
            self.go(self.index + 1)

    def back(self) -> None:
        self.go(self.index - 1)

    def dismiss(self) -> None:
        self._follow.stop()
        self.highlight.follow(None)
        self.hide()
        self.closed.emit()

    def _remember(self, on: bool) -> None:
        self.settings.setValue(DONT_SHOW_KEY, on)
        self.settings.sync()

    # ---- placing --------------------------------------------------------------------------------
    def _place(self) -> None:
        if not self.isVisible():
            return
        self.adjustSize()
        self.move(self._best_place())
        self.raise_()
        self.highlight.update_place()

    def _best_place(self) -> QPoint:
        """The corner or side where the panel hides least of the ringed widget and of the tab's
        buttons and text boxes (bottom-right when nothing is in the way)."""
        w = self.window_
        tabs = w.tabs.geometry()
        top = tabs.top() + w.tabs.tabBar().height() + MARGIN
        bottom = tabs.bottom() - self.height() - MARGIN
        left, right = tabs.left() + MARGIN, tabs.right() - self.width() - MARGIN
        middle = (top + bottom) // 2
        places = [QPoint(right, bottom), QPoint(left, bottom), QPoint(right, middle), QPoint(left, middle),
                  QPoint(right, top), QPoint(left, top)]
        # (rect, weight): hiding the ringed widget costs more than hiding a button
        avoid = [(self.highlight.geometry(), TARGET_WEIGHT)] if self.highlight.isVisible() else []
        page = w.tabs.currentWidget()
        if page is not None:
            avoid += [(QRect(c.mapTo(w, c.rect().topLeft()), c.size()), 1)
                      for c in page.findChildren(QAbstractButton) + page.findChildren(QLineEdit)
                      if c.isVisible()]

        def hidden(point: QPoint) -> int:
            rect = QRect(point, self.size())
            return sum(weight * r.intersected(rect).width() * r.intersected(rect).height() for r, weight in avoid)
        return min(places, key=hidden)      # the first of equals: the order above

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() in (QEvent.Type.Resize, QEvent.Type.LayoutRequest):
            self._place()
        return False


def _scroll_to(target: QWidget) -> None:
    """A target inside a scrolling tab is scrolled into view."""
    parent = target.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea):
            parent.ensureWidgetVisible(target)
            return
        parent = parent.parentWidget()


def should_show_at_start(settings) -> bool:
    return not settings.value(DONT_SHOW_KEY, False, type=bool)
