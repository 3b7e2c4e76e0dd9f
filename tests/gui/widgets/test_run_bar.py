"""The one Run / progress / Cancel bar: Cancel never moves when a run starts, the bar says the time
left from the pace so far, and every long job's panel uses it (no second copy in app/gui)."""
from __future__ import annotations

import re
from pathlib import Path

from app.gui.widgets import run_bar as R

APP_GUI = Path(__file__).resolve().parents[3] / "app" / "gui"
# progress bars that are not a job's Run / progress / Cancel: the status bar's and a training run's steps
NOT_A_RUN_BAR = {"widgets/run_bar.py", "widgets/job_progress.py", "panels/train/loss_page.py"}


def test_cancel_stays_put_and_the_time_left_is_said(qtbot, monkeypatch):
    bar = R.RunBar("Run sweep", "sweep")
    qtbot.addWidget(bar)
    bar.add_field(R.QtWidgets.QComboBox())
    bar.resize(900, 40)
    bar.show()
    qtbot.waitExposed(bar)
    cancel_at = bar.cancel_button.geometry()
    now = [100.0]
    monkeypatch.setattr(R.time, "monotonic", lambda: now[0])
    bar.set_running(True, "Sweep (heads)")
    assert bar.cancel_button.geometry() == cancel_at and bar.cancel_button.isEnabled()
    assert not bar.run_button.isEnabled() and bar.progress.isVisible()
    now[0] += 10.0
    bar.on_progress(5, 20, "Sweep (heads)")
    assert bar.progress.format() == "Sweep (heads): %v of %m · about 30 s left"
    bar.set_running(False)
    assert bar.cancel_button.geometry() == cancel_at and not bar.cancel_button.isEnabled()


def test_every_long_jobs_panel_uses_the_one_bar_and_causal_no_intervene_internals():
    copies = [str(p.relative_to(APP_GUI)) for p in APP_GUI.rglob("*.py")
              if re.search(r"QProgressBar\(\)", p.read_text(encoding="utf-8"))]
    assert sorted(set(copies) - NOT_A_RUN_BAR) == []
    for p in (APP_GUI / "panels" / "causal").glob("*.py"):
        assert "panels.intervene" not in p.read_text(encoding="utf-8"), p.name
    for p in APP_GUI.rglob("*.py"):          # no module reaches into another's private helpers
        assert not re.search(r"from app\.gui\.\S+ import .*\b_[a-z]", p.read_text(encoding="utf-8")), p


def test_a_heatmap_cells_tooltip_stays_while_the_mouse_rests(qtbot):
    import numpy as np
    from PySide6 import QtCore, QtGui, QtWidgets

    from app.gui.widgets.heatmap import HeatmapWidget
    w = HeatmapWidget()
    qtbot.addWidget(w)
    w.resize(400, 300)
    w.set_matrix(np.eye(3), ["a", "b", "c"])
    w.show()
    qtbot.waitExposed(w)
    centre = w.mapFromScene(w.plot.vb.mapViewToScene(QtCore.QPointF(1, 1)))
    QtWidgets.QToolTip.showText(w.mapToGlobal(centre), w.tooltip_text(1, 1), w)   # as a mouse move does
    assert QtWidgets.QToolTip.isVisible()
    asked = []

    class SceneHelp(QtCore.QObject):        # the scene's help event is what hid it (its items have no tooltip)
        def eventFilter(self, obj, ev):
            if ev.type() == QtCore.QEvent.Type.GraphicsSceneHelp:
                asked.append(ev)
            return False

    spy = SceneHelp()
    w.scene().installEventFilter(spy)
    rest = QtGui.QHelpEvent(QtCore.QEvent.Type.ToolTip, centre, w.mapToGlobal(centre))   # the mouse rests
    QtWidgets.QApplication.sendEvent(w.viewport(), rest)
    assert asked == [] and QtWidgets.QToolTip.isVisible() and "weight" in QtWidgets.QToolTip.text()
    QtWidgets.QToolTip.hideText()
