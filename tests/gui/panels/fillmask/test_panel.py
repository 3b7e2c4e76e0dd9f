"""Fill-mask panel (app/gui/panels/fillmask/) on a tiny local MLM model and on minilm (no head)."""
import pytest
from PySide6 import QtCore

from app.gui.panels.fillmask import panel as F  # noqa: E402
from app.gui.panels.fillmask.mask_text import fill_mask_at, mask_spans, mask_word, words
from app.gui.panels.fillmask.no_mlm import mlm_models
from app.gui.panels.fillmask.per_layer import layer_names
from app.gui.state import AppState  # noqa: E402
from core.encoder.backends import get_backend

TEXT = "the [MASK] sat on the mat ."


# ---- pure helpers -------------------------------------------------------------------------

def test_words_and_masking():
    text = "The cat's toy, [MASK] here."
    assert [w for _, _, w in words(text)] == ["The", "cat's", "toy", ",", "[MASK]", "here", "."]
    assert mask_word(text, 1) == "The [MASK] toy, [MASK] here."
    assert mask_spans("a [MASK] b [MASK]") == [(2, 8), (11, 17)]


def test_fill_mask_at():
    assert fill_mask_at("a [MASK] b [MASK]", 1, "c") == "a [MASK] b c"
    assert fill_mask_at("the cat [MASK] ran", 0, "##s") == "the cats ran"
    with pytest.raises(IndexError):
        fill_mask_at("no mask", 0, "x")


def test_layer_names():
    assert layer_names(3, 2) == ["embeddings", "layer 1", "layer 2"]
    assert layer_names(2, 2) == ["layer 1", "layer 2"]


# ---- the panel ------------------------------------------------------------------------------

@pytest.fixture(scope="module", params=["scratch", "hf"])
def backend(request, tiny_distilbert):
    return get_backend(str(tiny_distilbert), backend=request.param)


def make_panel(qtbot, backend, **kw):
    state = AppState()
    p = F.FillMaskPanel(state, auto_predict=False, **kw)
    qtbot.addWidget(p)
    p.resize(1000, 700)
    p.show()
    state.backend = backend
    state.backend_changed.emit(backend)
    return p


@pytest.fixture
def panel(qtbot, backend):
    p = make_panel(qtbot, backend)
    yield p
    p.state.shutdown(5000)


def predict(qtbot, panel, text=None):
    if text is not None:
        panel.text_edit.setText(text)
    with qtbot.waitSignal(panel.predicted, timeout=15000):
        panel.predict()
    qtbot.waitUntil(lambda: not panel.state.jobs.is_running(F.JOB_KEY), timeout=15000)
    return panel.result


def test_top_k_table_matches_core(qtbot, panel, backend):
    panel.topk_spin.setValue(7)
    predict(qtbot, panel, TEXT)
    core = backend.fill_mask(TEXT, top_k=7, per_layer=True).to_dict()
    assert len(panel.mask_tables) == 1
    table = panel.mask_tables[0]
    assert table.tokens() == [p["token"] for p in core["masks"][0]["predictions"]]
    assert table.scores() == pytest.approx([p["score"] for p in core["masks"][0]["predictions"]], rel=1e-5)
    # per-layer view: embeddings + each layer, top-k columns
    assert panel.layer_table.rowCount() == backend.n_layers + 1
    assert panel.layer_table.columnCount() == 7
    first = core["per_layer"][0]["layers"][-1][0]["token"]
    assert panel.layer_table.item(backend.n_layers, 0).text().startswith(first)


def test_several_masks_and_joint(qtbot, panel, backend):
    text = "the [MASK] sat on the [MASK] ."
    predict(qtbot, panel, text)
    core = backend.fill_mask(text, top_k=10).to_dict()
    assert len(panel.mask_tables) == 2
    for table, m in zip(panel.mask_tables, core["masks"]):
        assert table.tokens() == [p["token"] for p in m["predictions"]]
    assert not panel.joint_box.isHidden()
    assert f"{core['joint']['score']:.3g}" in panel.joint_label.text()
    panel.use_joint()
    assert "[MASK]" not in panel.text_edit.text()


