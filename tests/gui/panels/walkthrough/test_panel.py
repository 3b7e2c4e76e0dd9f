"""The "Step by step" tab (app/gui/panels/walkthrough/panel.py and its views) on minilm, the real model."""
import re

import numpy as np
import pytest
from PySide6 import QtCore

from app.gui.panels.walkthrough.steps_view import GREEN, RED
from core.walkthrough import steps as W
from tests.support.app_fixtures import explain_and_wait
from tests.support.paths import ROOT, child_env

# 40 tokens with minilm's tokenizer: [CLS] + 38 word pieces + [SEP]
LONG = ("The old teacher walked slowly to the river because she wanted to see the birds that "
        "came back every spring, and her students followed her with notebooks and questions about "
        "the cold water down there.")


@pytest.fixture
def panel(make_walkthrough_panel, minilm):
    return make_walkthrough_panel(minilm, 1200, 800)


def explain(qtbot, panel, text=LONG, **kw):
    return explain_and_wait(qtbot, panel, text, **kw)


def click_cell(qtbot, hm, i, j):
    qtbot.waitExposed(hm)
    qtbot.wait(50)                                   # let the axes settle their widths
    pos = hm.mapFromScene(hm.plot.vb.mapViewToScene(QtCore.QPointF(j, i)))
    qtbot.mouseClick(hm.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=pos)


def expected_badge(diff):
    """The badge, written independently of app code: '= model (max |Δ| 3e-7)'."""
    if diff is None:
        return "not compared with the model"
    m = re.fullmatch(r"(\d)e([+-])0*(\d+)", f"{diff:.0e}")
    number = "0" if diff == 0 else f"{m[1]}e{'-' if m[2] == '-' else ''}{m[3]}"
    return f"{'=' if diff <= 1e-5 else '≠'} model (max |Δ| {number})"


def test_walks_every_step_of_a_40_token_sentence(qtbot, panel, minilm):
    w = explain(qtbot, panel, layer=2, head=3)
    assert len(w.tokens) == 40 and (w.layer, w.head) == (1, 2)
    names = [s.name for s in w.steps]
    assert names == [s.name for s in W.explain(minilm, LONG, layer=1, head=2).steps]
    panel.show_step(names[0])
    shown = [panel.current_step_name()]
    panel.step_shown.connect(shown.append)
    while panel.next_button.isEnabled():
        qtbot.mouseClick(panel.next_button, QtCore.Qt.MouseButton.LeftButton)
    assert shown == names
    assert panel.position_label.text() == f"Step {len(names)} of {len(names)}"
    assert not panel.next_button.isEnabled() and panel.prev_button.isEnabled()
    qtbot.mouseClick(panel.prev_button, QtCore.Qt.MouseButton.LeftButton)
    assert panel.current_step_name() == names[-2]
    # each step draws its own numbers, labelled by token
    for step in w.steps:
        panel.show_step(step.name)
        view = panel.step_view
        assert view.formula.text() == step.formula and view.shape.text() == step.shape_text
        assert view.description.text() == step.description
        values = np.asarray(step.values, np.float64)
        drawn = view.heatmap.raw
        np.testing.assert_array_equal(drawn, values.reshape(drawn.shape))
        if values.ndim == 2:
            assert view.heatmap.row_labels == [str(t) for t in step.row_labels]
            assert drawn.shape[0] == 40
    assert panel.step_view.heatmap.tooltip_text(0, 5).endswith(f"<b>{float(w.steps[-1].values[5]):.6g}</b>")


def test_badge_shows_the_cores_difference(qtbot, panel):
    w = explain(qtbot, panel, "The cat sat on the mat.")
    for step in w.steps:
        panel.show_step(step.name)
        badge = panel.step_view.badge
        assert badge.text() == expected_badge(step.max_abs_diff)
        color = GREEN if step.max_abs_diff is not None and step.max_abs_diff <= 1e-5 else RED
        if step.max_abs_diff is not None:
            assert color in badge.styleSheet()


def test_clicking_a_weights_row_builds_head_output(qtbot, panel):
    w = explain(qtbot, panel, "The animal didn't cross the street because it was tired.", layer=3, head=2)
    panel.show_step("weights")
    view = panel.step_view
    assert view.build_up.isVisible()
    i = w.tokens.index("it")
    with qtbot.waitSignal(view.row_clicked, timeout=5000) as sig:
        click_cell(qtbot, view.heatmap, i, 2)
    assert sig.args == [i]
    rows = view.build_up.rows
    weights, v = w.step("weights").values, w.step("v").values
    T = len(w.tokens)
    assert rows.shape == (T + 1, v.shape[1])
    for j in range(T):                                # each term is weights[i, j] * v[j]
        np.testing.assert_allclose(rows[j], weights[i, j] * v[j], rtol=1e-12)
    np.testing.assert_allclose(rows[-1], w.step("head_output").values[i], atol=1e-6)
    np.testing.assert_allclose(view.build_up.heatmap.raw[-1], w.step("head_output").values[i], atol=1e-6)
    assert repr(w.tokens[i]) in view.build_up.heatmap.plot.titleLabel.text


