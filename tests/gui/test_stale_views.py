"""No view keeps an old model's numbers: for each view that shows a number or a proof badge, the
inspected model (and where it applies the sentence, layer, head or pooling) changes while its tab
is hidden; shown again, what it draws is compared with a fresh computation by the new model."""
from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.support.app_fixtures import wait_idle

TEXT = "the small cat sat on the mat ."


@pytest.fixture(scope="module")
def other_tiny(tmp_path_factory):
    """A second masked-LM model with other weights and another shape (3 layers, 2 heads)."""
    from tests.support.tiny_models import make_tiny_distilbert
    return make_tiny_distilbert(tmp_path_factory.mktemp("stale_other") / "m", n_layers=3, n_heads=2, seed=1)


def choose_inspected(qtbot, w, folder):
    bar = w.inspect_bar
    bar.encoder.setCurrentIndex(bar.encoder.findData("scratch"))
    bar.weights.setCurrentText(str(folder))
    bar.weights.lineEdit().setFocus()
    qtbot.keyClick(bar.weights.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None
                    and w.state.inspect_backend.model_name == str(folder) and not w.state.jobs.busy,
                    timeout=60_000)
    return w.state.inspect_backend


def show_tab(w, title):
    assert w.show_tab(title) if hasattr(w, "show_tab") else w._show_tab(title)


def hide_behind_search(w, panel):
    w.tabs.setCurrentWidget(w.search_panel)
    assert not panel.isVisible()


@pytest.fixture
def window(qtbot, make_window, tiny_store_template, tiny_distilbert):
    w = make_window(tiny_store_template)
    choose_inspected(qtbot, w, tiny_distilbert)
    return w


def select_tab(w, title):
    for i in range(w.tabs.count()):
        if w.tabs.tabText(i) == title:
            w.tabs.setCurrentIndex(i)
            return
    raise AssertionError(title)


def test_attention_heatmap_and_head_grid(qtbot, window, other_tiny):
    w = window
    panel = w.optional_panels["Attention"]
    select_tab(w, "Attention")
    with qtbot.waitSignal(panel.inspected, timeout=30_000):
        panel.inspect_text(TEXT)
    panel.set_layer_head(1, 3)
    hide_behind_search(w, panel)
    new = choose_inspected(qtbot, w, other_tiny)
    select_tab(w, "Attention")
    wait_idle(qtbot, w)
    fresh = new.inspect(TEXT).attentions                      # (3, 2, T, T)
    assert panel.grid.grid_shape() == fresh.shape[:2]
    np.testing.assert_allclose(panel.grid.attentions, fresh, atol=1e-6)
    np.testing.assert_allclose(panel.heatmap.drawn_matrix(), fresh[panel.layer, panel.head], atol=1e-6)
    assert panel.head < 2 and f"head {panel.head + 1}" in panel.heatmap.plot.titleLabel.text


def badge_delta(text: str) -> float:
    return float(re.search(r"\|Δ\| ([-+.e0-9]+)", text).group(1))


@pytest.mark.parametrize("step", ["q", "masked_scores", "weights", "ffn_output", "pooled"])
def test_walkthrough_step_badge_and_weighted_sum(qtbot, window, other_tiny, step):
    from core.walkthrough import steps as W
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    with qtbot.waitSignal(panel.explained, timeout=60_000):
        panel.explain_text(TEXT, layer=2, head=4)
    panel.show_step(step)
    if step == "weights":
        panel.step_view._row_clicked(3)
    hide_behind_search(w, panel)
    new = choose_inspected(qtbot, w, other_tiny)
    select_tab(w, "Step by step")
    wait_idle(qtbot, w)
    assert panel.walkthrough_backend is new
    layer, head = panel.walkthrough.layer, panel.walkthrough.head
    assert head < new.n_heads
    fresh = W.explain(new, TEXT, layer=layer, head=head, pooling=panel.pooling_combo.currentText())
    assert panel.current_step_name() == step
    np.testing.assert_allclose(panel.step_view.heatmap.raw, np.atleast_2d(fresh.step(step).values), atol=1e-6)
    shown = panel.walkthrough.step(step)
    if shown.max_abs_diff is not None:
        assert badge_delta(panel.step_view.badge.text()) == pytest.approx(fresh.step(step).max_abs_diff, abs=1e-6)
    if step == "weights":
        q = panel.step_view.build_up.query
        weights, v = np.asarray(fresh.step("weights").values), np.asarray(fresh.step("v").values)
        np.testing.assert_allclose(panel.step_view.build_up.total, weights[q] @ v, atol=1e-9)
        head_out = np.asarray(fresh.step("head_output").values)
        assert f"row {q} of <b>head_output</b>" in panel.step_view.build_up.label.text()
        np.testing.assert_allclose(panel.step_view.build_up.total, head_out[q], atol=1e-6)
    if step == "pooled":
        from core.walkthrough.positions_demo import pooling_comparison
        qtbot.waitUntil(lambda: panel.pooling_view.result is not None, timeout=30_000)
        wait_idle(qtbot, w)
        expected = pooling_comparison(new, TEXT, None)
        for name in expected.poolings:
            np.testing.assert_allclose(panel.pooling_view.result.vectors[name], expected.vectors[name], atol=1e-6)
        assert panel.pooling_view.heatmap.raw.shape[1] == new.dim


