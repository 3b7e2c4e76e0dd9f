"""Help → Start here (app/gui/tour/guide.py) and the panels' state kept across restarts
(app/gui/panel_state.py): a window is closed and a new one opened on the same settings file."""
from __future__ import annotations

from PySide6.QtCore import QRect, Qt

from app.gui.tour.guide import DONT_SHOW_KEY, STOPS


def _current_tab(w) -> str:
    return w.tabs.tabText(w.tabs.currentIndex())


def _window_rect(w, widget) -> QRect:
    return QRect(widget.mapTo(w, widget.rect().topLeft()), widget.size())


def test_tour_walks_the_tabs_and_rings_each_stops_widget(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    tour = w.show_tour()
    assert tour.isVisible() and tour.index == 0
    seen = []
    for i, stop in enumerate(STOPS):
        assert tour.index == i
        assert _current_tab(w) == stop.tab
        target = stop.target(w)
        if target is not None:
            qtbot.waitUntil(lambda t=target: t.isVisible())
            tour.highlight.update_place()
            assert tour.highlight.isVisible()
            assert tour.highlight.geometry().contains(_window_rect(w, target).intersected(w.rect()))
            # the panel leaves most of the ringed widget in view (a large heatmap cannot be missed whole)
            ring = tour.highlight.geometry()
            covered = ring.intersected(tour.geometry())
            assert covered.width() * covered.height() <= 0.25 * ring.width() * ring.height(), stop.tab
        else:
            assert not tour.highlight.isVisible()
        # the panel sits inside the window, and the learner can still use the tab under it
        assert w.rect().contains(tour.geometry())
        seen.append(_current_tab(w))
        if i < len(STOPS) - 1:
            qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert seen[:5] == ["Search", "Attention", "Step by step", "Search", "Fill-mask"]
    qtbot.mouseClick(tour.back_button, Qt.MouseButton.LeftButton)
    assert tour.index == len(STOPS) - 2 and _current_tab(w) == STOPS[-2].tab
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.next_button.text() == "Done"
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert not tour.isVisible() and not tour.highlight.isVisible()


def test_dont_show_again_is_remembered_and_help_still_opens_it(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template, start=False)
    tour = w.maybe_show_tour()
    assert tour is not None and tour.isVisible()          # the first launch shows it
    tour.dont_show.setChecked(True)
    qtbot.mouseClick(tour.close_button, Qt.MouseButton.LeftButton)
    assert not tour.isVisible()
    w.close()

    again = make_window(start=False)
    assert again.settings.value(DONT_SHOW_KEY, type=bool) is True
    assert again.maybe_show_tour() is None and again.tour is None
    help_menu = next(a.menu() for a in again.menuBar().actions() if a.text() == "&Help")
    start_here = next(a for a in help_menu.actions() if a.text().startswith("&Start here"))
    start_here.trigger()
    assert again.tour is not None and again.tour.isVisible() and again.tour.dont_show.isChecked()
    again.tour.dont_show.setChecked(False)                 # un-ticking brings it back at start-up
    again.close()
    third = make_window(start=False)
    assert third.maybe_show_tour() is not None


def test_panel_state_survives_closing_the_window(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    att = w.optional_panels["Attention"]
    att.text_edit.setText("Birds sing at dawn.")
    att.pair_edit.setText("The sun rises.")
    att.set_mode("head")
    att.layer_spin.setValue(4)        # range 1..1 until the first inspection: set after it
    qtbot.waitUntil(lambda: att.layer_spin.maximum() == 6, timeout=60_000)
    att.layer_spin.setValue(4)
    att.head_spin.setValue(7)
    att.set_mode("mean")
    walk = w.optional_panels["Step by step"]
    walk.text_edit.setText("Rivers carve valleys.")
    walk.layer_spin.setMaximum(6)
    walk.head_spin.setMaximum(12)
    walk.layer_spin.setValue(3)
    walk.head_spin.setValue(5)
    walk.pooling_combo.setCurrentText("cls")
    fill = w.optional_panels["Fill-mask"]
    fill.text_edit.setText("The [MASK] barked at night.")
    w.map_panel.clusters.setValue(5)
    w.show_panel("Fill-mask")
    w.close()

    again = make_window(tiny_store_template)
    assert _current_tab(again) == "Fill-mask"
    att2 = again.optional_panels["Attention"]
    assert (att2.text_edit.text(), att2.pair_edit.text(), att2.mode) == ("Birds sing at dawn.", "The sun rises.",
                                                                         "mean")
    # the model's real range arrives with the inspection of the restored sentence; the values stay
    qtbot.waitUntil(lambda: att2.inspection is not None and "birds" in att2.inspection.tokens, timeout=60_000)
    assert (att2.layer_spin.value(), att2.head_spin.value()) == (4, 7)
    assert att2.layer_slider.value() == 4
    walk2 = again.optional_panels["Step by step"]
    assert walk2.text_edit.text() == "Rivers carve valleys."
    assert (walk2.layer_spin.value(), walk2.head_spin.value(), walk2.pooling_combo.currentText()) == (3, 5, "cls")
    assert again.optional_panels["Fill-mask"].text_edit.text() == "The [MASK] barked at night."
    assert again.map_panel.clusters.value() == 5


def test_unbuilt_panels_keep_their_saved_state_and_bad_values_are_ignored(qtbot, make_window):
    from app.gui import panel_state
    w = make_window(start=False)
    w.settings.setValue("panels/attention", '{"text": "Kept while unbuilt.", "layer": "x", "mode": 3}')
    w.settings.setValue("panels/map", "not json")
    w.close()                                  # no panel was built: nothing overwrites them
    assert panel_state.load(w.settings, "Attention")["text"] == "Kept while unbuilt."
    again = make_window(start=False)
    att = again.optional_panels["Attention"]
    assert att.text_edit.text() == "Kept while unbuilt."
    assert att.layer_spin.value() == 1 and att.mode == "head"      # the wrong types: defaults kept
    assert again.map_panel.clusters.value() == 8
