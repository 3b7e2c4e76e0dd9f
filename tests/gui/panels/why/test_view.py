"""The Why view (app/gui/panels/why/view.py) opened from a search result, against core/evaluate/why.py."""
from __future__ import annotations

import numpy as np
import pytest

from core.evaluate.why import explain

QUERY = "a dog that barks at the mail carrier"


def search(qtbot, window, query=QUERY):
    panel = window.search_panel
    with qtbot.waitSignal(panel.results_shown, timeout=20_000, check_params_cb=lambda r: r.query == query):
        panel.query.setText(query)
    return panel


def open_why(qtbot, panel, row):
    """Select ``row`` and press Why?; wait until the dialog shows that hit."""
    from PySide6.QtCore import Qt
    panel.table.selectRow(row)
    assert panel.why_button.isEnabled()
    hit = panel.results.hits[row]
    qtbot.mouseClick(panel.why_button, Qt.MouseButton.LeftButton)
    dialog = panel.why_dialog
    qtbot.waitUntil(lambda: dialog.why is not None and dialog._text == hit.text
                    and not panel.state.jobs.is_running("why"), timeout=20_000)
    return dialog, hit


def test_why_view_opens_from_a_result_and_shows_the_cores_numbers(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = search(qtbot, w)
    dialog, hit = open_why(qtbot, panel, 1)
    assert dialog.isVisible() and not dialog.isModal() and dialog.isSizeGripEnabled()

    ref = explain(w.state.backend, QUERY, hit.text, w.state.pooling)
    n, m = len(ref.tokens_a), len(ref.tokens_b)
    hm = dialog.heatmap
    assert hm.drawn_matrix().shape == (n, m)
    np.testing.assert_allclose(hm.drawn_matrix(), ref.contributions, atol=1e-6)
    assert hm.row_labels == ref.tokens_a and hm.col_labels == ref.tokens_b
    # the score they add up to is the search score shown in the table
    assert dialog.why.score == pytest.approx(hit.score, abs=1e-5)
    assert hm.drawn_matrix().sum() == pytest.approx(hit.score, abs=1e-5)
    assert f"{hit.score:.4f}" in dialog.header.text() and "= the search score" in dialog.header.text()
    # diverging colours centred on 0
    lo, hi = hm.levels()
    assert lo == pytest.approx(-hi) and hi == pytest.approx(np.abs(ref.contributions).max(), rel=1e-5)
    # per-token sums as bars: widths under/beside each sentence equal the row/column sums
    np.testing.assert_allclose(np.abs(ref.contributions.sum(axis=1)), hm.row_bars.opts["width"], atol=1e-6)
    np.testing.assert_allclose(np.abs(ref.contributions.sum(axis=0)), hm.col_bars.opts["height"], atol=1e-6)
    # top pairs in words, hover text
    top = ref.view().top_pairs(1)[0]
    assert f"{top[0]} ↔ {top[1]} {top[2]:.3f}" in dialog.pairs_label.text()
    i, j = np.unravel_index(np.argmax(ref.contributions), ref.contributions.shape)
    hm.hover(int(i), int(j))
    assert f"{ref.contributions[i, j]:+.4f}" in dialog.hover_label.text()
    assert "of the score" in hm.tooltip_text(int(i), int(j))

    # hiding special tokens: (n-2) x (m-2), with the hidden share stated
    dialog.hide_special.setChecked(True)
    assert hm.drawn_matrix().shape == (n - 2, m - 2)
    np.testing.assert_allclose(hm.drawn_matrix(), ref.contributions[1:-1, 1:-1], atol=1e-6)
    hidden = ref.view(True)
    assert f"{hidden.hidden_pairs} pairs" in dialog.hidden_label.text()
    assert f"{hidden.hidden_share:.0%}" in dialog.hidden_label.text()


def test_context_menu_opens_why_for_that_row(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = search(qtbot, w)
    table = panel.table
    pos = table.visualRect(panel.results.index(2, 2)).center()
    panel._show_context_menu(pos)
    menu = panel.context_menu
    texts = [a.text() for a in menu.actions()]
    assert texts == ["Why is this a hit?", "Inspect attention", "Step by step"]
    menu.actions()[0].trigger()
    menu.close()
    dialog = panel.why_dialog
    hit = panel.results.hits[2]
    qtbot.waitUntil(lambda: dialog.why is not None and dialog._text == hit.text, timeout=20_000)
    assert dialog.why.score == pytest.approx(hit.score, abs=1e-5)
    # a second request reuses the same window
    dialog2, hit2 = open_why(qtbot, panel, 0)
    assert dialog2 is dialog and dialog.why.score == pytest.approx(hit2.score, abs=1e-5)


def test_export_and_a_pooling_change_redoes_the_numbers(qtbot, make_window, tiny_store_template, tmp_path):
    from core.inspect.attention_maps import read_matrix_csv
    w = make_window(tiny_store_template)
    panel = search(qtbot, w)
    dialog, hit = open_why(qtbot, panel, 0)
    dialog.hide_special.setChecked(True)
    path = dialog.export_csv(tmp_path / "why.csv")
    matrix, rows, cols = read_matrix_csv(path)
    np.testing.assert_allclose(matrix, dialog.view.matrix, rtol=1e-7, atol=1e-12)
    assert rows == dialog.view.tokens_a and cols == dialog.view.tokens_b
    assert dialog.export_png(tmp_path / "why.png").stat().st_size > 1000

    # the app switches to CLS pooling: the open view follows (the whole score on [CLS]-[CLS])
    dialog.hide_special.setChecked(False)
    first = dialog.why
    w.state.set_choice(w.state.choice.with_(pooling="cls"))
    qtbot.waitUntil(lambda: dialog.why is not first and dialog.why.pooling == "cls", timeout=20_000)
    ref = explain(w.state.backend, QUERY, hit.text, "cls")
    np.testing.assert_allclose(dialog.heatmap.drawn_matrix(), ref.contributions, atol=1e-6)
    assert np.count_nonzero(dialog.heatmap.drawn_matrix()) == 1
    assert "search score" not in dialog.header.text()    # the old search score no longer applies


def test_three_quick_requests_run_the_first_and_the_newest(qtbot, minilm):
    """While one runs only the newest request waits; the first's result is not shown."""
    from app.gui.panels.why.view import WhyDialog
    from app.gui.state import AppState
    state = AppState()
    state.backend = minilm
    dialog = WhyDialog(state)
    qtbot.addWidget(dialog)
    started, shown = [], []
    state.job_started.connect(lambda job: started.append(job.args[3]) if job.key == "why" else None)
    dialog.shown.connect(shown.append)
    texts = ("a cat on a mat", "the stock market fell", "a dog barked at the postman")
    for text in texts:
        dialog.request(QUERY, text)
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=20_000)
    assert started == [texts[0], texts[2]]
    assert len(shown) == 1 and dialog.why is shown[0] and dialog._text == texts[2]
    assert shown[0].tokens_b[1:-1] == minilm.tokenizer.tokenize(texts[2])
    state.shutdown(5000)


def test_a_long_hit_does_not_swamp_the_dialog(qtbot, minilm):
    """A pasted page as the hit: the header shows its start and how much more, the whole text
    stays in the tooltip, and the heatmap keeps its room."""
    from app.gui.panels.why.view import HEADER_CHARS, WhyDialog
    from app.gui.state import AppState
    state = AppState()
    state.backend = minilm
    dialog = WhyDialog(state)
    qtbot.addWidget(dialog)
    hit = "a very long hit text " * 400
    dialog._set_header("short query", hit, "computing …")
    shown = dialog.header.text()
    assert len(shown) < HEADER_CHARS + 300 and f"+{len(hit) - HEADER_CHARS:,} characters" in shown
    assert hit in dialog.header.toolTip()
    dialog._set_header("short query", "a short hit", "done")
    assert "a short hit" in dialog.header.text() and dialog.header.toolTip() == ""
