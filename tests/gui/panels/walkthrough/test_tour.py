"""The Step by step tab as a guided tour (architecture map, input → weights → output, the value
panel, Numbers, wide summaries, the page's fit, wheel and tooltips) on minilm, the real model.
References: the torch encoder's own modules and state_dict, and NumPy recomputations."""
import math
import re

import numpy as np
import pytest
import torch
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.panels.walkthrough.architecture_map import CURRENT
from app.gui.state import AppState
from core.walkthrough import steps as W
from tests.support.app_fixtures import explain_and_wait

TEXT = "The animal didn't cross the street because it was tired."


@pytest.fixture
def panel(make_walkthrough_panel, minilm):
    return make_walkthrough_panel(minilm, 1200, 780)


def explain(qtbot, panel, text=TEXT, **kw):
    return explain_and_wait(qtbot, panel, text, **kw)


def click_scene_item(qtbot, view, item):
    qtbot.waitExposed(view)
    view.ensureVisible(item)
    pos = view.mapFromScene(item.sceneBoundingRect().center())
    qtbot.mouseClick(view.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)


def click_cell(qtbot, hm, i, j):
    qtbot.waitExposed(hm)
    qtbot.wait(50)
    pos = hm.mapFromScene(hm.plot.vb.mapViewToScene(QtCore.QPointF(j, i)))
    qtbot.mouseClick(hm.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)


def model_qk(minilm, text, layer, head):
    """Q and K of one head from the torch encoder's own modules in float64 (no NumPy step code)."""
    if not _double:
        from core.encoder.model import Encoder
        fresh = Encoder(minilm.config)
        fresh.load_state_dict(minilm.encoder.state_dict())
        _double.append(fresh.double().eval())
    enc = _double[0]
    ids = torch.tensor([minilm.tokenizer(text)["input_ids"]])
    with torch.inference_mode():
        out = enc(ids, torch.ones_like(ids), torch.zeros_like(ids), output_hidden_states=True)
        x = out.hidden_states[layer]
        att = enc.transformer.layer[layer].attention
        cols = slice(head * 32, (head + 1) * 32)
        q, k = att.q_lin(x)[0, :, cols], att.k_lin(x)[0, :, cols]
    return q.numpy(), k.numpy()


_double: list = []      # minilm's encoder in float64, made once


def test_the_map_is_the_walk_and_every_block_is_clickable(qtbot, panel):
    w = explain(qtbot, panel, layer=2, head=4)
    amap = panel.arch_map
    assert list(amap.items) == [s.name for s in w.steps]
    T = len(w.tokens)
    labels = {lbl.data(0): lbl.text() for lbl in amap.edge_labels}
    assert labels[("layer_input", "q")] == f"{T} × 384" and labels[("q", "scores")] == f"{T} × 32"
    assert labels[("ffn_hidden", "ffn_activation")] == f"{T} × 1536"
    assert labels[("head_output", "heads_concat")] == f"12 × {T} × 32"
    assert "layers 1 … 6 repeat this block" in amap.repeat_item.toPlainText()
    for name in ("weights", "layernorm_2", "token_type_embeddings", "normalized"):
        with qtbot.waitSignal(panel.step_shown, timeout=5000) as sig:
            click_scene_item(qtbot, amap, amap.items[name])
        assert sig.args == [name] and panel.current_step_name() == name
        assert amap.items[name].pen().color() == CURRENT
        assert panel.step_view.title.text().endswith(w.step(name).title)
    qtbot.mouseClick(panel.prev_button, QtCore.Qt.MouseButton.LeftButton)
    assert amap.current == "pooled" and amap.items["pooled"].pen().color() == CURRENT
    assert amap.items["normalized"].pen().color() != CURRENT


def test_jump_to_layer_k_shows_the_same_step_with_that_layers_numbers(qtbot, panel, minilm):
    explain(qtbot, panel, layer=2, head=4)
    panel.show_step("scores")
    link = panel.arch_map.layer_links[4]
    assert link.text() == "5"
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        click_scene_item(qtbot, panel.arch_map, link)
    w = sig.args[0]
    assert (w.layer, w.head) == (4, 3) and panel.layer_spin.value() == 5
    assert panel.current_step_name() == "scores" and panel.arch_map.current == "scores"
    q, k = model_qk(minilm, TEXT, 4, 3)
    np.testing.assert_allclose(panel.step_view.heatmap.raw, q @ k.T / math.sqrt(32), atol=1e-6)
    assert panel.arch_map.layer_links[4].font().bold() and not panel.arch_map.layer_links[2].font().bold()


