"""The Intervene tab: every view shows the numbers core.intervene computes for the same
intervention; a map cell applies its ablation; a running map can be cancelled and never freezes
the window; switching the inspected model drops what no longer fits and shows no old numbers."""
from __future__ import annotations

import html
import threading

import numpy as np
import pytest

from app.gui.widgets.significant import before_after
from app.gui.widgets.significant import sig as sig_digits
from core.intervene import effects as E
from core.intervene.spec import Intervention
from tests.gui.panels.intervene.conftest import MASKED, TEXT
from tests.support.app_fixtures import noop_progress, switch_model


def apply_and_wait(qtbot, panel):
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as sig:
        panel.apply()
    return sig.args[0]


def test_effects_show_the_core_numbers_for_the_clicked_parts(qtbot, make_panel, models):
    backend = models[0]
    panel = make_panel(backend)
    panel.editor.heads.click(0, 1)                               # head 1.2, as a click does
    panel.editor.layers.boxes[("ffn", 1)].setChecked(True)       # FFN of layer 2
    panel.masked_edit.setText(MASKED)
    panel.target_edit.setText("mat")
    spec = Intervention(heads={(0, 1)}, ffn_off={1})
    assert panel.editor.value() == spec
    assert "heads 1.2 zeroed; FFN 2 off" in panel.description.text()
    effects = apply_and_wait(qtbot, panel)
    assert panel.current.spec == spec and effects.spec == spec
    view = panel.effects_view
    att = E.compare_attentions(backend, TEXT, spec)
    np.testing.assert_array_equal(view.grids["after"].attentions, att.after.astype(np.float32))
    np.testing.assert_array_equal(view.grids["before"].attentions, att.before.astype(np.float32))
    assert view.marked_heads() == {(0, 1)}                       # the switched-off head is outlined
    np.testing.assert_array_equal(panel.importance_view.grid.attentions, att.after.astype(np.float32))
    view.select_head(1, 3)
    np.testing.assert_allclose(view.maps["difference"].matrix, att.difference[1, 3], atol=1e-7)
    vec = E.compare_vector(backend, TEXT, spec)
    assert f"<b>{sig_digits(vec.cosine, 4)}</b>" in view.summary.text() and vec.cosine < 0.9999
    fill = E.compare_fill_mask(backend, MASKED, spec, top_k=5, target="mat")
    rows = panel.fill_view.fill_rows()
    assert [(r[2], r[3]) for r in rows] == [(p["token"], float(sig_digits(p["score"], 3)))
                                            for p in fill.after.masks[0]["predictions"]]
    b, a, d = before_after(fill.target_before, fill.target_after)
    assert f"{b} → <b>{a}</b> ({d})" in panel.fill_view.fill_label.text()
    with qtbot.waitSignal(panel.metrics_shown, timeout=120_000) as sig:
        panel.measure()
    shown = {m.name: m for m in sig.args[0]}
    assert shown["spearman"].after == pytest.approx(E.compare_pairs(backend, spec).after, abs=1e-12)
    recall, mrr = E.compare_queries(backend, spec)
    assert shown["recall@10"].after == pytest.approx(recall.after) and shown["mrr@10"].after == pytest.approx(mrr.after)
    table = panel.metrics_view.table
    assert table.item(0, 2).text() == f"{shown['spearman'].after:.4f}"
    panel.clear()
    assert panel.current.spec.is_empty and panel.editor.value().is_empty
    assert "nothing" in panel.description.text()


def test_mean_ablation_uses_the_corpus_means(qtbot, make_panel, models):
    from core.intervene.means import mean_head_outputs
    backend = models[0]
    panel = make_panel(backend)
    panel.editor.heads.click(1, 2)
    panel.editor.mean_button.setChecked(True)
    assert "faithful" in panel.editor.mean_button.toolTip()
    effects = apply_and_wait(qtbot, panel)
    spec = Intervention(heads={(1, 2)}, head_mode="mean")
    means = mean_head_outputs(backend, E.sample_corpus())
    assert effects.vector.cosine == pytest.approx(E.compare_vector(backend, TEXT, spec, means=means).cosine, abs=1e-7)


