"""The Why dialog on a bf16 corpus: the header's sum equals the score the search showed, and it
names both precisions (the numbers themselves: tests/core/evaluate/test_why_precision.py)."""
from __future__ import annotations

import pytest

from core.evaluate import why as W
from tests.core.evaluate.test_why_precision import (  # noqa: F401 - the fixtures
    QUERY,
    build_store,
    corpus,
    emulated_bf16,
    fresh_backend,
    small_model,
)


def test_the_why_dialog_at_bf16_says_equal_and_names_the_precision(qtbot, small_model, tmp_path, emulated_bf16):  # noqa: F811
    """The app's Why dialog on a bf16 corpus: the header's Σ equals the score the search showed."""
    from app.gui.panels.why.view import WhyDialog
    from app.gui.state import AppState
    from index.corpus.door import search
    backend = fresh_backend("scratch", small_model, "bf16")
    store = build_store(tmp_path / "store", backend, corpus(12))
    try:
        hits, _ = search(store, QUERY, 3, backend)
    finally:
        store.close()
    state = AppState()
    state.backend = backend
    dialog = WhyDialog(state)
    qtbot.addWidget(dialog)
    try:
        for hit in hits:
            with qtbot.waitSignal(dialog.shown, timeout=60_000) as sig:
                dialog.request(QUERY, hit.text, float(hit.score))
            why = sig.args[0]
            assert why.total == pytest.approx(hit.score, abs=W.SAME_SCORE)
            header = dialog.header.text()
            assert "= the search score" in header and "≠" not in header
            assert "query bf16, hit bf16" in header
    finally:
        state.shutdown(10_000)
