"""The inspected model apart from the corpus model (issue 17 item 1): Attention and Fill-mask run
another model than search, switching it never touches the store, both choices are remembered."""
from __future__ import annotations

from PySide6.QtCore import Qt


def _fingerprint(store):
    return dict(store.fingerprint_dict)


def _choose_inspected(qtbot, w, name, encoder="scratch"):
    bar = w.inspect_bar
    bar.encoder.setCurrentIndex(bar.encoder.findData(encoder))
    bar.weights.setCurrentText(name)
    bar.weights.lineEdit().setFocus()
    qtbot.keyClick(bar.weights.lineEdit(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None and not w.state.jobs.busy, timeout=60_000)


def test_inspecting_another_model_leaves_corpus_and_search_alone(qtbot, make_window, tiny_store_template,
                                                                  tiny_distilbert):
    w = make_window(tiny_store_template)
    state = w.state
    corpus_choice, corpus_backend, before = state.choice, state.backend, _fingerprint(state.store)
    rows = state.corpus.count()
    _choose_inspected(qtbot, w, str(tiny_distilbert), encoder="hf")

    # the inspector family runs the tiny DistilBERT under transformers ...
    ins = state.inspect_backend
    assert ins is not corpus_backend and ins.backend == "hf" and ins.n_layers == 2 and ins.has_mlm
    assert state.inspect_choice.model == str(tiny_distilbert)
    # ... while the corpus model, its Backend and the store are what they were: no re-embed offer
    assert state.choice == corpus_choice and state.backend is corpus_backend
    assert _fingerprint(state.store) == before and state.corpus.count() == rows
    assert getattr(w.corpus_panel, "_reembed_box", None) is None
    assert w.service.compatible() is True
    with qtbot.waitSignal(w.search_panel.results_shown, timeout=20_000):
        w.search_panel.query.setText("weather")
    assert w.search_panel.results.hits and "minilm" in w.search_panel.info.text()

    # Attention shows the inspected model's heads; Fill-mask predicts with it
    attention, fillmask = w.optional_panels["Attention"], w.optional_panels["Fill-mask"]
    with qtbot.waitSignal(attention.inspected, timeout=30_000):
        attention.inspect_text("the cat sat on the mat")
    assert attention.inspection.attentions.shape[:2] == (2, ins.n_heads)
    with qtbot.waitSignal(fillmask.predicted, timeout=30_000):
        fillmask.text_edit.setText("the [MASK] sat on the mat .")
        fillmask.predict()
    assert not fillmask.has_explanation and fillmask.mask_tables
    assert "Inspecting: " in w.model_label.text() and "Corpus: minilm" in w.model_label.text()

    # back to "the corpus model": the inspector follows the corpus Backend again
    bar = w.inspect_bar
    bar.weights.setCurrentIndex(0)
    bar.encoder.setCurrentIndex(bar.encoder.findData(corpus_choice.backend))
    bar.weights.activated.emit(0)
    assert state.inspect_choice is None and state.inspect_backend is corpus_backend
    assert fillmask.has_explanation                           # minilm has no masked-LM head


def test_fill_mask_link_switches_only_the_inspected_model(qtbot, make_window, tiny_store_template,
                                                          tiny_distilbert):
    """The "models with a masked-LM head" links of the explanation page used to switch the
    corpus model (and offer to re-embed the corpus with it)."""
    w = make_window(tiny_store_template)
    fillmask, corpus_choice = w.optional_panels["Fill-mask"], w.state.choice
    assert fillmask.has_explanation
    fillmask.no_mlm_label.linkActivated.emit(str(tiny_distilbert))
    qtbot.waitUntil(lambda: w.state.inspect_backend is not None and not w.state.jobs.busy, timeout=60_000)
    assert w.state.choice == corpus_choice and w.state.inspect_choice.model == str(tiny_distilbert)
    assert not fillmask.has_explanation and getattr(w.corpus_panel, "_reembed_box", None) is None


def test_both_choices_are_remembered(qtbot, make_window, tiny_store_template, tiny_distilbert):
    w = make_window(tiny_store_template)
    _choose_inspected(qtbot, w, str(tiny_distilbert), encoder="hf")
    w.close()
    w2 = make_window(start=False)
    assert w2.state.choice.model == "minilm"
    assert w2.state.inspect_choice is not None
    assert (w2.state.inspect_choice.model, w2.state.inspect_choice.backend) == (str(tiny_distilbert), "hf")
    assert w2.inspect_bar.weights.currentText() == str(tiny_distilbert)
    qtbot.waitUntil(lambda: w2.state.inspect_backend is not None, timeout=60_000)


def test_an_inspected_model_that_fails_to_load_falls_back_to_the_corpus_model(qtbot, minilm, tmp_path):
    from app.gui.state import AppState, ModelChoice

    state = AppState()
    state.backend = minilm
    state.backend_changed.emit(minilm)
    seen = []
    state.inspect_backend_changed.connect(seen.append)
    with qtbot.waitSignal(state.error, timeout=30_000) as error:
        state.set_inspect_choice(ModelChoice(model=str(tmp_path / "no-such-model")))
    assert "does not exist" in error.args[0]
    qtbot.waitUntil(lambda: not state.jobs.busy, timeout=10_000)
    assert state.inspect_choice is None and state.inspect_backend is minilm
    assert seen == [None, minilm]              # loading, then back on the corpus model
    state.shutdown(5000)