def test_input_weights_output_are_the_models_tensors(qtbot, panel, minilm):
    w = explain(qtbot, panel, layer=2, head=3)            # 1-based, as the spin boxes
    assert (w.layer, w.head) == (1, 2)
    sd = minilm.encoder.state_dict()
    strip = panel.step_view.weights_strip
    panel.show_step("q")
    assert strip.isVisible()
    np.testing.assert_array_equal(strip.heatmaps["W_Q"].raw,
                                  sd["transformer.layer.1.attention.q_lin.weight"][64:96].T.double().numpy())
    np.testing.assert_array_equal(strip.heatmaps["b_Q"].raw[0],
                                  sd["transformer.layer.1.attention.q_lin.bias"][64:96].double().numpy())
    np.testing.assert_array_equal(strip.heatmaps["input"].raw, w.step("layer_input").values)
    np.testing.assert_array_equal(strip.heatmaps["output"].raw, w.step("q").values)
    click_cell(qtbot, strip.heatmaps["W_Q"], 100, 5)            # a weight's cell is read in the value panel
    label = panel.step_view.value_panel.label.text()
    r, c = map(int, re.search(r"W_Q\[(\d+), (\d+)\]", label).groups())   # 384 rows: a pixel is ~3 rows
    assert abs(r - 100) <= 4 and c == 5
    w_q = float(sd["transformer.layer.1.attention.q_lin.weight"][64 + c, r])
    assert f"W_Q[{r}, {c}] = {w_q:.6g}" in label and "transformer.layer.1.attention.q_lin.weight" in label
    title = strip.findChild(QtWidgets.QLabel, "weights_title_input")
    index = [s.name for s in w.steps].index("layer_input") + 1
    assert f"step {index}, {w.step('layer_input').title}" in title.text()
    with qtbot.waitSignal(panel.step_shown, timeout=5000) as sig:
        title.linkActivated.emit("#")                  # the input's name goes to its step
    assert sig.args == ["layer_input"] and not strip.isVisible()
    for name, key, symbol in (("attention_output", "transformer.layer.1.attention.out_lin.weight", "W_O"),
                              ("ffn_hidden", "transformer.layer.1.ffn.lin1.weight", "W₁"),
                              ("ffn_output", "transformer.layer.1.ffn.lin2.weight", "W₂")):
        panel.show_step(name)
        np.testing.assert_array_equal(strip.heatmaps[symbol].raw, sd[key].T.double().numpy())
    panel.show_step("layernorm_1")
    np.testing.assert_array_equal(strip.heatmaps["γ₁"].raw[0],
                                  sd["transformer.layer.1.sa_layer_norm.weight"].double().numpy())
    np.testing.assert_array_equal(strip.heatmaps["input"].raw, w.step("residual_1").values)


def test_value_panel_breaks_a_score_into_its_q_k_terms(qtbot, panel, minilm):
    w = explain(qtbot, panel, layer=3, head=1)
    assert (w.layer, w.head) == (2, 0)
    panel.show_step("scores")
    i, j = w.tokens.index("it"), w.tokens.index("animal")
    click_cell(qtbot, panel.step_view.heatmap, i, j)
    vp = panel.step_view.value_panel
    assert vp.cell == ("scores", i, j)
    q, k = model_qk(minilm, TEXT, 2, 0)
    terms = q[i] * k[j]
    order = sorted(range(32), key=lambda d: -abs(terms[d]))
    table = [[vp.table.item(r, c).text() for c in range(4)] for r in range(vp.table.rowCount())]
    assert [int(row[0]) for row in table] == order
    for row, d in zip(table, order):
        assert [float(x) for x in row[1:]] == pytest.approx([q[i, d], k[j, d], terms[d]], abs=6e-5)
    score = terms.sum() / math.sqrt(32)
    assert vp.terms.score == pytest.approx(score, abs=1e-5)
    assert f"<b>{vp.terms.score:.6g}</b>" in vp.total.text()
    text = vp.label.text()
    assert f"scores[{i}, {j}] = {w.step('scores').values[i, j]:.6g}" in text
    assert f"query token {i} 'it'" in text and f"key token {j} 'animal'" in text
    # the cell stays pinned when the same step is shown for another head
    with qtbot.waitSignal(panel.explained, timeout=60000):
        panel.head_spin.setValue(4)
    q4, k4 = model_qk(minilm, TEXT, 2, 3)
    assert vp.cell == ("scores", i, j)
    assert vp.terms.score == pytest.approx(float(q4[i] @ k4[j]) / math.sqrt(32), abs=1e-5)


