"""The numbers written in heatmap cells (app/gui/widgets/cell_format.py) are the array's numbers:
every cell's painted text is read back and parsed against the array, for every step of a walk."""
from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6 import QtCore

from app.gui.widgets.cell_format import CellFormat, parse_cell

SENTENCE = "The cat sat on the mat because it was tired."
WINDOW = 8                                        # rows and columns brought into view at a time


def painted(hm) -> dict:
    """Paint the heatmap now and return what each cell was written with."""
    hm.grab()
    return dict(hm.values_item.drawn_texts)


def check_cells(hm, values, rows, cols):
    """Zoom to ``rows`` x ``cols``; every cell in view is written and parses back to the array."""
    QtCore.QCoreApplication.processEvents()          # the layout gives the heatmap its size first
    hm.plot.vb.setRange(xRange=(cols.start - 0.5, cols.stop - 0.5), yRange=(rows.start - 0.5, rows.stop - 0.5),
                        padding=0)
    texts = painted(hm)
    fmt = CellFormat.for_matrix(values)
    for i in rows:
        for j in cols:
            v = float(values[i, j])
            text = texts[i, j]
            if math.isinf(v):
                assert text == ("−∞" if v < 0 else "∞")
            elif v == 0:
                assert text == "0"
            else:
                assert text != "0", (i, j, v)
                assert abs(parse_cell(text) - v) <= fmt.tolerance(v), (i, j, v, text)
    return texts


@pytest.mark.parametrize("values", [
    np.array([[4.51, 6.6, -0.3], [3.81612, -np.inf, 0.0]]),
    np.array([[0.999, 0.0004, 0.5]]),
    np.array([[41.25, -0.01, 3e-5]]),
    np.array([[2e-5, -7e-6]]),
    np.array([[12345.6, -3.0]]),
])
def test_every_value_parses_back(values):
    fmt = CellFormat.for_matrix(values)
    for v in values.ravel():
        text = fmt.text(v)
        if math.isinf(v) or v == 0:
            assert text in ("−∞", "0")
        else:
            assert text != "0" and abs(parse_cell(text) - v) <= fmt.tolerance(v), (v, text)


def test_weights_keep_three_digits_and_scores_are_not_clipped_to_one():
    assert CellFormat.for_matrix([[0.9971, 0.0029]]).text(0.9971) == ".997"
    scores = CellFormat.for_matrix([[6.6, -2.0, 3.81612]])
    assert scores.text(3.81612) == "3.82" and scores.text(6.6) == "6.60"
    assert CellFormat.for_matrix([[5.0, -1e-9]]).text(-1e-9) == ".00"    # not an exact 0, not negative zero


def select_tab(w, title):
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == title))


@pytest.fixture
def window(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    return w


def test_numbers_of_every_step_are_the_arrays(qtbot, window):
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        panel.explain_text(SENTENCE, layer=4, head=6)
    walk = sig.args[0]
    panel.step_view.numbers.setChecked(True)
    for step in walk.steps:
        panel.show_step(step.name)
        hm = panel.step_view.heatmap
        values = hm.raw
        np.testing.assert_array_equal(values, np.atleast_2d(np.asarray(step.values, np.float64))
                                      .reshape(values.shape))
        R, C = values.shape
        for r0 in range(0, R, WINDOW):
            check_cells(hm, values, range(r0, min(R, r0 + WINDOW)), range(0, min(C, WINDOW)))
        if C > WINDOW:
            check_cells(hm, values, range(0, min(R, WINDOW)), range(C - WINDOW, C))
    # the cell: layer 4 (1-based) head 6, the score of query "it" for key "cat"
    panel.show_step("scores")
    hm = panel.step_view.heatmap
    tokens = list(walk.tokens)
    i, j = tokens.index("it"), tokens.index("cat")
    hm.reset_zoom()
    qtbot.wait(50)
    texts = painted(hm)
    assert texts, "the scores of a 13-token sentence are written at 1200x780"
    assert texts[i, j] == CellFormat.for_matrix(hm.raw).text(hm.raw[i, j]) != "1"
    assert all(texts[r, 0] != "1" for r in range(len(tokens)) if hm.raw[r, 0] > 1.5)


def test_cells_too_small_say_so(qtbot, window):
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    with qtbot.waitSignal(panel.explained, timeout=60_000):
        panel.explain_text(SENTENCE, layer=1, head=1)
    panel.step_view.numbers.setChecked(True)
    panel.show_step("q")                               # 13 x 384: no cell is wide enough at full view
    hm = panel.step_view.heatmap
    hm.reset_zoom()
    qtbot.wait(50)
    assert not painted(hm)
    qtbot.waitUntil(lambda: hm.values_hint.scene() is not None)
    assert "too small for numbers" in hm.values_hint.text
    hm.plot.vb.setRange(xRange=(-0.5, 4.5), yRange=(-0.5, 4.5), padding=0)
    assert painted(hm)
    assert hm.values_hint.scene() is None
    panel.step_view.numbers.setChecked(False)
    assert hm.values_hint.scene() is None


def test_masked_cells_read_minus_infinity(qtbot):
    from app.gui.widgets.matrix_heatmap import MatrixHeatmap
    hm = MatrixHeatmap()
    qtbot.addWidget(hm)
    hm.resize(500, 400)
    hm.show()
    m = np.array([[1.5, -np.inf, -np.inf], [0.25, 2.75, -np.inf], [-3.0, 0.0, 1.0]])
    hm.show_matrix(m, list("abc"), list("abc"), signed=True)
    hm.set_show_values(True)
    qtbot.wait(20)
    texts = check_cells(hm, m, range(3), range(3))
    assert texts[0, 1] == "−∞" and texts[2, 1] == "0"
    QtCore.QCoreApplication.processEvents()
