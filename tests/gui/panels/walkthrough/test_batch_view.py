"""The "Batch of two" view of the Step by step tab (app/gui/panels/walkthrough/batch_view.py):
what it draws is the core's batch (−∞, zero weights, the proofs), it follows Text, Second, layer,
head and the model, and a failed check shows red."""
from __future__ import annotations

import numpy as np
import pytest

from core.walkthrough.batch import explain_batch

SHORT, LONG = "a red bird", "the quick brown fox jumps over the lazy dog"


@pytest.fixture
def tiny(tiny_distilbert):
    from core.encoder.backends import get_backend
    return get_backend(str(tiny_distilbert), "scratch", device="cpu")


@pytest.fixture
def panel(make_walkthrough_panel, tiny):
    return make_walkthrough_panel(tiny, 1200, 800)


def show_batch(qtbot, panel, first=SHORT, second=LONG):
    panel.text_edit.setText(first)
    panel.other_edit.setText(second)
    with qtbot.waitSignal(panel.batch_view.shown, timeout=60_000) as sig:
        panel.set_view(2)
    return sig.args[0]


def test_draws_the_padded_sentences_masked_scores_and_zero_weights(qtbot, panel, tiny):
    panel.layer_spin.setValue(2)
    panel.head_spin.setValue(3)
    panel._debounce.stop()
    r = show_batch(qtbot, panel)
    view = panel.batch_view
    fresh = explain_batch(tiny, SHORT, LONG, layer=1, head=2)
    assert (r.layer, r.head) == (1, 2) and r.padded == 0
    np.testing.assert_array_equal(view.scores.raw, fresh.masked_scores[0])
    np.testing.assert_array_equal(view.weights.raw, fresh.weights[0])
    n = fresh.lengths[0]
    assert np.all(np.isneginf(view.scores.raw[:, n:])) and np.all(view.weights.raw[:, n:] == 0)
    assert view.scores.col_labels[n:] == ["[PAD]"] * fresh.n_padding
    assert "−∞" in view.scores.plot.titleLabel.text
    proofs = view.proofs.text()
    assert "✔ real tokens = each sentence run alone" in proofs and "✘" not in proofs
    assert "largest weight on a padded key: <b>0</b>" in proofs


def test_a_failed_check_shows_red(qtbot, panel, monkeypatch):
    monkeypatch.setattr("core.walkthrough.numpy_ref.mask_scores", lambda scores, keep, *_: scores)   # no mask
    show_batch(qtbot, panel)
    assert "✘ real tokens" in panel.batch_view.proofs.text()


def test_follows_text_head_and_needs_a_second_sentence(qtbot, panel, tiny):
    show_batch(qtbot, panel)
    with qtbot.waitSignal(panel.batch_view.shown, timeout=60_000) as sig:
        panel.head_spin.setValue(2)
    assert sig.args[0].head == 1
    panel.text_edit.setText("the dog sat")
    with qtbot.waitSignal(panel.batch_view.shown, timeout=60_000) as sig:
        panel.explain_current()
    fresh = explain_batch(tiny, "the dog sat", LONG, layer=0, head=1)
    np.testing.assert_array_equal(panel.batch_view.weights.raw, fresh.weights[0])
    panel.other_edit.setText("")
    panel.set_view(2)
    assert panel.batch_view.result is None and "Second" in panel.batch_view.info.text()
    assert panel.batch_view.scores.isHidden() and not panel.batch_view.proofs.text()


def test_a_model_changed_while_hidden_is_recomputed_when_shown(qtbot, panel, tmp_path):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    show_batch(qtbot, panel)
    panel.hide()
    other = get_backend(str(make_tiny_distilbert(tmp_path / "m", n_layers=3, n_heads=2, seed=3)), "scratch")
    panel.state.backend = other
    panel.state.backend_changed.emit(other)
    with qtbot.waitSignal(panel.batch_view.shown, timeout=60_000) as sig:
        panel.show()
    r = sig.args[0]
    fresh = explain_batch(other, SHORT, LONG, layer=r.layer, head=r.head)
    np.testing.assert_array_equal(panel.batch_view.weights.raw, fresh.weights[0])


def test_sentences_of_one_length_say_nothing_is_padded(qtbot, panel):
    r = show_batch(qtbot, panel, "a red bird", "a big dog")
    assert r.n_padding == 0 and np.isfinite(panel.batch_view.scores.raw).all()
    assert "nothing is padded" in panel.batch_view.info.text()


def test_hovering_a_cell_reads_its_score_and_weight(qtbot, panel, tiny):
    r = show_batch(qtbot, panel)
    view = panel.batch_view
    n = r.lengths[r.padded]
    tokens = r.tokens[r.padded]
    view.weights.hover(1, 2)                       # a real key
    text = view.readout.text()
    assert f"<b>{tokens[1]}</b> (token 1)" in text and f"<b>{tokens[2]}</b> (token 2)" in text
    assert f"masked score <b>{r.masked_scores[r.padded][1, 2]:.4f}</b>" in text
    assert f"weight <b>{r.weights[r.padded][1, 2]:.4f}</b>" in text
    view.scores.hover(0, n)                        # a padded key
    assert "−∞ (a padded key)" in view.readout.text() and "weight <b>0.0000</b>" in view.readout.text()
    view.scores.hover(-1, -1)
    assert "Hover a cell" in view.readout.text()


def test_a_note_said_above_is_not_said_again_whatever_its_quotes(qtbot, panel, tiny):
    """Under the transformers encoder the note ("… Encoderscope's own encoder …") was printed twice:
    the line above escapes no quote, the batch looked for &#x27;."""
    from dataclasses import replace
    r = replace(explain_batch(tiny, SHORT, LONG, layer=0, head=0), note="the steps are Encoderscope's own encoder")
    panel.batch_view.said_above = lambda: "model · <span>the steps are Encoderscope's own encoder</span>"
    panel.batch_view.set_result(r)
    assert "own encoder" not in panel.batch_view.info.text()
    panel.batch_view.said_above = lambda: ""
    panel.batch_view.set_result(r)
    assert "own encoder" in panel.batch_view.info.text()


def test_the_line_above_the_batch_never_counts_another_sentences_tokens(qtbot, panel, tiny):
    with qtbot.waitSignal(panel.explained, timeout=60_000):
        panel.explain_text(SHORT)
    panel.text_edit.setText(LONG)                                    # typed, Enter not pressed
    panel.other_edit.setText(SHORT)
    with qtbot.waitSignal(panel.explained, timeout=60_000) as sig:
        panel.set_view(2)
    assert sig.args[0].text == LONG
    assert f"{len(sig.args[0].tokens)} tokens" in panel.info_label.text()
    qtbot.waitUntil(lambda: panel.batch_view.result is not None, timeout=60_000)
    assert max(panel.batch_view.result.lengths) == len(sig.args[0].tokens)
