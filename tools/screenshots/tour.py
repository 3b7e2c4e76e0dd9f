"""Screenshots of Help → Start here (for docs/app.md): the tour's first stop on Search, its Step
by step stop, its Why stop with the Why window beside the panel (a screen grab: two windows) and
its fill-mask stop offline (minilm: no masked-LM head, the lab and a folder offered).

    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots.tour
"""
from __future__ import annotations

import sys

from tools.screenshots.common import OUT, save, shoot_sample_window, spin, type_text

QUERY = "a cat sleeping in the sun"


def shoot_tour(app, w):
    """The tour on Search (a query typed) and on Step by step (the walkthrough computed)."""
    tour = w.show_tour()
    type_text(app, w.search_panel.query, QUERY)
    spin(app, until=lambda: w.search_panel.last_result is not None and not w.state.jobs.busy, timeout=60)
    spin(app, 0.5)
    save(w, "tour-start")
    tour.go(2)
    panel = w.optional_panels["Step by step"]
    spin(app, until=lambda: panel.walkthrough is not None and not w.state.jobs.busy, timeout=120)
    spin(app, 0.8)
    save(w, "tour-step-by-step")
    tour.go(3)
    w.search_panel.table.selectRow(0)
    w.search_panel.why_button.click()
    dialog = w.search_panel.why_dialog
    spin(app, until=lambda: dialog.isVisible() and dialog.why is not None and not w.state.jobs.busy, timeout=120)
    spin(app, 0.8)
    frame = w.frameGeometry()
    shot = app.primaryScreen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
    OUT.mkdir(parents=True, exist_ok=True)
    shot.save(str(OUT / "tour-why.png"))
    print(f"saved docs/screenshots/tour-why.png ({frame.width()}x{frame.height()}, screen grab)")
    dialog.close()
    tour.go(4)
    spin(app, until=lambda: w.state.inspect_backend is not None and not w.state.jobs.busy, timeout=120)
    spin(app, 0.8)
    return save(w, "tour-fill-mask")


def main() -> int:
    return shoot_sample_window(shoot_tour)


if __name__ == "__main__":
    sys.exit(main())