def test_walkthrough_positions_view(qtbot, window, other_tiny):
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120_000):
        panel.set_view(1)
    hide_behind_search(w, panel)
    new = choose_inspected(qtbot, w, other_tiny)
    with qtbot.waitSignal(view.shown, timeout=120_000):
        select_tab(w, "Step by step")
    learned = new.encoder.embeddings.position_embeddings.weight.detach().double().numpy()
    P = view.learned_table.raw.shape[0]
    np.testing.assert_allclose(view.learned_table.raw, learned[:P], atol=1e-7)


def test_fill_mask_tables(qtbot, window, other_tiny):
    w = window
    panel = w.optional_panels["Fill-mask"]
    select_tab(w, "Fill-mask")
    sentence = "the [MASK] sat on the mat ."
    with qtbot.waitSignal(panel.predicted, timeout=30_000):
        panel.text_edit.setText(sentence)
        panel.predict()
    hide_behind_search(w, panel)
    new = choose_inspected(qtbot, w, other_tiny)
    select_tab(w, "Fill-mask")
    wait_idle(qtbot, w)
    k = panel.topk_spin.value()
    core = new.fill_mask(sentence, top_k=k).to_dict()
    table = panel.mask_tables[0]
    assert table.tokens() == [p["token"] for p in core["masks"][0]["predictions"]]
    assert table.scores() == pytest.approx([p["score"] for p in core["masks"][0]["predictions"]], rel=1e-5)


def search_table(search):
    """(id, score) of every row the Search table shows."""
    return [(h.id, h.score) for h in search.results.hits]


def test_search_results_after_the_corpus_and_the_pooling_changed_while_hidden(qtbot, window):
    from index.corpus.door import search as store_search
    w = window
    search = w.search_panel
    w.tabs.setCurrentWidget(search)
    query = "rain and wind tomorrow"
    with qtbot.waitSignal(search.results_shown, timeout=60_000):
        search.query.setText(query)
    wait_idle(qtbot, w)
    before = search_table(search)
    select_tab(w, "Corpus")
    assert not search.isVisible()
    # the corpus changes while Search is hidden: a sentence that is the query itself
    w.service.add_texts(["rain and wind tomorrow, says the forecast"])
    wait_idle(qtbot, w)
    w.tabs.setCurrentWidget(search)
    wait_idle(qtbot, w)
    hits, _ = store_search(w.state.store, query, search.k.value(), w.state.backend)
    assert search_table(search) == [(h.id, pytest.approx(h.score, abs=1e-6)) for h in hits]
    assert search_table(search) != before
    # another pooling while hidden: the store's vectors are no longer the model's, so no old score stays
    select_tab(w, "Corpus")
    w.state.set_choice(w.state.choice.with_(pooling="max"))
    wait_idle(qtbot, w)
    w.tabs.setCurrentWidget(search)
    wait_idle(qtbot, w)
    assert search_table(search) == []
    assert "re-embed" in search.info.text().lower()


def test_the_map_after_the_corpus_changed_while_hidden(qtbot, window):
    w = window
    mp = w.map_panel
    with qtbot.waitSignal(mp.map_shown, timeout=60_000):
        assert w.show_panel("Map")
    n = len(mp.map)
    w.show_panel("Search")
    w.service.add_texts(["a sentence added while the map was hidden"])
    wait_idle(qtbot, w)
    with qtbot.waitSignal(mp.map_shown, timeout=60_000):
        w.show_panel("Map")
    assert len(mp.map) == n + 1 == w.state.store.count()
    assert "a sentence added while the map was hidden" in list(mp.map.texts)