def test_empty_text_gives_a_hint_not_an_error(qtbot, panel):
    errors = []
    panel.state.error.connect(errors.append)
    panel.explain_text("   ")
    assert "Type a sentence" in panel.info_label.text()
    assert not panel.state.jobs.busy and not errors


def test_long_text_says_how_many_tokens_were_cut(qtbot, panel, minilm):
    text = " ".join(["word"] * 600)
    w = explain(qtbot, panel, text)
    full = len(minilm.tokenizer(text, truncation=False)["input_ids"])
    assert len(w.tokens) == minilm.max_length and w.truncated == full - minilm.max_length
    assert f"so {w.truncated} were cut" in panel.info_label.text()


def test_latest_request_wins(qtbot, panel):
    """While one runs only the newest request waits: two jobs for three requests, the newest shown."""
    from app.gui.panels.walkthrough.panel import JOB_KEY
    started, shown = [], []
    panel.state.job_started.connect(lambda job: started.append(job.args[1]) if job.key == JOB_KEY else None)
    panel.explained.connect(shown.append)
    panel.explain_text("The first sentence.")
    panel.explain_text("A second one.")
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.explain_text("The third and last sentence.")
    assert "third" in sig.args[0].tokens
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60000)
    assert "third" in panel.walkthrough.tokens
    assert started == ["The first sentence.", "The third and last sentence."]
    assert shown == [panel.walkthrough]


def test_positions_view_runs_the_first_and_the_newest_request(qtbot, panel):
    from app.gui.panels.walkthrough.positions_view import JOB_KEY
    view = panel.positions_view                       # its requests, without showing the tab
    started, shown = [], []
    panel.state.job_started.connect(lambda job: started.append(job.args[1:]) if job.key == JOB_KEY else None)
    view.shown.connect(lambda positions, demo: shown.append(demo))
    for text in ("one two three four", "five six seven eight", "the newest of the three"):
        view.show_for(text, 0)
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=120000)
    assert started == [("one two three four", 0), ("the newest of the three", 0)]
    assert len(shown) == 1 and "newest" in shown[0].tokens and view.demo is shown[0]


def test_search_and_corpus_send_a_sentence_to_the_tab(qtbot, make_window, tiny_store_template):
    win = make_window(tiny_store_template)
    panel = win.optional_panels["Step by step"]
    search = win.search_panel
    with qtbot.waitSignal(search.results_shown, timeout=60000) as sig:
        search.query.setText("a cat on a mat")
    hit = sig.args[0].hits[0]
    assert search.walkthrough_button.isEnabled()
    qtbot.waitUntil(lambda: not win.state.jobs.busy, timeout=60000)
    with qtbot.waitSignal(panel.explained, timeout=60000) as got:
        qtbot.mouseClick(search.walkthrough_button, QtCore.Qt.MouseButton.LeftButton)
    assert win.tabs.tabText(win.tabs.currentIndex()) == "Step by step"
    assert panel.text_edit.text() == hit.text
    tokens = win.state.backend.tokenizer.convert_ids_to_tokens(
        win.state.backend.tokenizer(hit.text)["input_ids"])
    assert got.args[0].tokens == tokens
    # and from the Corpus tab
    win.show_panel("Corpus")
    corpus = win.corpus_panel
    corpus.table.selectRow(3)
    sentence = corpus.model.text_at(3)
    with qtbot.waitSignal(panel.explained, timeout=60000):
        qtbot.mouseClick(corpus.walkthrough_button, QtCore.Qt.MouseButton.LeftButton)
    assert win.tabs.tabText(win.tabs.currentIndex()) == "Step by step"
    assert panel.text_edit.text() == sentence


