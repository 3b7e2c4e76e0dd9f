"""The Runs page's overlay plots (app/gui/panels/train/run_curves.py): an experiment's comparison
opens on the metric its note says to compare, and axes write a cosine as a cosine."""
from __future__ import annotations

import pytest

from core.train.experiments import EXPERIMENTS


def events(loss, rho, cosine):
    return [{"kind": "eval", "step": s, "heldout_loss": loss + s, "spearman": rho + s / 100} for s in (0, 10)] + \
           [{"kind": "probe", "step": s, "anisotropy": cosine} for s in (0, 10)]


@pytest.fixture
def curves(qtbot):
    from app.gui.panels.train.run_curves import RunCurves
    w = RunCurves()
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    return w


@pytest.mark.parametrize("name", ["objective", "pooling"])
def test_an_experiment_that_says_losses_do_not_compare_opens_on_its_metric(curves, name):
    exp = EXPERIMENTS[name]
    assert exp.compare == "eval.spearman" and "Spearman" in exp.look_at
    curves.set_runs({"a": events(2.0, 0.1, 0.91), "b": events(5.0, 0.3, 0.93)}, evaluation=exp.compare)
    assert curves.eval_plot.picker.currentText() == "eval.spearman"
    assert curves.eval_plot.drawn["b"] == [(0, 0.3), (10, 0.4)]
    curves.set_runs({"a": events(2.0, 0.1, 0.91), "b": events(5.0, 0.3, 0.93)})      # two plain runs
    assert curves.eval_plot.picker.currentText() == "eval.heldout_loss"


def test_a_cosine_axis_has_no_si_prefix(curves, qtbot):
    curves.set_runs({"a": events(2.0, 0.1, 0.9001), "b": events(5.0, 0.3, 0.9004)})
    qtbot.wait(50)
    for plot in curves.plots:
        axis = plot.plot.getAxis("left")
        assert "x0.001" not in axis.labelString() and "(x" not in axis.labelString()
