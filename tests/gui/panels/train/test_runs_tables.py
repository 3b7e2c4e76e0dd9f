"""The Runs page's final-metrics table shows every run of an experiment side by side in the
window's default size (app/gui/panels/train/runs_view.py)."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("size", [(1200, 780), (1600, 1000)])
def test_the_final_metrics_show_every_run(qtbot, make_window, tiny_store_template, size):
    w = make_window(tiny_store_template)
    w.resize(*size)
    w.tabs.setCurrentIndex(next(i for i in range(w.tabs.count()) if w.tabs.tabText(i) == "Train"))
    lab = w.optional_panels["Train"]
    lab.show_page("Runs")
    view = lab.runs_view
    qtbot.waitExposed(view)
    paths = [f"/runs/experiments/objective-1/{n}" for n in ("masked-LM", "next-token (causal)", "SimCSE")]
    view.labels = {p: p.rsplit("/", 1)[1] for p in paths}
    runs = [{"path": p, "config": {"objective": o}, "final": {"spearman": 0.41 + i / 10, "heldout_loss": 3.2 + i,
                                                               "anisotropy": 0.9}}
            for i, (p, o) in enumerate(zip(paths, ("mlm", "clm", "simcse")))]
    view._fill_tables({"runs": runs, "differs": ["objective"], "ignored": []})
    qtbot.wait(50)
    t = view.final_table
    header = t.horizontalHeader()
    for j in range(3):
        right = header.sectionViewportPosition(j) + header.sectionSize(j)
        assert 0 <= header.sectionViewportPosition(j) and right <= t.viewport().width(), j
        assert t.item(0, j).text()
