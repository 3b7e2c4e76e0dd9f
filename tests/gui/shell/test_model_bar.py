"""The model bars show the model that runs: typed text not confirmed with Enter goes back when the
focus leaves, and the transformers backend is not named after one model (app/gui/shell/model_bar.py)."""
from __future__ import annotations

from PySide6.QtCore import Qt


def test_unconfirmed_weights_go_back_and_the_backend_is_named_for_what_it_is(qtbot, make_window,
                                                                              tiny_store_template):
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    bar, inspect = w.model_bar, w.inspect_bar
    for combo, shown in ((bar.weights, w.state.choice.model), (inspect.weights, inspect.weights.itemText(0))):
        assert combo.currentText() == shown
        combo.setFocus()
        qtbot.waitUntil(combo.hasFocus)
        combo.lineEdit().selectAll()
        qtbot.keyClicks(combo.lineEdit(), "some/half-typed-model")
        assert combo.currentText() == "some/half-typed-model"
        w.tabs.setFocus()                                   # the focus leaves, no Enter
        qtbot.waitUntil(lambda c=combo: not c.hasFocus())
        assert combo.currentText() == shown
    assert not w.state.jobs.busy and w.state.choice.model == "minilm" and w.state.inspect_choice is None
    labels = [bar.encoder.itemText(i) for i in range(bar.encoder.count())]
    assert "Hugging Face transformers" in labels and not any("DistilBERT" in t for t in labels)
    # Enter still confirms
    bar.weights.setFocus()
    bar.weights.lineEdit().selectAll()
    qtbot.keyClicks(bar.weights.lineEdit(), "minilm")
    qtbot.keyClick(bar.weights.lineEdit(), Qt.Key.Key_Return)
    assert bar.weights.currentText() == "minilm"