def test_positions_view_draws_the_tables(qtbot, panel, minilm):
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120000):
        panel.set_view(1)
    P, D = view.sin_table.raw.shape
    assert D == minilm.dim and P == 64
    p, i = np.arange(P)[:, None], np.arange(D)[None, :]
    angle = p / 10000 ** ((i // 2 * 2) / D)                  # PE[p, 2k] = sin, PE[p, 2k+1] = cos
    np.testing.assert_allclose(view.sin_table.raw, np.where(i % 2 == 0, np.sin(angle), np.cos(angle)), atol=1e-12)
    learned = minilm.encoder.embeddings.position_embeddings.weight[:P].detach().double().numpy()
    np.testing.assert_allclose(view.learned_table.raw, learned, atol=1e-7)
    unit = learned / np.linalg.norm(learned, axis=1, keepdims=True)
    np.testing.assert_allclose(view.learned_cosine.raw, unit @ unit.T, atol=1e-9)
    assert view.learned_table.isVisibleTo(panel) and not view.learned_note.isVisibleTo(panel)
    assert "6.3" in view.wavelengths.text()                   # 2π for the fastest pair of columns


def test_permutation_demo_claims_hold_as_displayed(qtbot, panel):
    panel.text_edit.setText("the quick brown fox jumps over the lazy dog")
    panel.layer_spin.setValue(1)
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120000):
        panel.set_view(1)
    demo, text = view.demo, view.demo_label.text()
    perm = demo.permutation
    assert [demo.tokens[j] for j in perm] == demo.shuffled_tokens != demo.tokens
    without = re.search(r"Without positions.*?max \|Δ\| = <b>([^<]+)</b>", text)[1]
    with_ = re.search(r"With positions.*?max \|Δ\| = <b>([^<]+)</b>", text)[1]
    original, moved = demo.without_positions                 # (T, D) each: the attention outputs
    measured = float(np.abs(moved - original[perm]).max())
    assert measured <= 1e-5 and float(without) == pytest.approx(measured, rel=0.5)   # shown to 1 digit
    original, moved = demo.with_positions
    measured = float(np.abs(moved - original[perm]).max())
    assert measured > 1e-2 and float(with_) == pytest.approx(measured, rel=1e-2)
    assert "✔ the same rows, permuted" in text and "✔ the order changed the numbers" in text


def test_pooling_step_compares_cls_mean_max(qtbot, panel, minilm):
    text, other = "A cat sleeps on the sofa.", "A kitten naps on the couch."
    explain(qtbot, panel, text, other=other)
    with qtbot.waitSignal(panel.pooling_shown, timeout=60000):
        panel.show_step("pooled")
    label = panel.pooling_view.label.text()
    for pooling in ("cls", "mean", "max"):
        a, b = minilm.embed([text, other], pooling=pooling)
        assert re.search(rf"<b>{pooling}</b>.*?{float(a @ b):.4f}", label)
    assert panel.pooling_view.heatmap.row_labels == ["mean", "cls", "max"]


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_export_notebook_writes_what_the_cli_writes(qtbot, panel, tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path
    text = "The cat sat on the mat."
    explain(qtbot, panel, text, layer=2, head=3)
    with qtbot.waitSignal(panel.exported, timeout=60000) as sig:
        panel.export_notebook(tmp_path / "app.ipynb")
    assert sig.args[0] == tmp_path / "app.ipynb"
    root = ROOT
    cli = Path(sys.executable).with_name("encoderscope")
    subprocess.run([str(cli), "explain", text, "--model", "minilm", "--layer", "2", "--head", "3",
                    "--notebook", str(tmp_path / "cli.ipynb")], check=True, timeout=600, capture_output=True,
                   env=child_env(root))
    app_nb, cli_nb = (json.loads((tmp_path / f"{n}.ipynb").read_text()) for n in ("app", "cli"))
    # the same cells but the name of the data file beside each (app.npz, cli.npz)
    assert [c["source"] for c in app_nb["cells"]] == [
        [line.replace("cli.npz", "app.npz") for line in c["source"]] for c in cli_nb["cells"]]
    with np.load(tmp_path / "app.npz") as a, np.load(tmp_path / "cli.npz") as c:
        assert a.files == c.files
        for name in a.files:
            np.testing.assert_array_equal(a[name], c[name])
    assert len(app_nb["cells"]) > len(panel.walkthrough.steps)


def test_layer_and_head_controls_rerun_the_walkthrough(qtbot, panel, minilm):
    text = "Birds fly south in winter."
    explain(qtbot, panel, text)
    assert panel.head_spin.maximum() == minilm.n_heads and panel.layer_spin.maximum() == minilm.n_layers
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.head_spin.setValue(5)
        panel.layer_spin.setValue(6)                 # both changes coalesce into one run
    w = sig.args[0]
    assert (w.layer, w.head) == (5, 4)
    np.testing.assert_array_equal(w.step("q").values, W.explain(minilm, text, layer=5, head=4).step("q").values)
    assert "layer 6, head 5" in panel.info_label.text()


def test_results_follow_the_selected_model(qtbot, panel, tiny_distilbert):
    from core.encoder.backends import get_backend
    explain(qtbot, panel, "the cat sat on the mat")
    tiny = get_backend(str(tiny_distilbert), backend="scratch")
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.state.backend = tiny
        panel.state.backend_changed.emit(tiny)
    w = sig.args[0]
    assert w.step("token_embeddings").values.shape == (len(w.tokens), tiny.dim)
    assert panel.layer_spin.maximum() == tiny.n_layers and panel.head_spin.maximum() == tiny.n_heads
    assert panel.walkthrough is w and panel.walkthrough_backend is tiny


def test_attention_panel_sends_its_text(qtbot, panel):
    from app.gui.panels.attention.panel import AttentionPanel
    attention = AttentionPanel(panel.state, auto_inspect=False)
    qtbot.addWidget(attention)
    received = []
    panel.state.walkthrough_requested.connect(received.append)
    attention.text_edit.setText("the dog ran in the park")
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        qtbot.mouseClick(attention.walkthrough_button, QtCore.Qt.MouseButton.LeftButton)
    assert received == ["the dog ran in the park"]
    assert sig.args[0].tokens[1:-1] == ["the", "dog", "ran", "in", "the", "park"]


def test_sinusoidal_model_has_no_learned_table(qtbot, panel, tmp_path):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    sinusoidal = get_backend(str(make_tiny_distilbert(tmp_path / "sin", sinusoidal=True)), backend="scratch")
    panel.state.backend = sinusoidal
    panel.state.backend_changed.emit(sinusoidal)
    panel.text_edit.setText("the cat sat on the mat")
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=60000):
        panel.set_view(1)
    assert view.learned_note.isVisibleTo(panel) and not view.learned_table.isVisibleTo(panel)
    assert "no learned position table" in view.learned_note.text()
    assert view.sin_table.raw.shape[1] == sinusoidal.dim


def test_prenorm_model_pairs_and_hf_note(qtbot, panel, tmp_path, tiny_distilbert):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_checkpoint
    pre = get_backend(str(make_tiny_checkpoint(tmp_path / "pre")), backend="scratch")
    panel.state.backend = pre
    panel.state.backend_changed.emit(pre)
    w = explain(qtbot, panel, "the cat sat", other="a dog ran", as_pair=True)
    assert w.norm == "pre" and "final_layernorm" in [s.name for s in w.steps]
    assert w.tokens.count("[SEP]") == 2 and set(w.token_type_ids) == {0, 1}
    for step in w.steps:                             # the pre-norm order walks and draws too
        panel.show_step(step.name)
        assert panel.step_view.badge.text() == expected_badge(step.max_abs_diff)
    hf = get_backend(str(tiny_distilbert), backend="hf")
    with qtbot.waitSignal(panel.explained, timeout=60000) as sig:
        panel.state.backend = hf
        panel.state.backend_changed.emit(hf)
    assert sig.args[0].note and sig.args[0].note in panel.info_label.text()


def test_a_model_changed_while_the_tab_is_hidden_leaves_no_old_number(qtbot, panel, tiny_distilbert):
    """The weighted-sum panel and the step shown are recomputed for the new model even though
    the tab is not on screen; each is compared with a fresh computation from the new run."""
    from core.encoder.backends import get_backend
    explain(qtbot, panel, "the cat sat on the mat .")
    panel.show_step("weights")
    panel.step_view._row_clicked(2)
    old_total = panel.step_view.build_up.total.copy()
    panel.hide()
    tiny = get_backend(str(tiny_distilbert))
    with qtbot.waitSignal(panel.explained, timeout=60000):
        panel.state.backend = tiny
        panel.state.backend_changed.emit(tiny)
    w = panel.walkthrough
    assert panel.walkthrough_backend is tiny and panel.current_step_name() == "weights"
    weights, v = np.asarray(w.step("weights").values), np.asarray(w.step("v").values)
    q = panel.step_view.build_up.query
    np.testing.assert_allclose(panel.step_view.build_up.total, weights[q] @ v, atol=1e-12)
    assert panel.step_view.build_up.total.shape != old_total.shape or \
        not np.allclose(panel.step_view.build_up.total, old_total)
    label = panel.step_view.build_up.label.text()
    assert f"row {q} of <b>head_output</b>" in label
    assert float(re.search(r"max \|Δ\| ([-+.e0-9]+)\)", label).group(1)) <= 1e-12   # against the new run
    np.testing.assert_allclose(panel.step_view.heatmap.raw, weights)


def test_the_positions_view_shown_again_after_a_hidden_model_change_is_the_new_models(
        qtbot, panel, minilm, tiny_distilbert):
    from core.encoder.backends import get_backend
    view = panel.positions_view
    with qtbot.waitSignal(view.shown, timeout=120000):
        panel.set_view(1)
    assert view.learned_table.raw.shape[1] == minilm.dim
    panel.hide()
    tiny = get_backend(str(tiny_distilbert))
    panel.state.backend = tiny
    panel.state.backend_changed.emit(tiny)
    with qtbot.waitSignal(view.shown, timeout=120000):
        panel.show()
    learned = tiny.encoder.embeddings.position_embeddings.weight.detach().double().numpy()
    P = view.learned_table.raw.shape[0]
    np.testing.assert_allclose(view.learned_table.raw, learned[:P], atol=1e-7)    # the new model's table
