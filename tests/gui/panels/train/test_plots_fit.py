"""The plots fit the default window (1200×780): no legend is drawn over a curve (every legend of
the lab's plots - Run page, its watch views, the Runs overlay - and of the Map lies where no
plotted point is), and no title is cut (each lies whole inside its view, no wider than its plot).
Fed from a real (tiny) run's events and the packaged minilm."""
from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QPointF

from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def run_events(tmp_path_factory):
    """A finished 2-layer, dim-32 MLM run of 30 steps: (folder, its events)."""
    from core.train.trainer import Trainer
    root = tmp_path_factory.mktemp("legends")
    corpus = write_corpus(root / "gen.txt", n=500)
    events = []
    Trainer(tiny_config(corpus, root / "run", layers=2, dim=32, heads=2, ffn=64, steps=30, batch_size=16,
                        log_every=2, eval_every=10, eval_sentences=60, probe_every=10)).run(progress=events.append)
    return root / "run", events


def legend_overlaps(plot: pg.PlotWidget) -> list[str]:
    """What the plot's legend covers: each plotted point (and each curve's path) under it."""
    item = plot.getPlotItem()
    legend = item.legend
    if legend is None or not legend.items or not legend.isVisible():
        return []
    rect = legend.sceneBoundingRect()
    assert rect.height() > 0 and item.sceneBoundingRect().contains(rect), "the legend lies inside its plot"
    found = []
    for data in item.listDataItems():
        if not data.isVisible():
            continue
        x, y = data.getData()                 # what is drawn (log10 on a log axis)
        if x is None or len(x) == 0:
            continue
        for xi, yi in zip(np.asarray(x, float), np.asarray(y, float), strict=True):
            if np.isfinite(xi) and np.isfinite(yi) and rect.contains(item.vb.mapViewToScene(QPointF(xi, yi))):
                found.append(f"{data.name()} point ({xi:g}, {yi:g})")
        path = data.curve.mapRectToScene(data.curve.boundingRect()) if data.curve.isVisible() else None
        if path is not None and path.intersects(rect):
            found.append(f"{data.name()} curve")
    return found


def cut_titles(root) -> list[str]:
    """Titles of the visible plots under ``root`` that do not lie whole in their view."""
    bad = []
    for view in root.findChildren(pg.GraphicsView):
        if not view.isVisible() or view.width() < 50:
            continue
        shown = view.mapToScene(view.viewport().rect()).boundingRect().adjusted(-1, -1, 1, 1)
        for item in view.scene().items():
            if not isinstance(item, pg.PlotItem) or not item.isVisible():
                continue
            label = item.titleLabel
            if not label.isVisible() or not str(label.text).strip():
                continue
            text = label.item.sceneBoundingRect()
            if not shown.contains(text) or text.width() > item.sceneBoundingRect().width() + 1:
                bad.append(f"{label.text!r}: {text} in view {shown}, plot {item.sceneBoundingRect()}, "
                           f"label {label.sceneBoundingRect()}")
    return bad


def visible_plots(widget) -> list[pg.PlotWidget]:
    return [p for p in widget.findChildren(pg.PlotWidget) if p.isVisible()]


def test_no_legend_of_the_lab_covers_a_curve_at_1200x780(qtbot, make_window, tiny_store_template, run_events):
    folder, events = run_events
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Train")
    lab = w.optional_panels["Train"]
    run = lab.run_panel
    run.show_run(folder, events)
    checked = 0
    views = run.views
    for i in range(views.count()):                  # the loss page and every watch view
        views.setCurrentIndex(i)
        qtbot.wait(250)                              # the views redraw on a timer
        for plot in visible_plots(views.currentWidget()):
            assert not legend_overlaps(plot), (views.tabText(i), legend_overlaps(plot))
            checked += bool(plot.getPlotItem().legend and plot.getPlotItem().legend.items)

    lab.show_page("Runs")
    labels = ["run-a (2 layers)", "run-b (2 layers)", "run-c (2 layers)"]
    shifted = [[dict(e, loss=e["loss"] + k * 0.3) if e["kind"] == "step" else e for e in events] for k in range(3)]
    lab.runs_view.curves.set_runs(dict(zip(labels, shifted, strict=True)))
    qtbot.wait(100)
    for plot in visible_plots(lab.runs_view):
        assert not legend_overlaps(plot), (plot.getPlotItem().titleLabel.text, legend_overlaps(plot))
    key = lab.runs_view.curves.key                  # the runs' colours, named once above the four plots
    assert key.isVisible() and all(label in key.text() for label in labels)
    assert checked >= 4          # the loss plot and the watch views' curves


def test_the_map_legend_covers_no_point(qtbot, make_window, sample_store_template):
    w = make_window(sample_store_template)
    w.resize(1200, 780)
    w.show_panel("Map")
    panel = w.map_panel
    qtbot.waitUntil(lambda: panel.map is not None, timeout=120_000)
    qtbot.wait(100)
    plot = panel.plot
    assert len(plot.getPlotItem().legend.items) == 8
    rect = plot.getPlotItem().legend.sceneBoundingRect()
    inside = [tuple(p) for p in plot.xy if rect.contains(plot.vb.mapViewToScene(QPointF(*map(float, p))))]
    assert not inside, f"{len(inside)} sentences' points under the legend"


def test_no_plot_title_is_cut_at_1200x780(qtbot, make_window, tiny_store_template, run_events):
    folder, events = run_events
    w = make_window(tiny_store_template)
    w.resize(1200, 780)
    w.show_panel("Train")
    lab = w.optional_panels["Train"]
    lab.run_panel.show_run(folder, events)
    views = lab.run_panel.views
    for i in range(views.count()):
        views.setCurrentIndex(i)
        qtbot.wait(250)
        assert not cut_titles(views.currentWidget()), (views.tabText(i), cut_titles(views.currentWidget()))
    lab.show_page("Runs")
    lab.runs_view.curves.set_runs({"run-a (2 layers, 30 steps)": events, "run-b (2 layers, 30 steps)": events})
    for plot in lab.runs_view.curves.plots:                 # every series a plot offers
        for k in range(plot.picker.count()):
            plot.picker.setCurrentIndex(k)
            qtbot.wait(30)
            assert not cut_titles(lab.runs_view), cut_titles(lab.runs_view)

    w.show_panel("Step by step")
    walk = w.optional_panels["Step by step"]
    with qtbot.waitSignal(walk.explained, timeout=60_000) as sig:
        walk.explain_text("The animal didn't cross the street because it was too tired to walk.")
    for step in sig.args[0].steps:
        walk.show_step(step.name)
        qtbot.wait(30)
        assert not cut_titles(walk), (step.name, cut_titles(walk))
