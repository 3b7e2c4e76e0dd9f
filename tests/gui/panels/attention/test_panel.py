"""Attention inspector (app/gui/panels/attention/panel.py, heatmap.py, head_grid.py) on a tiny local model."""
import numpy as np
import pytest
from PySide6 import QtCore, QtGui, QtWidgets

from app.gui.panels.attention.export import pair_text  # noqa: E402
from app.gui.panels.attention.panel import AttentionPanel  # noqa: E402
from app.gui.state import AppState  # noqa: E402
from core.encoder.backends import Inspection, get_backend
from core.inspect import attention_maps as A

TEXT = "the quick brown fox sat on the mat"


@pytest.fixture(scope="module", params=["hf", "scratch"])
def backend(request, tiny_distilbert):
    return get_backend(str(tiny_distilbert), backend=request.param)


@pytest.fixture
def panel(qtbot, backend):
    state = AppState()
    p = AttentionPanel(state, auto_inspect=False)
    qtbot.addWidget(p)
    p.resize(1000, 700)
    p.show()
    state.backend = backend
    state.backend_changed.emit(backend)
    yield p
    state.shutdown(5000)


def inspect(qtbot, panel, text=TEXT, pair=""):
    with qtbot.waitSignal(panel.inspected, timeout=15000):
        panel.inspect_text(text, pair)
    return panel.inspection


def test_heatmap_rows_and_columns_are_the_tokens(qtbot, panel, backend):
    ins = inspect(qtbot, panel)
    T = len(ins.tokens)
    assert ins.tokens[0] == "[CLS]" and ins.tokens[-1] == "[SEP]"
    hm = panel.heatmap
    assert hm.drawn_matrix().shape == (T, T)
    assert hm.left_axis.labels == ins.tokens and hm.top_axis.labels == ins.tokens
    qtbot.waitUntil(lambda: len(hm.left_axis.visible_labels()) == T)   # all fit at this size
    assert len(hm.top_axis.visible_labels()) == T


def test_drawn_values_equal_core_attentions(qtbot, panel, backend):
    inspect(qtbot, panel)
    expected = backend.inspect(TEXT).attentions
    L, H = expected.shape[:2]
    assert panel.layer_spin.maximum() == L and panel.head_spin.maximum() == H
    for layer, head in [(0, 0), (L - 1, H - 1), (1, 2)]:
        panel.set_layer_head(layer, head)
        np.testing.assert_allclose(panel.heatmap.drawn_matrix(), expected[layer, head], rtol=1e-5, atol=1e-6)
        assert panel.heatmap.plot.titleLabel.text.startswith(f"Layer {layer + 1}, head {head + 1}")
    panel.set_mode("mean")
    np.testing.assert_allclose(panel.heatmap.drawn_matrix(), expected[panel.layer].mean(0), rtol=1e-5, atol=1e-6)


def test_rollout_rows_sum_to_one(qtbot, panel, backend):
    ins = inspect(qtbot, panel)
    panel.set_mode("rollout")
    for layer in range(ins.attentions.shape[0]):
        panel.set_layer_head(layer)
        m = panel.heatmap.drawn_matrix()
        np.testing.assert_allclose(m.sum(-1), 1.0, atol=1e-5)
        np.testing.assert_allclose(m, A.rollout(ins.attentions, upto=layer), atol=1e-6)
    assert not panel.head_spin.isEnabled()          # no head to choose in rollout
    assert "rollout" in panel.heatmap.plot.titleLabel.text.lower()


