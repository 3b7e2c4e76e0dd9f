"""The Train tab's watch plots at the default window (the views get about 660×600 beside the
settings): each plot says its quantity in a title over it that fits, not in a rotated axis title
crowded between the plot's edge and five-digit ticks ("attention entropy (nats)" beside "2.0792"),
and the Embeddings page's titles are whole."""
from __future__ import annotations

import numpy as np
from PySide6 import QtGui

VIEWS = (650, 600)


def probe(step: int, entropy: float) -> dict:
    return {"kind": "probe", "step": step, "total": 60, "entropy": np.full((2, 4), entropy).tolist(),
            "anisotropy": 0.6 + step / 1000, "tokens": ["[CLS]", "the", "cat", "[SEP]"],
            "probe_texts": [f"The soup number {i} was far too salty to eat." for i in range(8)],
            "probe_cosine": (0.9 + 0.1 * np.eye(8)).tolist()}


def tick_rects(axis):
    image = QtGui.QImage(10, 10, QtGui.QImage.Format.Format_ARGB32)
    painter = QtGui.QPainter(image)
    try:
        return [rect for rect, _flags, _text in axis.generateDrawSpecs(painter)[2]]
    finally:
        painter.end()


def test_each_watch_plot_says_its_quantity_in_a_whole_title_not_a_crowded_axis(qtbot):
    from app.gui.panels.train.watch_views import WatchViews
    v = WatchViews()
    qtbot.addWidget(v)
    v.resize(*VIEWS)
    v.show()
    qtbot.waitExposed(v)
    for step in range(0, 70, 10):                            # entropies that differ in the 4th decimal
        v.add_event(probe(step, 2.0792 - step * 1e-5))
    v.flush()
    for page, plots in ((1, {"attention entropy (nats)": v.entropy_plot}),
                        (2, {"anisotropy (mean cosine)": v.anisotropy_plot,
                             "held-out accuracy · Spearman": v.accuracy_plot})):
        v.setCurrentIndex(page)
        qtbot.wait(50)
        for words, plot in plots.items():
            item = plot.getPlotItem()
            left = item.getAxis("left")
            assert not left.label.isVisible() or not left.labelText, f"{words}: still a rotated axis title"
            assert item.titleLabel.full_text == words and item.titleLabel.text == words, \
                f"{words!r} shown as {item.titleLabel.text!r} (cut or wrapped)"
            scene_right = item.mapRectToScene(item.boundingRect()).right()
            assert scene_right <= plot.viewport().width() + 1, f"{words}: the plot is {scene_right:.0f} px wide " \
                f"in a {plot.viewport().width()} px view (its right side cut)"
            qtbot.waitUntil(lambda axis=left: bool(tick_rects(axis)), timeout=5_000)      # laid out and ticked
            rects = tick_rects(left)
            assert all(r.left() >= 0 for r in rects), f"{words}: a tick number cut at the edge"
    cosine_title = v.cosine.plot.titleLabel
    assert "…" not in cosine_title.text and "<br>" not in cosine_title.text, cosine_title.text
