"""What a learner meets in the Intervene tab, on tiny models: numbers in significant digits that
never contradict themselves, a signed difference said as such and "no change" when nothing
changed, why a zeroed head's own pattern does not move, the legend of the outlines, patching's
"% of the way to B" equal to the CLI's, the importance map's run (time left, a Cancel that does
not move, no stale "Cancelled", no ties at 0 as top heads, every row in view), one refusal, the
metrics' patch note only with a patch, a model switch that keeps what fits, and Step by step ▸
Positions saying positions are off."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from core.intervene.spec import Intervention
from tests.gui.panels.intervene.conftest import MASKED, TEXT
from tests.support.app_fixtures import switch_model
from tests.support.tiny_models import run_cli


@pytest.fixture
def panel_for(make_panel):
    """A panel at the default window size with both sentences typed."""
    return lambda backend, size=(1200, 780): make_panel(backend, size=size, masked=MASKED)


def apply(qtbot, panel, spec=None):
    if spec is not None:
        panel.editor.set_value(spec)
    with qtbot.waitSignal(panel.effects_shown, timeout=60_000) as got:
        panel.apply()
    return got.args[0]


# ---- numbers -------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0.9996, 0.99996, 0.000312, 0.0003, 1.5e-7, 123.456, 0.463, 9.9996e-5])
def test_a_number_is_never_rounded_across_a_power_of_ten(value):
    from app.gui.widgets.significant import sig
    text = sig(value)
    assert abs(float(text) - value) <= abs(value) * 5e-3                   # 3 significant digits or more
    assert np.floor(np.log10(abs(float(text)))) == np.floor(np.log10(value))   # 0.9996 is not "1"


def test_before_and_after_read_differently_and_a_change_is_never_zero():
    from app.gui.widgets.significant import before_after, change_words, signed
    b, a, d = before_after(0.000312, 0.000298)                 # was "0.0003 → 0.0003 (+0.0001)"
    assert b != a and float(b) == pytest.approx(0.000312) and float(a) == pytest.approx(0.000298)
    assert d.startswith("−") and float(d.replace("−", "-")) == pytest.approx(-1.4e-5, rel=1e-2)
    assert signed(0.0) == "0" and signed(1e-9) != "+0"
    assert change_words(0.0) == "no change" and change_words(0.9996) == "0.9996"


def test_the_difference_is_signed_and_nothing_changed_says_so(qtbot, panel_for, models):
    from app.gui.widgets.significant import sig
    panel = panel_for(models[0])
    # the last layer's FFN runs after every attention: no attention weight can change
    effects = apply(qtbot, panel, Intervention(ffn_off={1}))
    view = panel.effects_view
    assert np.abs(effects.attention.difference).max() == 0
    assert "largest change <b>no change</b>" in view.summary.text()     # was "largest change 0"
    assert view.difference_box.is_empty and "no change" in view.difference_box.said()
    assert "|" not in view.map_titles["difference"].text()              # it is after − before, signed
    effects = apply(qtbot, panel, Intervention(heads={(0, 1)}, temperature=3.0))
    diff = effects.attention.difference
    l, h = np.unravel_index(int(np.argmax(np.abs(diff).max(axis=(2, 3)))), diff.shape[:2])
    assert view.head == (l, h)                                # the head that changed most is the one shown
    assert not view.difference_box.is_empty
    lo, hi = view.maps["difference"].levels()
    assert lo == pytest.approx(-hi) and hi == pytest.approx(float(np.abs(diff[l, h]).max()), rel=1e-5)
    assert (view.maps["difference"].matrix < 0).any() and (view.maps["difference"].matrix > 0).any()
    assert "after − before" in view.map_titles["difference"].text()
    assert f"<b>{sig(float(np.abs(diff).max()))}</b>" in view.summary.text()


def test_a_zeroed_head_says_why_its_pattern_stays_and_the_outlines_have_a_legend(qtbot, panel_for, models):
    panel = panel_for(models[0])
    apply(qtbot, panel, Intervention(heads={(0, 2)}))
    view = panel.effects_view
    legend = view.legend.text()
    assert "dashed" in legend and "switched off" in legend and "solid" in legend and view.legend.isVisible()
    view.select_head(0, 2)
    assert view.head_note.isVisible() and "output</i> is replaced by zeros" in view.head_note.text()
    view.select_head(1, 0)
    assert not view.head_note.isVisible()
    # the value panel of Step by step names the switch for a zeroed column of the heads' outputs
    from app.gui.panels.walkthrough.value_panel import ValuePanel
    from core.walkthrough.steps import explain
    w = explain(models[0], TEXT, layer=0, head=0, intervention=Intervention(heads={(0, 2)}))
    step = w.step("heads_concat")
    dh = len(w.step("q").values[0])
    assert np.all(np.asarray(step.values)[:, 2 * dh:3 * dh] == 0)
    values = ValuePanel()
    values.show_cell(w, step, 1, 2 * dh)
    assert "head 1.3 is switched off in the Intervene tab" in values.label.text()
    values.show_cell(w, step, 1, 0)
    assert "Intervene" not in values.label.text()


def test_patching_says_how_far_toward_b_as_the_cli_does(qtbot, panel_for, models, capsys, tmp_path):
    backend = models[0]
    panel = panel_for(backend)
    b = "the dog sat on the mat ."
    panel.editor.text_b.setText(b)
    panel.editor.sites.setText("L1.resid@cat")
    effects = apply(qtbot, panel, Intervention())
    code, out, err = run_cli(["patch", TEXT, b, "--site", "L1.resid@cat", "--model", backend.model_name,
                              "--backend", "scratch", "--device", "cpu", "--precision", "fp32", "--json"], capsys)
    assert code == 0, err
    cli = json.loads(out)
    assert effects.toward_b.moved == pytest.approx(cli["moved_toward_b"], abs=1e-9)
    assert 0 < cli["moved_toward_b"] < 1
    assert f"<b>{cli['moved_toward_b']:.0%} of the way to B</b>" in panel.effects_view.summary.text()


def test_a_patch_refusal_is_said_once_and_the_patch_note_only_with_a_patch(qtbot, panel_for, models):
    panel = panel_for(models[0])
    panel.editor.text_b.setText("the dog sat on the rug and then slept .")
    panel.editor.sites.setText("L1.H2")
    with qtbot.waitSignal(panel.failed, timeout=60_000):
        panel.apply()
    assert "Cannot patch" in panel.editor.alignment_label.text()
    assert "tokens" not in panel.message.text()                           # was printed twice
    panel.clear()
    panel.editor.set_value(Intervention(heads={(0, 1)}))
    with qtbot.waitSignal(panel.metrics_shown, timeout=120_000):
        panel.measure()
    assert "Patch sites" not in panel.metrics_view.note.text()           # no patch set: nothing to say


# ---- the importance map --------------------------------------------------------------------------
def test_a_map_run_keeps_cancel_in_place_says_time_left_and_clears_the_old_cancel(qtbot, panel_for, models,
                                                                                   monkeypatch):
    from app.gui.panels.intervene import compute as C
    panel = panel_for(models[0])
    view = panel.importance_view
    panel.views.setCurrentWidget(view)
    qtbot.wait(20)
    cancel_at = view.cancel_button.geometry()
    go, formats = threading.Event(), []

    def map_fn(backend, metric, seed, cache_dir=None, progress=None, cancel=None):
        for done in range(1, 6):
            progress(done, 12, "Importance map (spearman)")
            go.wait(0.2)
            if cancel.is_set():
                from core.errors import Cancelled
                raise Cancelled("cancelled")
        go.wait(20)
        raise AssertionError("not cancelled")

    monkeypatch.setattr(C, "map_fn", map_fn)
    view.info.setText("<i>Cancelled: no map computed (a finished map is cached).</i>")   # an earlier run's
    panel.compute_map("spearman", 0)
    qtbot.waitUntil(lambda: view.progress.isVisible())
    assert view.cancel_button.geometry() == cancel_at                     # a click there lands on Cancel
    assert "Cancelled" not in view.info.text()                            # not the new run's word
    qtbot.waitUntil(lambda: (formats.append(view.progress.format()) or "left" in view.progress.format()),
                    timeout=10_000)
    assert "part %v of %m" in formats[-1]
    with qtbot.waitSignal(panel.map_cancelled, timeout=20_000):
        view.cancel_button.click()
    assert view.cancel_button.geometry() == cancel_at
    assert "Cancelled" in view.stack.said() and view.stack.is_empty


def test_ties_at_zero_are_no_top_heads_and_every_row_is_in_view(qtbot, panel_for, models):
    from core.intervene.importance import ImportanceMap
    panel = panel_for(models[0])
    view = panel.importance_view
    panel.views.setCurrentWidget(view)
    zeros = ImportanceMap("spearman", 0.5, np.zeros((2, 4)), np.zeros(2), np.zeros(2), 0, "m", "c")
    view.show_map(zeros)
    assert "top heads: none" in view.info.text()                          # was "1.1 (+0.0000), 1.2 …"
    one = np.zeros((2, 4))
    one[1, 3] = 0.02
    view.show_map(ImportanceMap("spearman", 0.5, one, np.zeros(2), np.zeros(2), 0, "m", "c"))
    assert "top heads: 2.4 (+0.0200) ·" in view.info.text()
    qtbot.wait(50)
    vb = view.heatmap.plot.vb
    (_, _), (y0, y1) = vb.viewRange()
    assert y0 <= -0.5 and y1 >= 1.5                                         # both layers' rows whole
    bottom = vb.mapViewToScene(vb.mapToView(vb.rect().bottomLeft())).y()
    assert bottom <= view.heatmap.height()


# ---- following the model -------------------------------------------------------------------------
def test_a_model_switch_keeps_what_the_new_model_has_and_resets_the_views(qtbot, panel_for, models):
    big, small = models
    panel = panel_for(big)
    apply(qtbot, panel, Intervention(heads={(1, 3), (0, 1)}, positions="off", ffn_off={1}))
    assert panel.effects_view.grids["after"].grid_shape() == (2, 4)
    switch_model(panel.state, small)
    qtbot.waitUntil(lambda: panel.editor.heads.shape == (1, 2))
    kept = Intervention(heads={(0, 1)}, positions="off")                  # head 2.4 and FFN 2 do not exist
    assert panel.current.spec == kept and panel.editor.value() == kept
    assert "head 2.4" in panel.message.text() or "layer 2" in panel.message.text()
    effects = None
    qtbot.waitUntil(lambda: panel.effects_view.effects is not None, timeout=60_000)   # the same request, re-run
    effects = panel.effects_view.effects
    assert effects.spec == kept and panel.effects_view.grids["after"].grid_shape() == (1, 2)
    assert panel.effects_view.grids["after"].selected[0] < 1              # no marker on a layer it lacks


def test_step_by_step_positions_says_positions_are_off(qtbot, models):
    from app.gui.current_intervention import current_intervention
    from app.gui.panels.walkthrough.panel import WalkthroughPanel
    from app.gui.state import AppState
    state = AppState()
    try:
        panel = WalkthroughPanel(state, auto_explain=False)
        qtbot.addWidget(panel)
        panel.show()
        note = panel.positions_view.intervention_note
        assert not note.isVisible()
        current_intervention(state).set(Intervention(positions="off"))
        panel.set_view(1)
        qtbot.waitUntil(note.isVisible)
        assert "Positions are switched off" in note.text()
        current_intervention(state).set(Intervention(positions="shuffle", shuffle_seed=3))
        assert "shuffled" in note.text() and "seed 3" in note.text()
        current_intervention(state).clear()
        assert not note.isVisible()
    finally:
        state.shutdown(10_000)


def test_the_fill_mask_tab_shows_all_five_guesses_at_the_default_size(qtbot, panel_for, models):
    panel = panel_for(models[0], size=(1200 - 360, 780 - 200))    # the tab's share of a 1200×780 window
    effects = apply(qtbot, panel, Intervention(heads={(0, 1)}))
    assert effects.fill is not None
    panel.views.setCurrentWidget(panel.fill_view)
    qtbot.wait(50)
    table = panel.fill_view.fill_table
    assert table.rowCount() == 5 and not table.verticalScrollBar().isVisible()
    last = table.visualItemRect(table.item(4, 0))
    assert last.bottom() <= table.viewport().height()                 # was 3 of 5 rows