def test_patching_shows_the_alignment_and_refuses_in_one_message(qtbot, make_panel, models):
    from core.intervene.apply import intervene
    from core.intervene.patching import patched_run
    from core.intervene.spec import parse_site
    backend = models[0]
    panel = make_panel(backend)
    panel.editor.text_b.setText("the dog sat on the rug and then slept .")
    panel.editor.sites.setText("L1.H2")                 # every token: A and B differ in length
    with qtbot.waitSignal(panel.failed, timeout=60_000) as sig:
        panel.apply()
    assert "tokens" in sig.args[0] and "Cannot patch" in panel.editor.alignment_label.text()
    assert panel.effects_view.effects is None           # nothing half-computed is shown
    assert "patched L1.H2" not in panel.description.text() and "refused" in panel.description.text()
    b = "the dog sat on the mat ."
    panel.editor.text_b.setText(b)
    panel.editor.sites.setText("L1.H2, L1.resid@cat")
    effects = apply_and_wait(qtbot, panel)
    label = panel.editor.alignment_label.text()
    assert "cat ← dog" in label and "L1.H2" in label
    spec, source, _, _ = patched_run(backend, TEXT, b, [parse_site("L1.H2"), parse_site("L1.resid@cat")])
    assert effects.spec == spec == panel.current.spec     # Step by step is told of the patch too
    assert "not applied yet" not in panel.description.text()
    before = backend.embed([TEXT])[0]
    with intervene(backend, spec, patch_source=source):
        after = backend.embed([TEXT])[0]
    assert effects.vector.cosine == pytest.approx(float(np.dot(before.astype(np.float64), after)), abs=1e-7)


def test_a_map_cell_click_applies_that_ablation(qtbot, make_panel, models):
    from core.intervene.importance import importance_map
    backend = models[0]
    panel = make_panel(backend)
    view = panel.importance_view
    view.metric.setCurrentIndex(view.metric.findData("spearman"))
    with qtbot.waitSignal(panel.map_shown, timeout=120_000) as sig:
        view.compute_button.click()
    m = sig.args[0]
    expected = importance_map(backend, "spearman", seed=0)
    np.testing.assert_allclose(m.heads, expected.heads, atol=1e-12)
    np.testing.assert_allclose(view.heatmap.matrix[:, :4], expected.heads, atol=1e-6)
    np.testing.assert_allclose(view.heatmap.matrix[:, 5], expected.ffn, atol=1e-6)
    assert "seed 0" in view.info.text() and f"{expected.baseline:.4f}" in view.info.text()
    # what is needed to read the cells: n, the clean interval, the floors, the verdict in words
    info = view.info.text()
    assert f"n = {expected.n} pairs" in info and f"[{expected.interval[0]:.4f}, {expected.interval[1]:.4f}]" in info
    assert f"every head off {expected.floors['heads']:.4f}" in info
    for line in expected.verdict():
        assert html.escape(line) in info
    lo, hi = expected.low["heads"][1, 2], expected.high["heads"][1, 2]
    assert f"[{lo:+.4f}, {hi:+.4f}]" in view.heatmap.tooltip_text(1, 2)
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as sig:
        view.heatmap.cell_clicked.emit(1, 2)             # layer 2, head 3
    assert panel.current.spec == Intervention(heads={(1, 2)}) == sig.args[0].spec
    assert panel.editor.heads.buttons[(1, 2)].isChecked()
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as sig:
        view.heatmap.cell_clicked.emit(0, 5)             # layer 1's FFN column
    assert sig.args[0].spec == Intervention(ffn_off={0})


def test_a_running_map_cancels_and_the_window_keeps_ticking(qtbot, make_panel, models, monkeypatch):
    """The worker waits, at each part, for a tick of a timer on the GUI thread: a map computed on
    the GUI thread could never see one. Cancel then stops it before its end; no map is shown."""
    from PySide6.QtCore import QTimer

    from app.gui.panels.intervene import compute as C
    panel = make_panel(models[0])
    ticked, parts = threading.Event(), []
    timer = QTimer()
    timer.timeout.connect(ticked.set)
    timer.start(5)
    real = C.map_fn

    def map_fn(backend, metric, seed, cache_dir=None, progress=None, cancel=None):
        def each(done, total=0, *a):
            ticked.clear()
            assert ticked.wait(20), "the GUI thread did not tick while the map was computed"
            parts.append(done)
            if done == 3:
                panel.importance_view.cancel_requested.emit()     # as Cancel does
                # queued to the GUI thread: wait for it to set the job's event before the next part
                assert cancel.wait(20), "the GUI thread did not pass Cancel on to the job"
            progress(done, total, *a)
        return real(backend, metric, seed, cache_dir, each, cancel)

    monkeypatch.setattr(C, "map_fn", map_fn)
    with qtbot.waitSignal(panel.map_cancelled, timeout=60_000):
        panel.compute_map("spearman", 0)
    timer.stop()
    total = 2 * 4 + 2 * 2
    assert 3 <= len(parts) < total and panel.importance_view.map is None     # cancel is checked per layer
    assert "Cancelled" in panel.importance_view.info.text()


