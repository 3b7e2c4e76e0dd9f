"""Help → Start here on the real window at 1200×780 and 1600×1000, offline (minilm, no masked-LM
head): every stop rings a visible widget, the panel hides none of the widgets its words name,
Next stays in view and no other window lies over it (the Why window opens beside it), and the
fill-mask stop offers what works offline instead of a dead end."""
from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication, QFileDialog

from app.gui.tour.guide import STOPS
from app.gui.tour.place import window_rect

SIZES = [(1200, 780), (1600, 1000)]


def _global(widget) -> QRect:
    return QRect(widget.mapToGlobal(QPoint(0, 0)), widget.size())


def _windows_over(w, widget) -> list:
    """The app's other visible windows whose frame lies over ``widget``."""
    rect = _global(widget)
    return [t for t in QApplication.topLevelWidgets()
            if t.isVisible() and t is not w and t.isWindow() and t.frameGeometry().intersects(rect)]


def _check_stop(qtbot, w, tour, label):
    stop = tour.stop
    target = stop.target(w)
    assert target is not None, f"{label}: the stop rings nothing"
    qtbot.waitUntil(lambda: target.isVisible() and not window_rect(w, target).isEmpty(), timeout=60_000)
    tour._place()
    assert tour.highlight.isVisible(), label
    assert tour.highlight.geometry().contains(window_rect(w, target)), label
    for widget in stop.named(w):
        assert widget.isVisible(), f"{label}: {widget.objectName() or type(widget).__name__} is named but hidden"
        covered = window_rect(w, widget).intersected(tour.geometry())
        assert covered.isEmpty(), f"{label}: the panel covers {type(widget).__name__} {widget.objectName()!r}"
    assert w.rect().contains(tour.geometry()), label
    assert tour.next_button.isVisible() and tour.next_button.isEnabled(), label
    assert not _windows_over(w, tour.next_button), f"{label}: a window covers Next"


@pytest.mark.parametrize("size", SIZES)
def test_every_stop_rings_a_visible_widget_and_leaves_what_it_names_in_view(qtbot, make_window,
                                                                            tiny_store_template, size):
    w = make_window(tiny_store_template)
    w.resize(*size)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == size)
    tour = w.show_tour()
    for i in range(len(STOPS)):
        assert tour.index == i and tour.stop is STOPS[i]
        _check_stop(qtbot, w, tour, f"stop {i + 1} ({STOPS[i].title}) at {size}")
        if i < len(STOPS) - 1:
            qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.next_button.text() == "Done"


@pytest.mark.parametrize("size", SIZES)
def test_the_why_window_opens_beside_the_panel_not_over_next(qtbot, make_window, tiny_store_template, size):
    w = make_window(tiny_store_template)
    w.resize(*size)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == size)
    tour = w.show_tour()
    qtbot.keyClicks(w.search_panel.query, "a cat sleeping in the sun")
    qtbot.waitUntil(lambda: w.search_panel.last_result is not None, timeout=60_000)
    tour.go(3)
    assert "Why" in tour.stop.title
    w.search_panel.table.selectRow(0)
    qtbot.mouseClick(w.search_panel.why_button, Qt.MouseButton.LeftButton)
    dialog = w.search_panel.why_dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
    qtbot.waitUntil(lambda: not dialog.frameGeometry().intersects(_global(tour)), timeout=5_000)
    qtbot.wait(400)                    # the panel's own placing ticks: nothing moves back over it
    assert not _windows_over(w, tour.next_button) and not _windows_over(w, tour)
    assert dialog.width() >= dialog.minimumSizeHint().width()
    assert QRect(w.frameGeometry()).contains(dialog.frameGeometry())     # over the main window, beside the panel
    dialog.close()


