"""Help → Start here: a five-minute tour of the app, shown on first launch until dismissed.

A small panel floats over the window (not a dialog: the app stays usable underneath, so the
learner does each stop's task for real), where it hides none of what the stop names
(place.py). Each stop (stops.py) brings its tab forward, rings the widget to use and
may offer buttons; Back / Next walk the path search → attention → step by step → why →
fill-mask → intervene → map. A window opened during the tour is fitted beside the panel. "Don't show this
again" is kept in the settings (``tour/dont_show``); the Help menu opens the tour whatever it says.
"""
from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QRect, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QPainter, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.gui.tour import place as tour_place
from app.gui.tour.stops import STOPS, TourStop

__all__ = ["DONT_SHOW_KEY", "STOPS", "Highlight", "Tour", "TourStop", "should_show_at_start"]

DONT_SHOW_KEY = "tour/dont_show"
RING = QColor("#ff8c00")          # the highlight's colour: visible on white and on heatmaps
RING_WIDTH = 3


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
    """The tour's floating panel: a stop's text, its offers, Back / Next / Close, "Don't show
    this again"."""

    stop_changed = Signal(int)       # the index of the stop now shown
    closed = Signal()

    def __init__(self, window, settings, stops=STOPS):
        super().__init__(window)
        self.window_ = window
        self.settings = settings
        self.stops = stops
        self.index = 0
        self.stop: TourStop | None = None       # the stop shown: stops[index], or a detour from it
        self.setObjectName("tour")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAutoFillBackground(True)
        self.setStyleSheet("#tour { background: #fffaf0; border: 2px solid #ff8c00; border-radius: 8px; }")
        self.setFixedWidth(380)
        self.highlight = Highlight(window)
        self.action_buttons: list[QPushButton] = []
        self._placed_for = ""                   # what the panel's place was last chosen for
        self._build()
        self.hide()
        # the ring and the panel follow the window's size and the target's moves (layouts settle late)
        self._follow = QTimer(self, interval=300)
        self._follow.timeout.connect(self._place)
        window.installEventFilter(self)
        for child in window.children():         # windows made before the tour, shown during it
            if isinstance(child, QDialog):
                child.installEventFilter(self)
        inspect_changed = getattr(window.state, "inspect_backend_changed", None)
        if inspect_changed is not None:          # the fill-mask stop's words depend on the model
            inspect_changed.connect(lambda _b: self.refresh())

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        self.heading = QLabel()
        self.heading.setObjectName("tour_heading")
        self.heading.setStyleSheet("font-weight: bold; font-size: 14px;")
        self.body = QLabel()
        self.body.setObjectName("tour_body")
        self.body.setWordWrap(True)
        self.body.setTextFormat(Qt.TextFormat.RichText)
        self.offers = QVBoxLayout()               # the stop's own buttons, one a row: never cut by the width
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
        layout.addLayout(self.offers)
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
        self._show_stop(self.stops[self.index])

    def detour(self, stop: TourStop) -> None:
        """Show ``stop`` in place of the current one (an offer's next step): Back returns to the
        current stop, Next goes on from it."""
        self._show_stop(stop, detour=True)

    def refresh(self) -> None:
        """Say the current stop again (its words and offers depend on the inspected model)."""
        if self.isVisible() and self.stop is self.stops[self.index]:
            self._show_stop(self.stop, switch_tab=False)

    def _show_stop(self, stop: TourStop, detour: bool = False, switch_tab: bool = True) -> None:
        if self.stop is not None and self.stop is not stop:
            self.stop.on_leave(self.window_)        # e.g. the Why window of stop 4 closes
        self.stop = stop
        if switch_tab:
            self.window_.show_panel(stop.tab)
        target = stop.target(self.window_)
        if target is not None:
            _scroll_to(target)
        self.heading.setText(stop.title)
        self.body.setText(stop.text(self.window_) if callable(stop.text) else stop.text)
        self._set_offers(stop.actions(self.window_))
        self.counter.setText(f"{self.index + 1} of {len(self.stops)}")
        self.back_button.setEnabled(self.index > 0 or detour)
        last = self.index == len(self.stops) - 1
        self.next_button.setText("Done" if last else "Next ▶")
        self.highlight.follow(target)
        self._place()
        self.stop_changed.emit(self.index)

    def _set_offers(self, actions) -> None:
        for b in self.action_buttons:
            self.offers.removeWidget(b)
            b.deleteLater()
        self.action_buttons = []
        for label, act in actions:
            b = QPushButton(label)
            b.setObjectName("tour_offer")
            b.clicked.connect(lambda _=False, a=act: a(self))
            self.offers.addWidget(b)
            self.action_buttons.append(b)

    def next(self) -> None:
        if self.index == len(self.stops) - 1:
            self.dismiss()
        else:
            self.go(self.index + 1)

    def back(self) -> None:
        self.go(self.index if self.stop is not self.stops[self.index] else self.index - 1)

    def dismiss(self) -> None:
        if self.stop is not None:
            self.stop.on_leave(self.window_)
        self._follow.stop()
        self.highlight.follow(None)
        self.hide()
        self.closed.emit()

    def _remember(self, on: bool) -> None:
        self.settings.setValue(DONT_SHOW_KEY, on)
        self.settings.sync()

    # ---- placing (place.py) -------------------------------------------------------------------
    def named_rects(self) -> list[QRect]:
        """Where the widgets the current stop names are, in the window's coordinates."""
        if self.stop is None:
            return []
        rects = [tour_place.window_rect(self.window_, n) for n in self.stop.named(self.window_) if n.isVisible()]
        return [r for r in rects if not r.isEmpty()]

    def _place(self) -> None:
        if not self.isVisible():
            return
        fitted = self.heightForWidth(self.width())     # the wrapped text's own height, no gaps
        if fitted > 0:
            self.resize(self.width(), fitted)
        else:
            self.adjustSize()
        w = self.window_
        tabs = w.tabs.geometry()
        area = QRect(tabs.left(), tabs.top() + w.tabs.tabBar().height(), tabs.width(),
                     tabs.height() - w.tabs.tabBar().height())
        page = w.tabs.currentWidget()
        target = self.stop.target(w) if self.stop is not None else None
        if target is not self.highlight.target:     # the stop's widget changed (fill-mask's page)
            self.highlight.target = target
        self.highlight.update_place()
        ring = self.highlight.geometry() if self.highlight.isVisible() else None
        inputs = (area, self.size(), tour_place.other_windows(w, self), self.named_rects(),
                  tour_place.controls_in(page, w) if page is not None else [], ring,
                  tour_place.views_in(page, w) if page is not None else [])
        key = repr((self.pos(), inputs))
        if key != self._placed_for:          # the follow timer ticks often; the search runs on a change
            place = tour_place.best_place(inputs[0], inputs[1], self.pos(), *inputs[2:])
            if place != self.pos():
                self.move(place)
            self._placed_for = repr((self.pos(), inputs))
        self.raise_()

    def _fit_beside(self, dialog: QWidget) -> None:
        if self.isVisible() and dialog.isVisible():
            tour_place.fit_beside(self.window_, self, dialog)
            self._place()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        kind = event.type()
        if obj is self.window_:
            if kind == QEvent.Type.ChildAdded and event.child().isWidgetType():
                event.child().installEventFilter(self)    # a window made now is filtered when shown
            elif kind in (QEvent.Type.Resize, QEvent.Type.LayoutRequest):
                self._place()
        elif (kind == QEvent.Type.Show and self.isVisible() and isinstance(obj, QDialog)
              and obj.isWindow() and not obj.isModal()):
            # once the dialog has placed itself (QDialog centres in its showEvent): beside the panel
            QTimer.singleShot(0, lambda d=obj: self._fit_beside(d))
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