def test_clicking_a_prediction_fills_it_in(qtbot, panel):
    predict(qtbot, panel, "the [MASK] sat on the [MASK] .")
    table = panel.mask_tables[1]
    token = table.tokens()[2]
    rect = table.visualItemRect(table.item(2, 1))
    with qtbot.waitSignal(panel.predicted, timeout=15000):     # one mask left: predicts again
        qtbot.mouseClick(table.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    assert panel.text_edit.text() == fill_mask_at("the [MASK] sat on the [MASK] .", 1, token)
    assert len(panel.mask_tables) == 1
    # filling the last one leaves a full sentence and a hint
    last = panel.mask_tables[0]
    rect = last.visualItemRect(last.item(0, 1))
    qtbot.mouseClick(last.viewport(), QtCore.Qt.MouseButton.LeftButton, pos=rect.center())
    assert "[MASK]" not in panel.text_edit.text()
    assert "Click a word" in panel.status_label.text()
    panel.text_edit.undo()                                   # the fill can be undone
    assert panel.text_edit.text().count("[MASK]") == 1


def test_click_a_word_or_button_to_mask(qtbot, panel):
    panel.text_edit.setText("the cat sat on the mat")
    assert "href='w:1'" in panel.words_label.text()
    panel.words_label.linkActivated.emit("w:1")
    assert panel.text_edit.text() == "the [MASK] sat on the mat"
    panel.text_edit.setCursorPosition(len(panel.text_edit.text()))
    qtbot.mouseClick(panel.mask_button, QtCore.Qt.MouseButton.LeftButton)
    assert panel.text_edit.text() == "the [MASK] sat on the mat[MASK]"
    panel.text_edit.setSelection(0, 3)
    qtbot.keyClick(panel.text_edit, QtCore.Qt.Key.Key_M, QtCore.Qt.KeyboardModifier.ControlModifier)
    assert panel.text_edit.text().startswith("[MASK] [MASK] sat")
    assert panel.mask_count() == 3


def test_targets(qtbot, panel, backend):
    panel.targets_edit.setText("cat, dog, bird")
    predict(qtbot, panel, TEXT)
    core = backend.fill_mask(TEXT, top_k=10, targets=["cat", "dog", "bird"]).to_dict()
    assert panel.mask_tables[0].tokens() == [p["token"] for p in core["masks"][0]["predictions"]]
    assert sorted(panel.mask_tables[0].tokens()) == ["bird", "cat", "dog"]


def test_input_errors_are_shown(qtbot, panel):
    panel.text_edit.setText("no mask here")
    panel.predict()
    assert "[MASK]" in panel.status_label.text()
    panel.targets_edit.setText("42")
    panel.text_edit.setText(TEXT)
    with qtbot.waitSignal(panel.failed, timeout=15000):
        panel.predict()
    assert "vocabulary" in panel.status_label.text()


def test_model_without_mlm_head_explains(qtbot, minilm):
    listing = [{"name": "minilm", "mlm_head": False, "available": True},
               {"name": "distilbert-base-uncased", "mlm_head": True, "available": False,
                "note": "not in the Hugging Face cache"},
               {"name": "/models/mine", "mlm_head": True, "available": True, "source": "trained"}]
    p = make_panel(qtbot, minilm, list_models_fn=lambda: listing)
    assert p.has_explanation
    text = p.no_mlm_label.text()
    assert "masked-language-model head" in text and "minilm" in text
    assert "distilbert-base-uncased" in text and "/models/mine" in text
    assert "href='minilm'" not in text
    p.state.shutdown(5000)


def test_real_listing_names_distilbert(qtbot):
    names = [m["name"] for m in mlm_models()]
    assert "distilbert-base-uncased" in names and "minilm" not in names


def test_example_is_predicted_when_an_mlm_model_loads(qtbot, backend):
    state = AppState()
    p = F.FillMaskPanel(state)
    qtbot.addWidget(p)
    with qtbot.waitSignal(p.predicted, timeout=15000):
        state.backend = backend
        state.backend_changed.emit(backend)
    assert len(p.mask_tables) == F.EXAMPLE.count("[MASK]")
    state.shutdown(5000)


def test_prediction_from_an_edited_sentence_is_not_filled_in(qtbot, panel):
    predict(qtbot, panel, "the [MASK] sat on the [MASK] .")
    token = panel.mask_tables[1].tokens()[0]
    # the user adds a mask in front: old "mask 2" would now be the sentence's mask 2 of 3 - wrong
    panel.text_edit.setText("[MASK] the [MASK] sat on the [MASK] .")
    panel.mask_tables[1].picked.emit(1, token)
    assert panel.text_edit.text() == "[MASK] the [MASK] sat on the [MASK] ."
    assert "changed" in panel.status_label.text()
    panel.use_joint()
    assert panel.text_edit.text().count("[MASK]") == 3


def test_per_layer_table_shows_every_layer(qtbot, panel):
    """12 layers (BERT-base): the final layer's row, the model's answer, must be in view."""
    from types import SimpleNamespace
    panel.resize(1280, 800)
    preds = [{"token": f"w{i}", "score": 0.1 / (i + 1)} for i in range(10)]
    result = {"masks": [{"predictions": preds}], "joint": None,
              "per_layer": [{"layers": [preds] * 13}]}
    panel.set_result(result, panel.text_edit.text(), SimpleNamespace(n_layers=12, model_name="bert-like"))
    t = panel.layer_table
    qtbot.waitUntil(lambda: t.isVisible())
    assert t.rowCount() == 13
    rect = t.visualRect(t.model().index(12, 0))
    assert t.viewport().rect().contains(rect), "the final layer's row is scrolled out of view"


def test_three_quick_requests_run_the_first_and_the_newest(qtbot, panel):
    """While one prediction runs only the newest request waits; the first's result is not shown."""
    started, shown = [], []
    panel.state.job_started.connect(lambda job: started.append(job.args[1]) if job.key == F.JOB_KEY else None)
    panel.predicted.connect(shown.append)
    texts = ("the [MASK] sat on the mat.", "a [MASK] ran away.", "the dog [MASK] loudly.")
    for text in texts:
        panel.text_edit.setText(text)
        panel.predict()
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=15000)
    assert started == [texts[0], texts[2]]
    assert len(shown) == 1 and shown[0]["text"] == panel.result_text == texts[2]


def test_no_tables_of_an_earlier_sentence_stay_after_no_mask_or_too_many(qtbot, panel):
    predict(qtbot, panel, TEXT)
    assert panel.mask_tables and panel.result is not None
    panel.text_edit.setText("no mask here")
    panel.predict()
    assert not panel.mask_tables and panel.result is None and panel.layer_box.isHidden()
    predict(qtbot, panel, TEXT)
    panel.text_edit.setText(" ".join(["[MASK]"] * 30))
    with qtbot.waitSignal(panel.failed, timeout=15000):
        panel.predict()
    assert "too many" in panel.status_label.text()
    assert not panel.mask_tables and panel.result is None and panel.joint_box.isHidden()
