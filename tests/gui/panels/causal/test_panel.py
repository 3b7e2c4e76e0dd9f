"""The Causal tab: every page shows the numbers the CLI prints for the same request (patch --sweep,
attribute, patch --trace, ablate --cut); a running trace cancels; a model switch clears every page;
a sweep cell asks for its one patch, an Attention edge click cuts that edge."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest
from PySide6 import QtWidgets

from tests.support.causal_models import tiny_pair_and_another

A, B = "the cat sat on the [MASK] today", "the dog ran on the [MASK] today"


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return tiny_pair_and_another(tmp_path_factory.mktemp("causal_panel"))


@pytest.fixture
def make_panel(qtbot):
    from app.gui.panels.causal.panel import CausalPanel
    from app.gui.state import AppState
    states = []

    def make(backend):
        state = AppState()
        states.append(state)
        panel = CausalPanel(state)
        qtbot.addWidget(panel)
        panel.resize(1200, 800)
        panel.text_a.setText(A)
        panel.text_b.setText(B)
        panel.target.setText("mat")
        panel.show()
        switch_model(state, backend)
        return panel

    yield make
    for state in states:
        state.shutdown(10_000)


def switch_model(state, backend):
    state.backend = backend
    state.backend_changed.emit(backend)


def run_page(qtbot, panel, page, **settings):
    with qtbot.waitSignal(panel.shown, timeout=60_000) as sig:
        assert panel.run(page, {**panel.views[page].settings(), **settings})
    assert sig.args[0] == page
    return sig.args[1]


def cli(run, *args):
    return json.loads(run(*args, "--json").stdout)


def test_every_page_shows_the_clis_numbers(qtbot, make_panel, models, run):
    backend = models[0]
    folder = str(backend.source.folder)
    panel = make_panel(backend)
    r = run_page(qtbot, panel, "sweep", kind="heads")
    want = cli(run, "patch", A, B, "--sweep", "heads", "--mask-token", "mat", "--model", folder)["sweep"]
    np.testing.assert_allclose(r.values, want["values"], atol=1e-6)
    np.testing.assert_allclose(panel.sweep_view.heatmap.matrix, np.array(want["values"], np.float32), atol=1e-6)
    panel.sweep_view.show_p.setChecked(True)
    np.testing.assert_allclose(panel.sweep_view.heatmap.matrix, np.array(want["delta_p"], np.float32), atol=1e-6)

    r = run_page(qtbot, panel, "attribute", target="other", method="ig", steps=16)
    want = cli(run, "attribute", A, "--to", B, "--steps", "16", "--model", folder)
    np.testing.assert_allclose(r.attributions, want["attributions"], atol=1e-7)
    assert f"{want['completeness_gap']:.2e}" in panel.attribution_view.info.text()

    r = run_page(qtbot, panel, "trace", words="cat", samples=2, seed=1)
    want = cli(run, "patch", A, "--trace", "cat", "--samples", "2", "--seed", "1", "--mask-token", "mat",
               "--model", folder)["trace"]
    np.testing.assert_allclose(r.recovered, want["recovered"], atol=1e-6)
    np.testing.assert_allclose(r.p_recovered, want["p_recovered"], atol=1e-6)
    tip = panel.trace_view.heatmap.tooltip_text(1, 2)          # the spread over samples, as the CLI gives it
    assert f"± {want['recovered_se'][1][2]:.4f}" in tip and "standard error over the 2 noise samples" in tip
    panel.trace_view.show_p.setChecked(True)
    assert f"± {want['p_recovered_se'][1][2]:.4f}" in panel.trace_view.heatmap.tooltip_text(1, 2)

    panel.cuts_view.cuts.setText("2:sat>cat, 1.3:cat>0")
    r = run_page(qtbot, panel, "cuts")
    want = cli(run, "ablate", A, "--cut", "2:sat>cat", "--cut", "1.3:cat>0", "--model", folder)
    assert r.cosine == pytest.approx(want["cosine"], abs=1e-7)
    np.testing.assert_allclose(r.attention.after, want["attentions_after"], atol=1e-6)
    assert "attention edges cut" in panel.cuts_view.table.text()


def test_a_running_trace_cancels_and_keeps_the_window_ticking(qtbot, make_panel, models, monkeypatch):
    from PySide6.QtCore import QTimer

    from app.gui.panels.causal import compute as C
    panel = make_panel(models[0])
    ticked, rows = threading.Event(), []
    timer = QTimer()
    timer.timeout.connect(ticked.set)
    timer.start(5)
    real = C.trace_fn

    def trace_fn(backend, *args, progress=None, cancel=None):
        def each(done, total=0, *a):
            ticked.clear()
            assert ticked.wait(20), "the GUI thread did not tick while tracing"
            rows.append(done)
            if len(rows) == 2:      # the second report, whatever its count (batches are memory-sized)
                panel.trace_view.cancel_requested.emit()       # as Cancel does
                # The emit is queued to the GUI thread (the panel's slot lives there): wait for it to
                # set the job's event, so the trace's next check sees it, whatever the threads' order.
                assert cancel.wait(20), "the GUI thread did not pass Cancel on to the job"
            progress(done, total, *a)
        return real(backend, *args, progress=each, cancel=cancel)

    monkeypatch.setattr(C, "trace_fn", trace_fn)
    with qtbot.waitSignal(panel.cancelled, timeout=60_000):
        panel.run("trace", {**panel.trace_view.settings(), "words": "cat", "samples": 2})
    timer.stop()
    assert len(rows) == 2 and panel.trace_view.result is None
    assert "Cancelled" in panel.trace_view.info.text()


def test_a_model_switch_clears_every_page(qtbot, make_panel, models):
    big, small = models
    panel = make_panel(big)
    run_page(qtbot, panel, "sweep", kind="ffn")
    run_page(qtbot, panel, "attribute", target="word", method="grad-x-input")
    assert panel.sweep_view.result is not None and panel.attribution_view.result is not None
    switch_model(panel.state, small)
    qtbot.waitUntil(lambda: panel.sweep_view.result is None and panel.attribution_view.result is None)
    assert panel.sweep_view.heatmap.matrix.size == 0
    from app.gui.wording import model_label
    assert model_label(small.model_name) in panel.sweep_view.picture.said()
    assert str(small.model_name) not in panel.sweep_view.picture.said()         # a name, not a path
    panel.text_a.setText("the cat sat")
    panel.text_b.setText("the dog sat")
    r = run_page(qtbot, panel, "sweep", kind="resid")
    assert r.values.shape == (1, 5)


def test_a_sweep_cell_asks_for_its_patch_and_an_edge_click_cuts(qtbot, make_panel, models):
    panel = make_panel(models[0])
    run_page(qtbot, panel, "sweep", kind="resid")
    with qtbot.waitSignal(panel.patch_requested) as sig:
        panel.sweep_view.heatmap.cell_clicked.emit(1, 2)
    assert sig.args == [A, B, "L2.resid@2"]
    with qtbot.waitSignal(panel.shown, timeout=60_000) as shown:
        panel.add_cut("the cat sat on the mat", 0, 1, 2, 1)
    assert shown.args[0] == "cuts" and panel.text_a.text() == "the cat sat on the mat"
    assert panel.cuts_view.cuts.text() == "1.2:2>1"
    assert "1.2:2>1" in shown.args[1].spec.describe()


def test_a_sweep_cell_applies_the_sweep_shown_and_changed_inputs_are_said(qtbot, make_panel, models):
    panel = make_panel(models[0])
    view = panel.sweep_view
    run_page(qtbot, panel, "sweep", kind="resid")
    assert view.stale.isHidden()
    panel.text_b.setText("a bird ran on the [MASK] today")           # the same length, not run again
    assert not view.stale.isHidden() and B in view.stale.text() and "Run sweep" in view.stale.text()
    with qtbot.waitSignal(panel.patch_requested) as sig:
        view.heatmap.cell_clicked.emit(1, 2)
    assert sig.args == [A, B, "L2.resid@2"]                            # the map's own B, not the one typed
    panel.text_b.setText(B)
    assert view.stale.isHidden()
    view.kind.setCurrentIndex(view.kind.findData("heads"))
    assert not view.stale.isHidden()
    assert panel.trace_view.stale.isHidden()                           # no picture there: nothing stale
    run_page(qtbot, panel, "trace", words="cat", samples=1)
    panel.text_a.setText("the cat ran on the [MASK] today")
    assert not panel.trace_view.stale.isHidden() and A in panel.trace_view.stale.text()


@pytest.mark.slow
def test_head_gradients_page_shows_michels_numbers_beside_the_drop(qtbot, make_panel, models, tmp_path,
                                                                   monkeypatch):
    from app.gui.panels import model_calls
    from core.intervene.head_gradient import agreement, head_gradient_importance
    from core.intervene.importance import importance_map
    monkeypatch.setattr(model_calls, "importance_cache_dir", lambda: tmp_path / "importance")
    backend = models[0]
    panel = make_panel(backend)
    r = run_page(qtbot, panel, "heads", metric="mlm")
    want = head_gradient_importance(backend, "mlm")
    np.testing.assert_allclose(r.gradient, want, rtol=1e-5)
    drop = importance_map(backend, "mlm").heads
    np.testing.assert_allclose(r.map.heads, drop, atol=1e-6)
    assert r.spearman == pytest.approx(agreement(want, drop), abs=1e-6)
    assert f"{r.spearman:+.3f}" in panel.heads_view.info.text()
    np.testing.assert_allclose(panel.heads_view.gradient.matrix, want.astype(np.float32), rtol=1e-5)


def test_every_page_says_its_question_names_its_button_and_links_its_docs_section(qtbot, make_panel, models):
    from app.gui.widgets.doc_link import doc_section
    panel = make_panel(models[0])
    for view in panel.views.values():
        assert view.about.text().startswith("<b>") and "?" in view.about.text() and "what is this?" in view.about.text()
        assert doc_section("causal.md", view.doc_section) is not None, view.doc_section
        assert view.picture.is_empty and f"“{view.run_button.text()}”" in view.picture.said()   # the real button
        with qtbot.waitSignal(view.about.opened) as sig:
            view.about.linkActivated.emit("#doc")                                # as a click on the link does
        assert view.doc_section in sig.args[0].findChild(QtWidgets.QTextBrowser).toPlainText()
        sig.args[0].close()
    run_page(qtbot, panel, "sweep", kind="ffn")
    assert not panel.sweep_view.picture.is_empty and "<b>" in panel.sweep_view.about.text()   # not overwritten


def test_p_not_read_is_said(qtbot, make_panel, models, tmp_path):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    panel = make_panel(models[0])
    panel.text_a.setText("the cat sat on the mat today")                  # no [MASK], "p of mat" typed
    panel.cuts_view.cuts.setText("1.1:0>0")
    run_page(qtbot, panel, "cuts")
    assert "has none" in panel.cuts_view.info.text() and "p of mat" in panel.cuts_view.info.text()
    headless = get_backend(str(make_tiny_distilbert(tmp_path / "headless", n_layers=1, n_heads=2, mlm=False)),
                           "scratch", device="cpu", precision="fp32")
    assert not headless.has_mlm
    switch_model(panel.state, headless)
    qtbot.waitUntil(lambda: panel.cuts_view.run_button.isEnabled())
    panel.text_a.setText("the cat sat on the [MASK]")
    panel.cuts_view.cuts.setText("1.1:0>0")
    run_page(qtbot, panel, "cuts")
    assert "no masked-LM head" in panel.cuts_view.info.text()


def test_a_cut_that_changes_no_weight_says_so():
    from types import SimpleNamespace

    from app.gui.panels.causal.views import CutsView
    from core.intervene.edges import Cut
    from core.intervene.spec import Intervention
    view = CutsView()
    att = np.full((1, 1, 3, 3), 1 / 3)
    r = SimpleNamespace(spec=Intervention(cuts=frozenset({Cut(0, 0, 1, 1)})), tokens=["[CLS]", "a", "[SEP]"],
                        cosine=1.0, fill=None, text="a",
                        attention=SimpleNamespace(difference=np.zeros_like(att), before=att, after=att))
    view.show_result(r)
    assert "no weight of any head changes" in view.table.text() and "largest" not in view.table.text()
    assert view.before.marked == view.after.marked == [(1, 1)]                 # the cut cell crossed out


def test_attribution_bars_carry_their_values_and_grad_x_input_its_sum(qtbot, make_panel, models):
    from app.gui.widgets.significant import signed
    panel = make_panel(models[0])
    r = run_page(qtbot, panel, "attribute", target="other", method="grad-x-input")
    view = panel.attribution_view
    assert [t.textItem.toPlainText() for t in view.value_items] == [signed(v, 2) for v in r.attributions]
    assert f"{r.attributions.sum():+.6f}" in view.info.text() and "sum of the bars" in view.info.text()
    assert view.plot.getAxis("left").labelText and view.plot.getAxis("bottom").labelText == "token of A"
    assert r.tokens[1] in view.bar_tooltip(1) and f"{r.attributions[1]:+.6f}" in view.bar_tooltip(1)
    assert panel.heads_view.gradient.colorbar.getAxis("right").labelText == "I_h"
    assert panel.heads_view.drop.colorbar.getAxis("right").labelText == "drop"
