"""A hit double-clicked in Search opens Attention paired with the query that found it, every
time: never an earlier query left in "Pair with"."""
from __future__ import annotations

from PySide6 import QtCore

from tests.support.app_fixtures import wait_idle


def double_click_first_hit(qtbot, search):
    table = search.table
    qtbot.waitExposed(table)
    index = search.results.index(0, 2)
    rect = table.visualRect(index)
    qtbot.mouseClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())


def test_each_double_clicked_hit_is_paired_with_its_own_query(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    search = w.search_panel
    attention = None
    for query in ("the weather today", "a planet and its moons"):
        w.tabs.setCurrentWidget(search)
        with qtbot.waitSignal(search.results_shown, timeout=60_000) as sig:
            search.query.setText(query)
        wait_idle(qtbot, w)
        hit = sig.args[0].hits[0]
        double_click_first_hit(qtbot, search)
        attention = w.optional_panels["Attention"]
        qtbot.waitUntil(lambda a=attention, q=query: a.pair_edit.text() == q and not w.state.jobs.busy
                        and a.inspection is not None, timeout=60_000)
        assert w.tabs.currentWidget().findChild(type(attention)) is attention or w.tabs.currentWidget() is attention
        assert attention.text_edit.text() == hit.text
        # what is drawn is the pair (hit, this query), not the hit with an earlier query
        backend = w.state.inspect_backend
        expected = backend.inspect(hit.text, query)
        assert attention.inspection.tokens == expected.tokens


def test_a_hit_double_clicked_while_the_last_inspection_runs_wins(qtbot, make_window, tiny_store_template):
    """The second pair is asked for while the first is still being inspected (it waits, then runs)."""
    w = make_window(tiny_store_template)
    search, hits = w.search_panel, {}
    for query in ("the weather today", "a planet and its moons"):
        w.tabs.setCurrentWidget(search)
        with qtbot.waitSignal(search.results_shown, timeout=60_000) as sig:
            search.query.setText(query)
        hits[query] = sig.args[0].hits[0]
        double_click_first_hit(qtbot, search)           # no waiting: the first may still run
    attention = w.optional_panels["Attention"]
    wait_idle(qtbot, w)
    query = "a planet and its moons"
    assert (attention.text_edit.text(), attention.pair_edit.text()) == (hits[query].text, query)
    assert attention.inspection.tokens == w.state.inspect_backend.inspect(hits[query].text, query).tokens
