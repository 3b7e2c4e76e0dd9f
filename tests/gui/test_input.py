"""The app's side of the input rules (issue 17.4): binary files refused with a message, an import
that is not UTF-8 offers an encoding, and the text boxes never cut pasted text."""
from __future__ import annotations

import shutil

from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QInputDialog, QMessageBox

from tests.support.app_fixtures import wait_idle

LONG = " ".join(f"word{i % 50}" for i in range(6000))       # about 40,000 characters


def _error_text(window):
    boxes = [b for b in window.findChildren(QMessageBox, "error_box") if b.isVisible()]
    return boxes[-1].text() if boxes else None


def test_binary_file_is_refused_with_a_message(qtbot, make_window, tiny_store_template, tmp_path):
    w = make_window(tiny_store_template)
    before = w.state.store.count()
    exe = tmp_path / "x.txt"
    shutil.copy(shutil.which("ls"), exe)
    w.corpus_panel.import_file(exe)
    qtbot.waitUntil(lambda: _error_text(w) is not None, timeout=20_000)
    assert "x.txt" in _error_text(w) and "binary" in _error_text(w)
    wait_idle(qtbot, w)
    assert w.state.store.count() == before == w.corpus_panel.model.total()


def test_import_that_is_not_utf8_offers_an_encoding(qtbot, make_window, tiny_store_template, tmp_path):
    w = make_window(tiny_store_template)
    before = w.state.store.count()
    latin = tmp_path / "latin1.txt"
    latin.write_bytes("Un café au lait sur la terrasse.\nUne idée naïve.\n-- * --\nPlain ASCII line.\n"
                      .encode("latin-1"))
    with qtbot.waitSignal(w.service.encoding_needed, timeout=20_000):
        w.corpus_panel.import_file(latin)
    dialog = w.corpus_panel.findChild(QInputDialog, "encoding_dialog")
    assert dialog is not None and dialog.isVisible() and "line 1" in dialog.labelText()
    assert w.state.store.count() == before                 # nothing half-imported meanwhile
    assert "latin-1" in dialog.comboBoxItems() and "utf-16" in dialog.comboBoxItems()
    dialog.setTextValue("latin-1")
    with qtbot.waitSignal(w.service.ingest_done, timeout=30_000) as blocker:
        dialog.accept()
    assert blocker.args[0].added == 3 and not blocker.args[0].skipped
    assert "skipped 1 line(s) without any letter or digit" in blocker.args[0].summary()
    texts = {rec["text"] for rec in w.state.store.iter()}
    assert "Un café au lait sur la terrasse." in texts and "Une idée naïve." in texts


def test_sentence_box_keeps_a_long_pasted_text_whole(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    panel = w.corpus_panel
    assert len(LONG) > 32_767
    QGuiApplication.clipboard().setText(LONG)
    panel.add_edit.setFocus()
    panel.add_edit.paste()
    assert panel.add_edit.text() == LONG
    with qtbot.waitSignal(w.service.ingest_done, timeout=60_000) as blocker:
        qtbot.keyClick(panel.add_edit, Qt.Key.Key_Return)
    assert blocker.args[0].added == 1 and blocker.args[0].truncated == 1
    assert LONG in {rec["text"] for rec in w.state.store.iter()}
    assert "cut to the model's maximum length" in blocker.args[0].summary()


def test_attention_box_reports_the_real_token_count(qtbot, tiny_distilbert):
    from app.gui.panels.attention.panel import AttentionPanel
    from app.gui.state import AppState
    from core.encoder.backends import get_backend

    backend = get_backend(str(tiny_distilbert))
    state = AppState()
    panel = AttentionPanel(state, auto_inspect=False)
    qtbot.addWidget(panel)
    state.backend = backend
    state.backend_changed.emit(backend)
    QGuiApplication.clipboard().setText(LONG)
    panel.text_edit.clear()
    panel.text_edit.setFocus()
    panel.text_edit.paste()
    assert panel.text_edit.text() == LONG
    with qtbot.waitSignal(panel.inspected, timeout=60_000):
        panel.inspect_current()
    full = len(backend.tokenizer(LONG, verbose=False)["input_ids"])
    info = panel.info_label.text()
    assert f"the text is {full} tokens long" in info and f"{full - backend.max_length} were cut" in info
    state.shutdown(5000)


def test_every_sentence_box_keeps_a_long_paste_whole(qtbot, make_window, tiny_store_template):
    """Search, Step by step (Text and Second) and Fill-mask: no silent cut at 32,767 characters."""
    w = make_window(tiny_store_template)
    walk, fill = w.optional_panels["Step by step"], w.optional_panels["Fill-mask"]
    boxes = {"search": w.search_panel.query, "step text": walk.text_edit, "step second": walk.other_edit,
             "fill-mask": fill.text_edit, "attention pair": w.optional_panels["Attention"].pair_edit}
    QGuiApplication.clipboard().setText(LONG)
    for name, box in boxes.items():
        box.blockSignals(True)                 # the paste alone: no search or inspection runs
        box.clear()
        box.paste()
        box.blockSignals(False)
        assert box.text() == LONG, f"the {name} box cut the paste at {len(box.text())} characters"
