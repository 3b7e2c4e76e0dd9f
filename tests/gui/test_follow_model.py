"""Every inspector view follows the inspected model (app/gui/follow_model.py): the newest request
wins, and no table of the model before a switch stays on screen - while the view is visible too."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.support.app_fixtures import wait_idle

FIRST = "the small cat sat on the mat ."
SECOND = "a dog ran to the river and back ."


@pytest.fixture(scope="module")
def two_layers(tmp_path_factory):
    from tests.support.tiny_models import make_tiny_distilbert
    return make_tiny_distilbert(tmp_path_factory.mktemp("follow_two") / "m", n_layers=2, n_heads=2, seed=3)


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


def select_tab(w, title):
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == title))


@pytest.fixture
def window(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    return w


def learned_table(backend):
    return backend.encoder.embeddings.position_embeddings.weight.detach().double().numpy()


def test_positions_follow_a_switch_while_shown_with_the_layer_kept_in_range(qtbot, window, two_layers):
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    with qtbot.waitSignal(panel.explained, timeout=60_000):
        panel.explain_text(FIRST, layer=5, head=1)
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120_000):
        panel.set_view(1)
    assert view.demo.layer == 4
    errors = []
    w.state.error.connect(errors.append)
    with qtbot.waitSignal(view.shown, timeout=120_000):
        new = choose_inspected(qtbot, w, two_layers)       # the view stays on screen
    wait_idle(qtbot, w)
    assert view.demo.layer == new.n_layers - 1 == 1
    assert "layer 2" in view.demo_label.text() and "layer 5" not in view.demo_label.text()
    P = view.learned_table.raw.shape[0]
    np.testing.assert_allclose(view.learned_table.raw, learned_table(new)[:P], atol=1e-7)
    assert "does not exist" not in view.info.text() and not errors
    # a new sentence explained while Positions is shown: the demo is that sentence's
    panel.text_edit.setText(SECOND)
    with qtbot.waitSignal(view.shown, timeout=120_000):
        panel.explain_current()
    wait_idle(qtbot, w)
    from core.walkthrough.positions_demo import permutation_demo
    assert view.demo.tokens == permutation_demo(new, SECOND, seed=0, layer=1).tokens
    assert view.demo.tokens != permutation_demo(new, FIRST, seed=0, layer=1).tokens


def test_positions_show_no_old_table_while_the_new_model_loads_or_fails(qtbot, window, two_layers):
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120_000):
        panel.set_view(1)
    w.state.inspect_backend_changed.emit(None)            # a load starts
    assert view.positions is None and not view.sin_table.isVisible() and not view.demo_label.text()
    w.state.inspect_backend_changed.emit(w.state.inspect_backend)
    qtbot.waitUntil(lambda: view.positions is not None, timeout=120_000)
    view.follow.run(lambda backend, progress=None, cancel=None: 1 / 0, label="x", on_result=view._on_result,
                    on_error=view._on_error, wants_progress=False, show_progress=False)
    qtbot.waitUntil(lambda: "division" in view.info.text(), timeout=30_000)
    assert view.positions is None and not view.learned_table.isVisible()


def test_batch_of_two_follows_a_switch_while_shown(qtbot, window, two_layers):
    from core.walkthrough.batch import explain_batch
    w = window
    panel = w.optional_panels["Step by step"]
    select_tab(w, "Step by step")
    panel.text_edit.setText(FIRST)
    panel.other_edit.setText(SECOND + " again and again")
    view = panel.batch_view
    with qtbot.waitSignal(view.shown, timeout=120_000):
        panel.set_view(2)
    with qtbot.waitSignal(view.shown, timeout=120_000):
        new = choose_inspected(qtbot, w, two_layers)
    wait_idle(qtbot, w)
    r = view.result
    fresh = explain_batch(new, FIRST, SECOND + " again and again", layer=r.layer, head=r.head)
    assert r.layer < new.n_layers and r.head < new.n_heads
    np.testing.assert_allclose(view.weights.raw, fresh.weights[fresh.padded], atol=1e-6)


def test_newest_request_wins_and_the_old_models_result_is_dropped(qtbot, window):
    """The mechanism itself: two requests, the first finishing last, and a model switch in flight."""
    from app.gui.follow_model import FollowModel
    w = window
    follow = FollowModel(w.state, "test.follow")
    gate = threading.Event()
    shown = []

    def slow(backend, tag, progress=None, cancel=None):
        if tag == "old":
            gate.wait(30)
        return tag

    follow.run(slow, "old", label="t", on_result=lambda r, b: shown.append(r), wants_progress=False,
               show_progress=False)
    follow.run(slow, "new", label="t", on_result=lambda r, b: shown.append(r), wants_progress=False,
               show_progress=False)
    gate.set()
    qtbot.waitUntil(lambda: shown == ["new"], timeout=30_000)
    wait_idle(qtbot, w)
    gate.clear()
    follow.run(slow, "old", label="t", on_result=lambda r, b: shown.append(r), wants_progress=False,
               show_progress=False)
    backend = w.state.inspect_backend
    w.state.inspect_backend_changed.emit(backend)          # another model took its place meanwhile
    gate.set()
    wait_idle(qtbot, w)
    assert shown == ["new"]