def test_grid_has_layers_times_heads_cells_and_click_opens_head(qtbot, panel, backend):
    ins = inspect(qtbot, panel)
    L, H = ins.attentions.shape[:2]
    panel.set_mode("mean")
    panel.set_view(1)
    grid = panel.grid
    qtbot.waitExposed(grid)
    assert grid.grid_shape() == (L, H) and grid.cell_count() == L * H
    assert not panel.mode_combo.isEnabled() and not panel.show_values.isEnabled()
    # every cell of the mosaic is the colour-mapped head: check one head's corner pixels differ from gutter
    layer, head = L - 1, H - 2
    pos = grid.mapFromScene(grid.scene_pos_of(layer, head))
    qtbot.mouseClick(grid.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)
    assert (panel.layer, panel.head, panel.mode) == (layer, head, "head")
    assert panel.stack.currentIndex() == 0
    assert panel.mode_combo.isEnabled() and panel.show_values.isEnabled()
    np.testing.assert_allclose(panel.heatmap.drawn_matrix(), ins.attentions[layer, head], atol=1e-6)


def test_hide_special_tokens_raw_or_renormalised(qtbot, panel, backend):
    ins = inspect(qtbot, panel)
    panel.hide_special.setChecked(True)
    words = [t for t in ins.tokens if t not in ("[CLS]", "[SEP]")]
    assert panel.heatmap.left_axis.labels == words and panel.heatmap.top_axis.labels == words
    raw = panel.heatmap.drawn_matrix()
    np.testing.assert_allclose(raw, ins.attentions[0, 0][1:-1, 1:-1], atol=1e-6)
    assert (raw.sum(-1) <= 1 + 1e-6).all()
    panel.renormalise.setChecked(True)
    np.testing.assert_allclose(panel.heatmap.drawn_matrix().sum(-1), 1.0, atol=1e-5)
    assert panel.grid.grid_shape() == ins.attentions.shape[:2]
    assert panel.grid.attentions.shape[-1] == len(words)


