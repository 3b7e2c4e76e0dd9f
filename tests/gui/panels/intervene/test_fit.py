"""The Intervene tab in the real window at the default 1200×780 and at 1600×1000, on minilm: every
switch reachable without a horizontal scrollbar (12 heads with titles that do not run together,
positions and seed, Patching in view), no label cut, the before | after | difference plots with a
readable height per token, head numbers that do not touch, no axis in "(x0.001)" units, empty
views that say what to do, and no absolute folder path in a label."""
from __future__ import annotations

import re

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6 import QtCore, QtWidgets

from core.intervene.spec import Intervention

SIZES = [(1200, 780), (1600, 1000)]
HEADS = {(0, 3), (1, 6), (2, 2), (5, 9)}


def plain(text: str) -> str:
    return re.sub(r"<[^>]+>", "", text).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def inside(widget, area) -> bool:
    """Whether ``widget`` lies whole inside ``area`` (an ancestor), horizontally and vertically."""
    top_left = widget.mapTo(area, QtCore.QPoint(0, 0))
    rect = QtCore.QRect(top_left, widget.size())
    return QtCore.QRect(QtCore.QPoint(0, 0), area.size()).contains(rect)


def cut_labels(root) -> list[str]:
    """Visible one-line labels whose text is wider than the label (a cut word)."""
    cut = []
    for label in root.findChildren(QtWidgets.QLabel):
        if not label.isVisible() or label.wordWrap() or not label.text():
            continue
        for line in plain(label.text().replace("<br>", "\n")).split("\n"):
            if label.fontMetrics().horizontalAdvance(line) > label.contentsRect().width() + 1:
                cut.append(f"{line!r} ({label.fontMetrics().horizontalAdvance(line)} px in {label.width()})")
    return cut


def visible_axes(root):
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible():
            continue
        for item in view.scene().items():
            if isinstance(item, pg.AxisItem) and item.isVisible():
                yield item


def open_intervene(qtbot, make_window, template, size):
    w = make_window(template)
    w.resize(*size)
    w.show_panel("Intervene")
    panel = w.optional_panels["Intervene"]
    qtbot.waitUntil(lambda: panel.follow.backend is not None and panel.editor.heads.shape == (6, 12),
                    timeout=60_000)
    qtbot.waitUntil(lambda: (w.width(), w.height()) == size, timeout=5_000)
    qtbot.wait(50)
    return w, panel


def apply(qtbot, panel, spec):
    panel.editor.set_value(spec)
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as sig:
        panel.apply()
    qtbot.wait(50)
    return sig.args[0]


@pytest.mark.parametrize("size", SIZES)
def test_every_switch_is_reachable_and_no_label_is_cut(qtbot, make_window, tiny_store_template, size):
    w, panel = open_intervene(qtbot, make_window, tiny_store_template, size)
    assert (w.width(), w.height()) == size                     # the tab did not widen the window
    scroll, editor = panel.editor_scroll, panel.editor
    view = scroll.viewport()
    assert not scroll.horizontalScrollBar().isVisible()
    assert editor.width() <= view.width()
    for (l, h), button in editor.heads.buttons.items():        # heads 10-12 were behind a scrollbar
        assert inside(button, view), f"head {l + 1}.{h + 1} is not reachable"
    for widget in (editor.positions, editor.shuffle_seed, editor.temperature, editor.no_scale,
                   editor.text_b, editor.sites, editor.zero_button, editor.mean_button):
        assert inside(widget, view), f"{widget.objectName() or widget} is cut or below the fold"
    for box in editor.layers.boxes.values():
        assert inside(box, view)
    # the heads' titles: each number fits its column, and neighbours do not touch ("9101112")
    titles = [editor.heads.findChild(QtWidgets.QLabel, f"head_title_{h}") for h in range(1, 13)]
    for t in titles:
        assert t.fontMetrics().horizontalAdvance(t.text()) + 4 <= t.width()
    for a, b in zip(titles, titles[1:]):
        assert a.geometry().right() < b.geometry().left()
    assert cut_labels(panel) == []
    # the run's progress has room for its longest words
    bar = panel.progress
    assert bar.width() >= bar.fontMetrics().horizontalAdvance("Mean head outputs 576/576")


@pytest.mark.parametrize("size", SIZES)
def test_the_plots_are_legible_and_their_numbers_do_not_touch(qtbot, make_window, tiny_store_template, size):
    w, panel = open_intervene(qtbot, make_window, tiny_store_template, size)
    effects = apply(qtbot, panel, Intervention(heads=HEADS, ffn_off={0}))
    n_tokens = len(effects.attention.tokens)
    view = panel.effects_view
    for name in ("before", "after", "difference"):
        hm = view.maps[name]
        assert hm.isVisible(), name
        line = hm.fontMetrics().height()
        qtbot.waitUntil(lambda hm=hm, line=line: hm.plot.vb.height() / n_tokens >= line, timeout=5_000)
    for name, grid in view.grids.items():
        top = grid.plot.getAxis("top")
        ticks = top._tickLevels[0] if top._tickLevels else []
        xs = [grid.plot.vb.mapViewToScene(QtCore.QPointF(x, 0)).x() for x, _ in ticks]
        width = max(grid.fontMetrics().horizontalAdvance(t) for _, t in ticks)
        assert len(ticks) >= 4
        assert min(np.diff(xs)) >= width + 2, f"{name}: head numbers touch"
    for axis in visible_axes(panel):
        assert axis.autoSIPrefixScale == 1.0 and "(x" not in axis.labelString(), axis.labelString()
    assert cut_labels(panel) == []