def test_the_fillmask_stop_offline_offers_the_lab_and_a_folder(qtbot, make_window, tiny_store_template,
                                                               tiny_distilbert, monkeypatch):
    w = make_window(tiny_store_template)
    tour = w.show_tour()
    tour.go(4)
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None, timeout=60_000)
    assert not w.state.inspect_backend.has_mlm                    # minilm: no masked-LM head
    body = tour.body.text()
    assert "train one in the lab" in body and "open a model folder" in body
    assert "Inspect with</b> bar" not in body                    # the old advice: offline, nothing there works
    offers = {b.text(): b for b in tour.action_buttons}
    assert {"Train one in the lab", "Open a model folder…"} <= set(offers)

    qtbot.mouseClick(offers["Train one in the lab"], Qt.MouseButton.LeftButton)
    train = w.optional_panels["Train"].run_panel
    assert w.tabs.tabText(w.tabs.currentIndex()) == "Train"
    assert train.start_from.currentData() == ("minilm", "wordpiece")
    assert train.objective.currentData() == "mlm" and train.steps.value() == 300
    _check_stop(qtbot, w, tour, "the lab detour")
    assert tour.stop.target(w) is train.start_button and train.start_button.isEnabled()
    assert tour.index == 4 and tour.back_button.isEnabled()
    qtbot.mouseClick(tour.back_button, Qt.MouseButton.LeftButton)
    assert tour.index == 4 and tour.stop is STOPS[4]
    assert w.tabs.tabText(w.tabs.currentIndex()) == "Fill-mask"

    # a folder with a masked-LM head: the stop then says how to use it, and the tab fills masks
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: str(tiny_distilbert)))
    offers = {b.text(): b for b in tour.action_buttons}
    qtbot.mouseClick(offers["Open a model folder…"], Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: getattr(w.state.inspect_backend, "has_mlm", False), timeout=60_000)
    qtbot.waitUntil(lambda: not tour.action_buttons, timeout=5_000)
    fill = w.optional_panels["Fill-mask"]
    assert "press Enter" in tour.body.text()
    _check_stop(qtbot, w, tour, "fill-mask with a head")
    assert tour.stop.target(w) is fill.text_edit
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.index == 5


def test_the_causal_stop_and_step_by_steps_map_shown_and_offers_never_cut(qtbot, make_window, tiny_store_template,
                                                                        monkeypatch):
    from app.gui.tour import stops as S
    w = make_window(tiny_store_template)
    titles = [s.tab for s in STOPS]
    assert titles.index("Causal") == titles.index("Map") - 1
    w.show_panel("Step by step")
    w.optional_panels["Step by step"].set_view(2)                    # Batch of two: no map on screen
    tour = w.show_tour()
    tour.go(titles.index("Step by step"))
    _check_stop(qtbot, w, tour, "step by step from Batch of two")
    monkeypatch.setattr(S, "_ready_mlm_models", lambda: ["/home/someone/models/bert-with-head"])
    tour.go(titles.index("Fill-mask"))
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None, timeout=60_000)
    tour.go(titles.index("Fill-mask"))
    assert "/home/someone" not in tour.body.text() and "bert-with-head" in tour.body.text()
    assert len(tour.action_buttons) == 3
    qtbot.waitUntil(lambda: all(b.isVisible() for b in tour.action_buttons))    # shown once laid out
    for b in tour.action_buttons:                                    # each label whole
        assert b.isVisible() and b.width() >= b.sizeHint().width(), b.text()
    tour.go(titles.index("Causal"))
    _check_stop(qtbot, w, tour, "the causal stop")
    assert "Run sweep" in tour.body.text()


def test_the_features_stop_rings_train_and_what_it_names_is_there(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    titles = [s.tab for s in STOPS]
    assert titles.index("Features") == titles.index("Causal") - 1
    tour = w.show_tour()
    tour.go(titles.index("Features"))
    assert w.tabs.tabText(w.tabs.currentIndex()) == "Features"
    panel = w.optional_panels["Features"]
    panel.pages.setCurrentWidget(panel.sweep_box)        # a page left open: the stop shows the browser's
    tour.go(titles.index("Features"))
    assert panel.pages.currentIndex() == 0
    _check_stop(qtbot, w, tour, "the features stop")
    assert tour.stop.target(w) is panel.bar.train_button
    body = tour.body.text()
    # what it names is there: the folder box, Train, the Quality and Sweep pages, and the tokens it says are set
    assert "<b>Folder</b>" in body and "<b>Train</b>" in body
    assert {"Quality", "Sweep"} <= {panel.pages.tabText(i) for i in range(panel.pages.count())}
    assert f"{panel.bar.tokens_box.value():,} tokens" in body
    assert panel.bar.source_box.currentData() == "sample" and "sample corpus" in body
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.stop.tab == "Causal"