def test_switching_the_model_drops_what_it_lacks_and_every_old_number(qtbot, make_panel, models):
    big, small = models
    panel = make_panel(big)
    panel.editor.heads.click(1, 3)                       # 2.4: the small model has no layer 2
    apply_and_wait(qtbot, panel)
    with qtbot.waitSignal(panel.metrics_shown, timeout=60_000):
        panel.measure()
    with qtbot.waitSignal(panel.map_shown, timeout=60_000):
        panel.compute_map("spearman", 0)
    assert panel.effects_view.effects is not None and panel.metrics_view.table.rowCount() == 3
    with qtbot.waitSignal(panel.failed, timeout=10_000) as sig:
        switch_model(panel.state, small)
    assert sig.args[0].startswith("heads 2.4 zeroed was cleared") and "does not exist" in sig.args[0]
    assert "heads 2.4" in panel.message.text()
    assert panel.current.spec.is_empty and panel.editor.value().is_empty
    assert panel.effects_view.effects is None and panel.importance_view.map is None
    assert panel.metrics_view.table.rowCount() == 0
    assert panel.importance_view.heatmap.matrix.size == 0 and panel.effects_view.grids["after"].attentions.size == 0
    assert panel.editor.heads.shape == (1, 2)
    # a part both models have is kept, and the views are redone on the new model
    switch_model(panel.state, big)
    panel.editor.heads.click(0, 1)
    apply_and_wait(qtbot, panel)
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as sig:
        switch_model(panel.state, small)
    assert panel.current.spec == Intervention(heads={(0, 1)})
    assert sig.args[0].model == small.model_name and panel.shown_backend is small
    assert panel.effects_view.grids["after"].attentions.shape[:2] == (1, 2)


def test_a_result_of_the_model_before_a_switch_never_shows(qtbot, make_panel, models):
    big, small = models
    panel = make_panel(big)
    panel.editor.heads.click(0, 0)
    shown = []
    panel.effects_shown.connect(shown.append)
    panel.map_shown.connect(shown.append)
    panel.apply()                                        # computing on the big model …
    panel.compute_map("spearman", 0)
    switch_model(panel.state, small)                     # … when the model changes
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    qtbot.wait(50)
    assert all(getattr(s, "model", None) in (small.model_name, small.weights_sha256) for s in shown), shown
    assert panel.importance_view.map is None
    if panel.effects_view.effects is not None:
        assert panel.effects_view.effects.model == small.model_name


def test_the_transformers_encoder_is_refused_in_the_apps_words(tmp_path):
    from app.gui.panels.intervene.compute import EffectsRequest, effects_fn, map_fn, metrics_fn
    from core.encoder.backends import get_backend
    from core.errors import InputError
    from tests.support.tiny_models import make_tiny_distilbert
    hf = get_backend(str(make_tiny_distilbert(tmp_path / "m", n_layers=1, n_heads=2)), "hf", device="cpu")
    spec = Intervention(heads={(0, 0)})
    for call in (lambda: effects_fn(hf, EffectsRequest(TEXT, spec)), lambda: metrics_fn(hf, spec),
                 lambda: map_fn(hf, "spearman", 0)):
        with pytest.raises(InputError, match="choose “From-scratch encoder” in Inspect with"):
            call()


def test_the_attention_tab_says_it_shows_the_clean_model(qtbot, models):
    from app.gui.current_intervention import current_intervention
    from app.gui.panels.attention.panel import AttentionPanel
    from app.gui.state import AppState
    state = AppState()
    panel = AttentionPanel(state, auto_inspect=False)
    qtbot.addWidget(panel)
    switch_model(state, models[0])
    assert "Intervene" not in panel.info_label.text()
    current_intervention(state).set(Intervention(heads={(0, 1)}))
    assert "heads 1.2 zeroed: this tab shows the model with every part on" in panel.info_label.text()
    current_intervention(state).clear()
    assert "Intervene" not in panel.info_label.text()
    state.shutdown(5000)


def test_compute_functions_run_without_qt(models):
    from app.gui.panels.intervene.compute import EffectsRequest, effects_fn
    request = EffectsRequest(TEXT, Intervention(positions="off"), MASKED, "mat")
    effects = effects_fn(models[0], request, noop_progress, threading.Event())
    assert effects.fill is not None and effects.vector.cosine < 0.9999


def test_a_model_lacking_some_parts_names_only_what_changed():
    from app.gui.current_intervention import what_changed
    before = Intervention(heads={(0, 1), (6, 0)}, positions="off")
    said = what_changed(before, Intervention(heads={(0, 1)}, positions="off"), "layer 7 does not exist")
    assert said == "layer 7 does not exist: heads 1.2, 7.1 zeroed became heads 1.2 zeroed; positions off kept"
    said = what_changed(Intervention(ffn_off={6}, positions="off"), Intervention(positions="off"), "no layer 7")
    assert said == "no layer 7: FFN 7 off dropped; positions off kept"                # never "X became X"
