"""The Intervene tab in the main window, on minilm and the open store: the ranking view shows
index.corpus.intervene_ranking's moves for the same query and intervention."""
from __future__ import annotations

from core.intervene.spec import Intervention
from tests.support.app_fixtures import wait_idle

QUERY = "a pet sleeping in the sun"


def test_the_ranking_view_shows_the_stores_moves(qtbot, make_window, tiny_store_template):
    from index.corpus.intervene_ranking import ranking_changes
    w = make_window(tiny_store_template)
    w.show_panel("Intervene")
    panel = w.optional_panels["Intervene"]
    spec = Intervention(attention_off={0, 1}, positions="off")
    panel.editor.set_value(spec)
    with qtbot.waitSignal(panel.effects_shown, timeout=120_000):
        panel.apply()
    panel.metrics_view.query_edit.setText(QUERY)
    with qtbot.waitSignal(panel.ranking_shown, timeout=120_000) as sig:
        panel.metrics_view.rank_button.click()
    wait_idle(qtbot, w)
    expected = ranking_changes(w.state.store, w.state.backend, QUERY, spec, k=10)
    shown = sig.args[0]
    assert [(h.id, h.rank_before, h.rank_after) for h in shown.hits] == \
        [(h.id, h.rank_before, h.rank_after) for h in expected.hits]
    rows = panel.metrics_view.ranking_rows()
    assert [r[3] for r in rows[:len(expected.hits)]] == [h.text for h in expected.hits]
    assert any(h.moved for h in expected.hits), "the intervention should move some hit"
    scores = panel.metrics_view.ranking_scores()                 # the score column: each hit's cosine after
    assert scores[:len(expected.hits)] == [f"{h.score_after:.4f}" for h in expected.hits]
    first_moved = next(i for i, h in enumerate(expected.hits) if h.moved and h.rank_before <= 10)
    h = expected.hits[first_moved]
    assert rows[first_moved][:3] == (str(h.rank_before), str(h.rank_after),
                                     f"{'↑' if h.moved > 0 else '↓'}{abs(h.moved)}")
