"""Step by step follows an intervention: the model side runs inside ``intervene``, the NumPy side
switches the same parts off (numpy_ref), so each badge compares like with like; the architecture
map marks what is switched off; and a badge fails when the two sides disagree."""
from __future__ import annotations

import numpy as np
import pytest

from core.intervene.spec import Intervention
from core.walkthrough import steps as W

TEXT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    folder = make_tiny_distilbert(tmp_path_factory.mktemp("walk_intervened") / "m", n_layers=2, n_heads=4)
    return get_backend(str(folder), "scratch", device="cpu", precision="fp32")


@pytest.mark.parametrize("spec", [
    Intervention(heads={(0, 1), (0, 3)}),
    Intervention(ffn_off={0}),
    Intervention(attention_off={0}, positions="off"),
    Intervention(positions="shuffle", shuffle_seed=3, no_scale=True, temperature=2.0),
    Intervention(skip={0}, heads={(1, 0)}),
], ids=lambda s: s.describe())
def test_every_step_equals_the_intervened_model(tiny, spec):
    w = W.explain(tiny, TEXT, layer=0, head=1, intervention=spec)
    assert w.intervention == spec
    assert w.worst_diff < 1e-10, [(s.name, s.max_abs_diff) for s in w.steps if s.max_abs_diff > 1e-10]
    clean = W.explain(tiny, TEXT, layer=0, head=1)
    assert not np.allclose(w.step("normalized").values, clean.step("normalized").values)


def test_the_switched_parts_show_as_switched_off(tiny):
    dh = tiny.config.dim // tiny.config.n_heads
    w = W.explain(tiny, TEXT, layer=0, head=1, intervention=Intervention(heads={(0, 1)}, ffn_off={0}))
    concat = w.step("heads_concat").values
    assert np.all(w.step("head_output").values == 0)
    assert np.all(concat[:, dh:2 * dh] == 0) and np.abs(concat[:, :dh]).max() > 0    # only head 2's columns
    assert np.all(w.step("ffn_output").values == 0)
    # post-norm: the residual after the FFN is its input alone
    np.testing.assert_array_equal(w.step("residual_2").values, w.step("layernorm_1").values)


def test_mean_ablation_puts_the_mean_in_the_heads_concatenation(tiny):
    from core.intervene.effects import sample_corpus
    from core.intervene.means import mean_head_outputs
    means = mean_head_outputs(tiny, sample_corpus()[:40])
    w = W.explain(tiny, TEXT, layer=1, head=2, intervention=Intervention(heads={(1, 2)}, head_mode="mean"),
                  means=means)
    assert w.worst_diff < 1e-10
    np.testing.assert_allclose(w.step("head_output").values, np.broadcast_to(means[1, 2].double().numpy(),
                                                                             w.step("head_output").values.shape))


def test_a_badge_fails_when_the_numpy_side_ignores_the_switch(tiny, monkeypatch):
    real = W.numpy_steps
    monkeypatch.setattr(W, "numpy_steps", lambda *a, **k: real(*a[:7]))     # the clean NumPy steps
    w = W.explain(tiny, TEXT, layer=0, head=1, intervention=Intervention(heads={(0, 1)}))
    assert w.step("head_output").max_abs_diff > 1e-3
    assert w.step("heads_concat").max_abs_diff > 1e-3
    assert w.worst_diff > W.TOLERANCE


def test_patching_is_left_out_with_a_note(tiny):
    from core.intervene.spec import Site
    spec = Intervention(heads={(0, 0)}, patch=(Site("head", 1, 2, 3),))
    w = W.explain(tiny, TEXT, intervention=spec)
    assert w.intervention == Intervention(heads={(0, 0)})
    assert "L2.H3@3" in w.note and "not followed step by step" in w.note


def test_the_architecture_names_what_is_switched_off(tiny):
    from core.walkthrough.architecture import architecture
    spec = Intervention(heads={(0, 1), (0, 2)}, ffn_off={0}, positions="off", attention_off={1})
    arch = architecture(tiny.config, 6, layer=0, head=1, intervention=spec)
    off = arch.switched_off
    assert off["head_output"] == "head 1.2 zeroed"
    assert off["heads_concat"] == "heads 2, 3 zeroed"
    assert {"ffn_hidden", "ffn_activation", "ffn_output", "position_embeddings"} <= set(off)
    assert "attention_output" not in off                 # layer 2's attention: not the layer drawn
    assert arch.layers_switched == {0, 1}
    assert architecture(tiny.config, 6).switched_off == {}


def test_the_walkthrough_panel_follows_the_apps_intervention(qtbot, make_walkthrough_panel, tiny):
    from app.gui.current_intervention import current_intervention
    from tests.support.app_fixtures import explain_and_wait
    panel = make_walkthrough_panel(tiny)
    clean = explain_and_wait(qtbot, panel, TEXT, layer=1, head=2)
    assert clean.intervention is None
    spec = Intervention(heads={(0, 1)}, ffn_off={0})
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        current_intervention(panel.state).set(spec)          # set in the Intervene tab: the walk reruns
    w = sig.args[0]
    assert w.intervention == spec and w.worst_diff < 1e-10
    assert np.all(w.step("ffn_output").values == 0)
    items = panel.arch_map.items
    assert items["ffn_output"].switched_off and items["head_output"].switched_off
    assert not items["q"].switched_off
    assert "Intervened" in panel.info_label.text() and "FFN 1 off" in panel.info_label.text()
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        current_intervention(panel.state).clear()
    assert sig.args[0].intervention is None and not panel.arch_map.items["ffn_output"].switched_off


def test_the_walkthrough_drops_an_intervention_the_new_model_lacks(qtbot, make_walkthrough_panel, tiny, tmp_path):
    from app.gui.current_intervention import current_intervention
    from core.encoder.backends import get_backend
    from tests.support.app_fixtures import explain_and_wait
    from tests.support.tiny_models import make_tiny_distilbert
    small = get_backend(str(make_tiny_distilbert(tmp_path / "small", n_layers=1, n_heads=2)), "scratch",
                        device="cpu", precision="fp32")
    panel = make_walkthrough_panel(tiny)
    current = current_intervention(panel.state)
    current.set(Intervention(heads={(1, 3)}))                # head 2.4: the small model has no layer 2
    assert explain_and_wait(qtbot, panel, TEXT).intervention == Intervention(heads={(1, 3)})
    dropped, failed = [], []
    current.dropped.connect(dropped.append)
    panel.failed.connect(failed.append)
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        panel.state.backend = small
        panel.state.backend_changed.emit(small)
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    assert sig.args[0].intervention is None and current.spec.is_empty
    assert dropped and "does not exist" in dropped[0] and not failed
    assert panel.walkthrough.intervention is None and panel.walkthrough.model == small.model_name
