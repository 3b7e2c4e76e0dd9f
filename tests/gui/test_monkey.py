"""A monkey test (issue 17): random clicks, keys and values on every tab's widgets, with a fixed
seed, for about a minute of actions. The window must stay responsive (a QTimer heartbeat keeps
ticking: no long freeze of the UI thread) and nothing may go unhandled: no exception in a Qt
callback (pytest-qt fails the test on one), none through sys.excepthook, no traceback in the
app's log. Run with ``make test-slow`` (``-m slow``)."""
from __future__ import annotations

import random
import sys
import time

import pytest
from PySide6.QtCore import QAbstractListModel, QModelIndex, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractItemView,
    QAbstractSlider,
    QAbstractSpinBox,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QInputDialog,
    QLineEdit,
    QMessageBox,
    QToolButton,
    QWidget,
)

SEED = 17
ACTIONS = 1500                # about a minute and a half on two shared cores
MAX_FREEZE_S = 3.0            # the longest the UI thread may go without a heartbeat tick
WORDS = ["the", "cat", "[MASK]", "sat", "on", "mat", "weather", "rain", "é", "漢字", "", "  ", "a" * 300]
KEYS = [Qt.Key.Key_Return, Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down,
        Qt.Key.Key_Home, Qt.Key.Key_Tab, Qt.Key.Key_Backspace, Qt.Key.Key_Delete, Qt.Key.Key_Escape]
# Buttons whose click opens a file/folder chooser are fine (the choosers are answered "cancel"
# below); a tool button with a popup menu would block in QMenu.exec, so it gets no click.


class Heartbeat:
    """Ticks every 50 ms on the UI thread; remembers the longest gap between two ticks."""

    def __init__(self):
        self.last = time.perf_counter()
        self.longest = 0.0
        self.ticks = 0
        self.timer = QTimer(interval=50)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def _tick(self):
        now = time.perf_counter()
        self.longest = max(self.longest, now - self.last)
        self.last = now
        self.ticks += 1


def _candidates(root: QWidget) -> list[QWidget]:
    out = []
    for w in root.findChildren(QWidget):
        if not (w.isVisible() and w.isEnabled()):
            continue
        if isinstance(w, QToolButton) and w.menu() is not None:
            continue
        if isinstance(w, (QAbstractButton, QComboBox, QAbstractSpinBox, QLineEdit, QAbstractSlider,
                          QAbstractItemView)):
            out.append(w)
    return out