@pytest.mark.parametrize("size", SIZES)
def test_empty_views_say_what_to_do_instead_of_drawing_axes(qtbot, make_window, tiny_store_template, size):
    w, panel = open_intervene(qtbot, make_window, tiny_store_template, size)

    def empty_everywhere(words):
        for stack in (panel.effects_view.stack, panel.fill_view.stack):
            assert stack.is_empty and words in plain(stack.said())
        assert not any(g.isVisible() for g in panel.effects_view.grids.values())
        assert not any(m.isVisible() for m in panel.effects_view.maps.values())

    empty_everywhere("Apply")
    panel.views.setCurrentWidget(panel.importance_view)
    qtbot.wait(20)
    imp = panel.importance_view
    assert imp.stack.is_empty and "Compute map" in plain(imp.stack.said())
    assert not imp.heatmap.isVisible() and not imp.grid.isVisible()     # was a blue square titled "(x0.001)"
    assert list(visible_axes(panel)) == []
    panel.views.setCurrentWidget(panel.metrics_view)
    assert "Measure" in panel.metrics_view.note.text()

    panel.views.setCurrentWidget(panel.effects_view)
    apply(qtbot, panel, Intervention(heads=HEADS))
    assert not panel.effects_view.stack.is_empty
    panel.clear()
    empty_everywhere("switched on")


def test_while_computing_the_view_says_so(qtbot, make_window, tiny_store_template, monkeypatch):
    import threading

    from app.gui.panels.intervene import compute as C
    release = threading.Event()
    real = C.effects_fn

    def slow(*a, **k):
        release.wait(20)
        return real(*a, **k)

    monkeypatch.setattr(C, "effects_fn", slow)
    w, panel = open_intervene(qtbot, make_window, tiny_store_template, SIZES[0])
    panel.editor.set_value(Intervention(heads=HEADS))
    panel.apply()
    qtbot.waitUntil(lambda: panel.progress.isVisible())
    assert "Computing" in plain(panel.effects_view.stack.said())
    assert not any(g.isVisible() for g in panel.effects_view.grids.values())
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000):
        release.set()


def test_no_absolute_folder_path_in_a_label(qtbot, make_window, tiny_store_template, tiny_distilbert):
    from app.gui.wording import model_label
    w, panel = open_intervene(qtbot, make_window, tiny_store_template, SIZES[0])
    folder = str(tiny_distilbert)
    w.inspect_bar.set_weights(folder)
    w.state.set_inspect_choice(w.state.choice.with_(model=folder))
    qtbot.waitUntil(lambda: panel.follow.backend is not None and str(panel.follow.backend.model_name) == folder,
                    timeout=60_000)
    qtbot.waitUntil(lambda: panel.editor.heads.shape == (int(panel.follow.backend.n_layers),
                                                         int(panel.follow.backend.n_heads)))
    shown = [plain(lbl.text()) for lbl in panel.findChildren(QtWidgets.QLabel) if lbl.isVisible()]
    assert not any(folder in t for t in shown), "the folder's path is in a label"
    assert any(model_label(folder) in t for t in shown)          # its name is
    panel.editor.set_value(Intervention(heads={(0, 0)}))
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000):
        panel.apply()
    shown = [plain(lbl.text()) for lbl in panel.findChildren(QtWidgets.QLabel) if lbl.isVisible()]
    assert not any(folder in t for t in shown)
    assert model_label(folder) in plain(panel.effects_view.summary.text())
    assert panel.effects_view.summary.toolTip() == folder       # the path, where it is asked for


def test_the_tour_stops_at_intervene_and_closes_the_why_window_when_leaving_stop_4(qtbot, make_window,
                                                                                  tiny_store_template):
    from PySide6.QtCore import Qt

    from app.gui.tour.stops import STOPS
    w = make_window(tiny_store_template)
    w.resize(*SIZES[0])
    tour = w.show_tour()
    qtbot.keyClicks(w.search_panel.query, "a cat sleeping in the sun")
    qtbot.waitUntil(lambda: w.search_panel.last_result is not None, timeout=60_000)
    tour.go(3)
    assert "Why" in tour.stop.title
    w.search_panel.table.selectRow(0)
    qtbot.mouseClick(w.search_panel.why_button, Qt.MouseButton.LeftButton)
    dialog = w.search_panel.why_dialog
    qtbot.waitUntil(lambda: dialog is not None and dialog.isVisible())
    qtbot.mouseClick(tour.next_button, Qt.MouseButton.LeftButton)
    assert tour.index == 4 and not dialog.isVisible()          # it stayed over stops 5-6
    where = [i for i, s in enumerate(STOPS) if s.tab == "Intervene"]
    assert where, "no Intervene stop"
    tour.go(where[0])
    assert w.tabs.tabText(w.tabs.currentIndex()) == "Intervene"
    panel = w.optional_panels["Intervene"]
    assert tour.stop.target(w) is panel.editor.heads
    qtbot.waitUntil(panel.editor.heads.isVisible, timeout=5_000)
    assert "Apply" in tour.body.text() and panel.apply_button in tour.stop.named(w)
    tour.dismiss()