def test_export_png_and_csv_numbers_match(qtbot, panel, backend, tmp_path):
    ins = inspect(qtbot, panel)
    panel.set_layer_head(1, 3)
    png = panel.export_png(tmp_path / "view.png")
    img = QtGui.QImage(str(png))
    assert not img.isNull() and img.width() > 200 and img.height() > 200
    csv = panel.export_csv(tmp_path / "m.csv")
    m, rows, cols = A.read_matrix_csv(csv)
    assert rows == ins.tokens and cols == ins.tokens
    np.testing.assert_allclose(m, panel.heatmap.drawn_matrix(), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(m, ins.attentions[1, 3], rtol=1e-6, atol=1e-8)
    # all heads: written in a worker (1.2M lines at 6x12x128); the panel says when it is done
    with qtbot.waitSignal(panel.exported, timeout=15000) as sig:
        assert panel.export_all_csv(tmp_path / "all.csv") is not None
    all_csv = sig.args[0]
    L, H, T, _ = ins.attentions.shape
    lines = all_csv.read_text().strip().split("\n")
    assert len(lines) == 1 + L * H * T * T
    layer, head, qi, qt, ki, kt, w = lines[1 + (1 * H + 3) * T * T + 2 * T + 1].split(",")
    assert (layer, head, qi, ki, qt, kt) == ("1", "3", "2", "1", ins.tokens[2], ins.tokens[1])
    assert float(w) == pytest.approx(float(ins.attentions[1, 3, 2, 1]), rel=1e-6)
    with qtbot.waitSignal(panel.exported, timeout=15000) as sig:
        panel.export_npz(tmp_path / "all")
    assert sig.args[0] == tmp_path / "all.npz"
    npz = np.load(sig.args[0])
    np.testing.assert_array_equal(npz["attentions"], ins.attentions.astype(np.float32))
    assert npz["tokens"].tolist() == ins.tokens and str(npz["text"]) == TEXT
    panel.set_view(1)
    assert QtGui.QImage(str(panel.export_png(tmp_path / "grid.png"))).width() > 200


def test_arrow_keys_step_heads_and_layers(qtbot, panel):
    inspect(qtbot, panel)
    panel.set_layer_head(0, 0)
    qtbot.keyClick(panel.heatmap, QtCore.Qt.Key.Key_Right)
    qtbot.keyClick(panel.heatmap, QtCore.Qt.Key.Key_Right)
    qtbot.keyClick(panel.heatmap, QtCore.Qt.Key.Key_Down)
    assert (panel.layer, panel.head) == (1, 2)
    qtbot.keyClick(panel.heatmap, QtCore.Qt.Key.Key_Left)
    assert panel.head == 1


def test_hover_readout_and_numbers(qtbot, panel):
    ins = inspect(qtbot, panel)
    with qtbot.waitSignal(panel.heatmap.hovered) as sig:
        panel.heatmap.hover(2, 1)
    i, j, v = sig.args
    assert v == pytest.approx(float(panel.heatmap.drawn_matrix()[2, 1]))
    tip = panel.heatmap.tooltip_text(2, 1)
    assert ins.tokens[2] in tip and ins.tokens[1] in tip and f"{v:.4f}" in tip
    assert f"{v:.4f}" in panel.hover_label.text()
    panel.show_values.setChecked(True)
    panel.heatmap.grab()                                   # paint
    assert panel.heatmap.values_shown()
    assert panel.heatmap.values_item.drawn == len(ins.tokens) ** 2


def test_long_text_says_how_much_was_truncated(qtbot, panel, backend):
    text = " ".join(["the cat sat on the mat"] * 30)       # far beyond the tiny model's 64 positions
    ins = inspect(qtbot, panel, text)
    assert ins.truncated > 0
    assert len(ins.tokens) == backend.max_length
    info = panel.info_label.text()
    assert "truncated" in info and f"{ins.truncated}" in info
    assert panel.heatmap.drawn_matrix().shape == (backend.max_length,) * 2


def test_request_from_other_panels_inspects_a_pair(qtbot, panel):
    with qtbot.waitSignal(panel.inspected, timeout=15000):
        panel.state.request_inspect("the cat sat", "a dog ran")
    assert panel.inspection.tokens.count("[SEP]") == 2
    assert panel.pair_edit.text() == "a dog ran"
    assert pair_text("a", "") == "a"


def test_new_backend_reinspects_same_text(qtbot, panel, tiny_distilbert):
    inspect(qtbot, panel)
    other = get_backend(str(tiny_distilbert), backend="scratch" if panel.state.backend.backend == "hf" else "hf")
    with qtbot.waitSignal(panel.inspected, timeout=15000):
        panel.state.backend = other
        panel.state.backend_changed.emit(other)
    np.testing.assert_allclose(panel.inspection.attentions, other.inspect(TEXT).attentions, atol=1e-5)


def test_example_is_inspected_when_a_model_loads(qtbot, backend):
    state = AppState()
    p = AttentionPanel(state)                      # as the main window makes it
    qtbot.addWidget(p)
    assert p.heatmap.left_axis.labels == []        # empty until a model is there
    with qtbot.waitSignal(p.inspected, timeout=15000):
        state.backend = backend
        state.backend_changed.emit(backend)
    assert p.inspection.tokens[0] == "[CLS]" and len(p.heatmap.left_axis.labels) > 3
    state.shutdown(5000)


def test_all_heads_export_runs_off_the_ui_thread_and_fails_cleanly(qtbot, panel, tmp_path):
    inspect(qtbot, panel)
    job = panel.export_all_csv(tmp_path / "all.csv")
    assert job is not None and panel.state.jobs.is_running("attention.export")
    # a second export while the first is written is refused with a message, not queued silently
    errors = []
    panel.state.error.connect(errors.append)
    assert panel.export_npz(tmp_path / "x.npz") is None and "still being written" in errors[-1]
    qtbot.waitUntil(lambda: not panel.state.jobs.is_running("attention.export"), timeout=15000)
    # an unwritable place: an error message, no file, no half-written leftover
    with qtbot.waitSignal(panel.export_failed, timeout=15000) as sig:
        panel.export_all_csv(tmp_path / "no_such_dir" / "all.csv")
    assert "no_such_dir" in sig.args[0] and errors[-1].startswith("Could not save")
    assert not (tmp_path / "no_such_dir").exists()
    # cancelled (6x12 heads at 128 tokens, as in the benchmark: ~1 s to write): the older
    # file is kept as it was, and no part file is left
    rng = np.random.default_rng(0)
    big = rng.random((6, 12, 128, 128)).astype(np.float32)
    panel.set_inspection(Inspection(tokens=[f"t{i}" for i in range(128)], attentions=big / big.sum(-1, keepdims=True),
                                    hidden_states=np.zeros((7, 128, 4), np.float32), device="cpu"))
    (tmp_path / "keep.csv").write_text("old")
    with qtbot.waitSignal(panel.export_failed, timeout=15000) as sig:
        job = panel.export_all_csv(tmp_path / "keep.csv")
        job.cancel()
    assert sig.args[1] == "cancelled"
    assert (tmp_path / "keep.csv").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["all.csv", "keep.csv"]


def test_mouse_hover_shows_query_key_and_weight(qtbot, panel):
    ins = inspect(qtbot, panel)
    hm = panel.heatmap
    qtbot.waitExposed(hm)
    qtbot.wait(100)                                        # let the axes settle their widths
    i, j = 3, 1
    scene = hm.plot.vb.mapViewToScene(QtCore.QPointF(j, i))
    pos = QtCore.QPointF(hm.mapFromScene(scene))
    move = QtGui.QMouseEvent(QtCore.QEvent.Type.MouseMove, pos, hm.viewport().mapToGlobal(pos),
                             QtCore.Qt.MouseButton.NoButton, QtCore.Qt.MouseButton.NoButton,
                             QtCore.Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(hm.hovered, timeout=5000) as sig:
        QtWidgets.QApplication.sendEvent(hm.viewport(), move)
    assert sig.args[:2] == [i, j]
    assert sig.args[2] == pytest.approx(float(ins.attentions[0, 0, i, j]), rel=1e-5)
    assert hm.left_axis.highlight == i and hm.top_axis.highlight == j
    text = panel.hover_label.text()
    assert ins.tokens[i] in text and ins.tokens[j] in text and f"{sig.args[2]:.4f}" in text


def test_three_quick_requests_run_the_first_and_the_newest(qtbot, panel, backend):
    """While one inspection runs only the newest request waits; the first's result is not shown."""
    from app.gui.panels.attention.panel import JOB_KEY
    started, shown = [], []
    panel.state.job_started.connect(lambda job: started.append(job.args[1]) if job.key == JOB_KEY else None)
    panel.inspected.connect(shown.append)
    for text in ("a first sentence", "a second sentence", "the newest sentence"):
        panel.inspect_text(text)
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=15000)
    assert started == ["a first sentence", "the newest sentence"]
    assert len(shown) == 1 and panel.inspection is shown[0]
    assert shown[0].tokens == backend.inspect("the newest sentence").tokens


def test_a_request_waiting_when_the_model_changes_runs_on_the_new_model(qtbot, panel, backend, tiny_distilbert):
    from app.gui.panels.attention.panel import JOB_KEY
    state = panel.state
    other = get_backend(str(tiny_distilbert), backend="hf" if backend.backend == "scratch" else "scratch")
    started = []
    state.job_started.connect(lambda job: started.append(job.args[:2]) if job.key == JOB_KEY else None)
    panel.inspect_text("a first sentence")
    panel.inspect_text("the newest sentence")             # waits for the first
    state.backend = None
    state.backend_changed.emit(None)                      # another model loads: it would run the old one
    assert not state.has_waiting(JOB_KEY)
    state.backend = other
    state.backend_changed.emit(other)
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=15000)
    assert started == [(backend, "a first sentence"), (other, "the newest sentence")]
    assert panel.inspection.tokens == other.inspect("the newest sentence").tokens
    kind = {"scratch": "from-scratch encoder", "hf": "transformers"}
    assert kind[other.backend] in panel.info_label.text() and kind[backend.backend] not in panel.info_label.text()