def test_value_panel_names_head_dimensions(qtbot, panel):
    w = explain(qtbot, panel, layer=1, head=6)
    panel.show_step("k")
    click_cell(qtbot, panel.step_view.heatmap, 2, 7)
    text = panel.step_view.value_panel.label.text()
    assert f"k[2, 7] = {w.step('k').values[2, 7]:.6g}" in text
    assert "dimension 7 of head 6 (column 167 of the model" in text
    assert not panel.step_view.value_panel.table.isVisible()


def test_numbers_print_in_small_matrices_and_wide_ones_get_a_summary(qtbot, panel):
    w = explain(qtbot, panel)
    T = len(w.tokens)
    view = panel.step_view
    panel.show_step("weights")
    view.numbers.setChecked(True)
    view.heatmap.grab()
    assert view.heatmap.values_shown() and view.heatmap.values_item.drawn == T * T
    assert not view.wide_summary.isVisible()
    panel.show_step("ffn_hidden")
    assert view.wide_summary.isVisible() and view.wide_summary.rowCount() == T
    h = np.asarray(w.step("ffn_hidden").values)
    for r in (0, T // 2, T - 1):
        assert float(view.wide_summary.item(r, 1).text()) == pytest.approx(np.linalg.norm(h[r]), rel=1e-3)
        top = np.argsort(-np.abs(h[r]))[:3]
        assert view.wide_summary.item(r, 3).text().startswith(f"d{top[0]} {h[r, top[0]]:+.3g}")
        assert view.wide_summary.item(r, 0).text() == f"{r} {w.tokens[r]}"


def test_no_attention_weight_shows_before_the_softmax_step(qtbot, panel):
    w = explain(qtbot, panel)
    view = panel.step_view
    names = [s.name for s in w.steps]
    built = []
    view.row_clicked.connect(built.append)
    for name in names[:names.index("weights")]:
        panel.show_step(name)
        assert not view.build_up.isVisible(), name
        if np.ndim(w.step(name).values) == 2:
            click_cell(qtbot, view.heatmap, 1, 1)
            assert "weight" not in view.value_panel.label.text().lower(), name
    assert not built
    panel.show_step("weights")
    assert view.build_up.isVisible()


def test_the_page_fits_1200_by_780_with_previous_and_next_visible(qtbot, make_window, tiny_store_template):
    win = make_window(tiny_store_template)
    win.resize(1200, 780)
    win.state.request_walkthrough(TEXT)
    panel = win.optional_panels["Step by step"]
    qtbot.waitUntil(lambda: panel.walkthrough is not None, timeout=60000)
    assert (win.width(), win.height()) == (1200, 780)
    window_rect = win.rect()
    for name in panel.step_names():
        panel.show_step(name)
        qtbot.wait(1)
        for button in (panel.prev_button, panel.next_button):
            assert button.isVisible(), name
            top_left = button.mapTo(win, QtCore.QPoint(0, 0))
            assert window_rect.contains(QtCore.QRect(top_left, button.size())), (name, top_left)
            assert button.visibleRegion().boundingRect().size() == button.size(), name
    panel.show_step("weights")                 # tall (the weighted sum under the weights): it scrolls in the page
    qtbot.waitUntil(lambda: panel.page.verticalScrollBar().maximum() > 0, timeout=5_000)


def wheel(widget, dy=-120, modifiers=QtCore.Qt.KeyboardModifier.NoModifier):
    pos = QtCore.QPointF(widget.width() / 2, widget.height() / 2)
    event = QtGui.QWheelEvent(pos, widget.mapToGlobal(pos), QtCore.QPoint(0, 0), QtCore.QPoint(0, dy),
                              QtCore.Qt.MouseButton.NoButton, modifiers, QtCore.Qt.ScrollPhase.NoScrollPhase,
                              False)
    QtWidgets.QApplication.sendEvent(widget, event)


def test_plain_wheel_scrolls_the_page_and_ctrl_wheel_zooms_the_plot(qtbot, panel):
    explain(qtbot, panel)
    panel.resize(1200, 600)
    panel.show_step("ffn_hidden")                       # tall: weights strip, heatmap, summary
    qtbot.waitExposed(panel)
    qtbot.wait(10)
    bar, hm = panel.page.verticalScrollBar(), panel.step_view.heatmap
    assert bar.maximum() > 0
    bar.setValue(0)
    before = hm.plot.vb.viewRange()
    wheel(hm.viewport())
    assert bar.value() > 0 and hm.plot.vb.viewRange() == before
    scrolled = bar.value()
    wheel(hm.viewport(), dy=120, modifiers=QtCore.Qt.KeyboardModifier.ControlModifier)   # zoom in
    assert bar.value() == scrolled and hm.plot.vb.viewRange() != before
    strip_plot = panel.step_view.weights_strip.heatmaps["W₁"]       # made after the page was built
    wheel(strip_plot.viewport(), dy=120)
    assert bar.value() < scrolled


def test_tooltips_stay_while_the_mouse_rests(qtbot, panel, monkeypatch):
    explain(qtbot, panel)
    shown = []
    original = QtWidgets.QToolTip.showText

    def spy(*args):
        shown.append(args)
        original(*args)
    monkeypatch.setattr(QtWidgets.QToolTip, "showText", spy)
    panel.show_step("scores")
    hm = panel.step_view.heatmap
    qtbot.waitExposed(hm)
    pos = hm.mapFromScene(hm.plot.vb.mapViewToScene(QtCore.QPointF(2, 3)))
    qtbot.mouseMove(hm.viewport(), pos)
    qtbot.waitUntil(lambda: len(shown) > 0, timeout=3000)
    assert "token <b>" in shown[-1][1] and shown[-1][-1] >= 60_000


def test_attention_rows_keep_their_token_number_with_cls_sep_hidden(qtbot, tiny_distilbert):
    from app.gui.panels.attention.panel import AttentionPanel
    from core.encoder.backends import get_backend
    backend = get_backend(str(tiny_distilbert))
    state = AppState()
    p = AttentionPanel(state, auto_inspect=False)
    qtbot.addWidget(p)
    p.show()
    state.backend = backend
    state.backend_changed.emit(backend)
    with qtbot.waitSignal(p.inspected, timeout=15000):
        p.inspect_text("the quick brown cat sat on the mat")
    tokens = p.inspection.tokens
    fox = tokens.index("cat")
    shown = p.heatmap.tooltip_text(fox, fox)
    p.hide_special.setChecked(True)
    hidden = p.heatmap.tooltip_text(fox - 1, fox - 1)               # one row up: [CLS] is gone
    assert f"(token {fox})" in shown and shown == hidden
    with qtbot.waitSignal(p.heatmap.hovered):
        p.heatmap.hover(fox - 1, 0)
    assert f"token {fox} sums to" in p.hover_label.text()
    state.shutdown(5000)


def test_walkthrough_steps_and_map_agree_with_the_core(minilm):
    """The panel's map is drawn from the walk's own config: a fresh walk names the same blocks."""
    from core.walkthrough.architecture import architecture
    w = W.explain(minilm, TEXT, layer=5, head=11)
    arch = architecture(w.config, len(w.tokens), w.layer, w.head)
    assert arch.steps == [s.name for s in w.steps] and arch.layer == 5 and arch.n_layers == 6


def test_a_model_changed_while_hidden_redraws_the_map_weights_and_pinned_cell(qtbot, panel, tiny_distilbert):
    """Nothing of the old model stays: the map is the new model's (no segment, 2 layers), the
    weights are its tensors, the pinned score is recomputed from its Q and K."""
    from core.encoder.backends import get_backend
    explain(qtbot, panel, "the cat sat on the mat .")
    panel.show_step("scores")
    click_cell(qtbot, panel.step_view.heatmap, 2, 3)
    panel.hide()
    tiny = get_backend(str(tiny_distilbert))
    with qtbot.waitSignal(panel.explained, timeout=60000):
        panel.state.backend = tiny
        panel.state.backend_changed.emit(tiny)
    w = panel.walkthrough
    assert "token_type_embeddings" not in panel.arch_map.items and len(panel.arch_map.layer_links) == 2
    assert list(panel.arch_map.items) == [s.name for s in w.steps]
    q, k = (np.asarray(w.step(n).values) for n in ("q", "k"))
    vp = panel.step_view.value_panel
    assert vp.cell == ("scores", 2, 3)
    assert vp.terms.score == pytest.approx(float(q[2] @ k[3]) / math.sqrt(q.shape[1]), abs=1e-9)
    panel.show_step("ffn_hidden")
    lin1 = tiny.encoder.state_dict()[f"transformer.layer.{w.layer}.ffn.lin1.weight"]
    np.testing.assert_array_equal(panel.step_view.weights_strip.heatmaps["W₁"].raw, lin1.T.double().numpy())
