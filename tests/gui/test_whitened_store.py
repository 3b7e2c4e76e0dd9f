"""A whitened corpus (index/store/whitening.py) in the desktop app: it opens without an offer to
re-embed (the corpus model is its model), and search shows the hits the store itself gives
for the whitened query, as `encoderscope search` does."""
from __future__ import annotations

from tests.support.app_fixtures import ASSETS, wait_idle


def test_a_whitened_corpus_opens_as_the_corpus_models_and_searches_whitened(qtbot, make_window, tiny_store_template,
                                                                          minilm, tmp_path):
    from index.corpus.door import create_whitened_corpus
    lines = (ASSETS / "sample_corpus.txt").read_text(encoding="utf-8").splitlines()[:60]
    query = "the biggest planet"
    store, _ = create_whitened_corpus(tmp_path / "w", minilm, "mean", lines, dims=16)
    expected = [h.text for h in store.search(minilm.embed([query])[0], k=5,
                                                 fingerprint=minilm.fingerprint("mean"))[0]]
    plain = minilm.embed([query] + lines) @ minilm.embed([query])[0]
    assert expected != [lines[i] for i in (-plain[1:]).argsort()[:5]]     # whitening changed the ranking
    store.close()
    w = make_window(tiny_store_template)
    w.service.open(tmp_path / "w", sample_if_new=False)
    qtbot.waitUntil(lambda: w.state.store is not None and w.state.store.count() == 60, timeout=30_000)
    wait_idle(qtbot, w)
    assert w.service.compatible() and w.state.store.whitening.dims == 16
    box = getattr(w.corpus_panel, "_reembed_box", None)
    assert box is None or not box.isVisible()
    panel = w.search_panel
    panel.k.setValue(5)
    with qtbot.waitSignal(panel.results_shown, timeout=20_000, check_params_cb=lambda r: r.query == query):
        panel.query.setFocus()
        qtbot.keyClicks(panel.query, query)
    assert [h.text for h in panel.results.hits] == expected
    # Why on a hit: the store's score compares whitened vectors; the dialog says so instead of
    # comparing it with the model's cosine it splits
    from core.evaluate.why import WHITENED_NOTE
    dialog_hit = panel.results.hit(0)
    if panel.why_dialog is None:
        from app.gui.panels.why.view import WhyDialog
        panel.why_dialog = WhyDialog(w.state, w)
    with qtbot.waitSignal(panel.why_dialog.shown, timeout=30_000):
        panel.why_row(0)
    header = panel.why_dialog.header.text()
    assert WHITENED_NOTE.format(score=float(dialog_hit.score)).split(":")[0] in header
    assert "the search score" not in header