def _act(qtbot, rng: random.Random, w: QWidget) -> None:
    if isinstance(w, QComboBox):
        if w.count():
            i = rng.randrange(w.count())
            w.setCurrentIndex(i)
            w.activated.emit(i)
    elif isinstance(w, QAbstractSpinBox):
        w.stepBy(rng.choice([-2, -1, 1, 2]))           # near the current value: no 10M-step run
    elif isinstance(w, QLineEdit):
        w.setFocus()
        if rng.random() < 0.3:
            w.clear()
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 5)))
        if text.isascii():
            qtbot.keyClicks(w, text)
        else:
            w.insert(text)               # QTest types Latin-1 only; a paste brings the rest
        if rng.random() < 0.6:
            qtbot.keyClick(w, Qt.Key.Key_Return)
    elif isinstance(w, QAbstractSlider):
        w.setValue(rng.randint(w.minimum(), w.maximum()))
    elif isinstance(w, QAbstractItemView):
        model = w.model()
        top = QModelIndex()      # a list model has one column (PySide6 keeps its columnCount private)
        rows, cols = (model.rowCount(top), 1 if isinstance(model, QAbstractListModel)
                      else model.columnCount(top)) if model is not None else (0, 0)
        if rows and cols:
            index = model.index(rng.randrange(rows), rng.randrange(cols))
            rect = w.visualRect(index)
            if rect.isValid():
                click = qtbot.mouseDClick if rng.random() < 0.2 else qtbot.mouseClick
                click(w.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        w.setFocus()
        qtbot.keyClick(w, rng.choice(KEYS))
    elif isinstance(w, QCheckBox):
        w.click()
    elif isinstance(w, QAbstractButton):
        qtbot.mouseClick(w, Qt.MouseButton.LeftButton)


def _answer_dialogs(rng: random.Random, window) -> None:
    """Close the message boxes a user would answer (errors, the re-embed question)."""
    for box in window.findChildren(QMessageBox):
        if box.isVisible():
            buttons = box.buttons()
            if buttons and rng.random() < 0.7:
                button = rng.choice(buttons)
                box.clickedButton = lambda b=button: b   # offscreen: as if the user clicked it
                button.click()
            else:
                box.reject()


@pytest.mark.slow
def test_random_clicks_and_keys_on_every_tab(qtbot, make_window, tiny_store_template, tiny_distilbert,
                                             monkeypatch):
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: ("", "")))
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: ("", "")))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: ""))
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("", False)))
    unhandled = []
    previous_hook = sys.excepthook
    monkeypatch.setattr(sys, "excepthook", lambda *exc: (unhandled.append(exc), previous_hook(*exc)))

    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    train = w.optional_panels.get("Train")
    if train is not None:             # keep any run the monkey starts small
        train.overrides = {"steps": 20, "layers": 1, "dim": 16, "heads": 2, "ffn": 32, "batch_size": 8,
                           "max_length": 16, "eval_every": 10, "eval_sentences": 10, "threads": 1}
    # the inspector can be switched to a model with a masked-LM head from the monkey's combos
    w.inspect_bar.weights.addItem(str(tiny_distilbert))

    beat = Heartbeat()
    rng = random.Random(SEED)
    done = 0
    for step in range(ACTIONS):
        if step % 15 == 0:
            w.tabs.setCurrentIndex(rng.randrange(w.tabs.count()))
        _answer_dialogs(rng, w)
        roots = [w.tabs.currentWidget(), w.model_bar, w.inspect_bar]
        pool = _candidates(rng.choice(roots) if rng.random() < 0.2 else roots[0])
        if pool:
            _act(qtbot, rng, rng.choice(pool))
            done += 1
        qtbot.wait(rng.randrange(5, 60))
    _answer_dialogs(rng, w)
    w.state.jobs.cancel_all()
    qtbot.waitUntil(lambda: not w.state.jobs.busy, timeout=120_000)
    beat.timer.stop()

    from app.gui.logs import log_file
    log_text = log_file().read_text(encoding="utf-8") if log_file().is_file() else ""
    print(f"monkey: {done} actions, {beat.ticks} heartbeats, longest UI-thread gap {beat.longest:.2f} s")
    assert done > ACTIONS // 2
    assert beat.ticks > 100
    assert beat.longest < MAX_FREEZE_S, f"the UI thread froze for {beat.longest:.1f} s"
    assert not unhandled, unhandled
    unexpected = unexpected_tracebacks(log_text)
    assert not unexpected, "\n\n".join(unexpected)[-4000:]


def unexpected_tracebacks(log_text: str) -> list[str]:
    """The logged tracebacks whose exception is not one meant for people (an EncoderscopeError:
    the monkey typed a model name that does not exist, ...). Workers log every failure in full."""
    import importlib

    from core.errors import EncoderscopeError

    found = []
    for block in log_text.split("Traceback (most recent call last):")[1:]:
        last = next((line for line in block.splitlines()[1:] if line and not line.startswith(" ")), "")
        name = last.split(":", 1)[0]
        module, _, cls = name.rpartition(".")
        try:
            expected = issubclass(getattr(importlib.import_module(module), cls), EncoderscopeError)
        except (ImportError, AttributeError, ValueError, TypeError):
            expected = False
        if not expected:
            found.append(block[:2000])
    return found
