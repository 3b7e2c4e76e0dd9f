"""Screenshots of Help → Start here (for docs/app.md): the tour's first stop on Search and its
Step by step stop, the ringed widget and the floating panel.

    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots.tour
"""
from __future__ import annotations

import sys

from tools.screenshots.common import sample_window, save, spin, type_text

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
    return save(w, "tour-step-by-step")


def main() -> int:
    app, w = sample_window("encoderscope-shots-")
    shoot_tour(app, w)
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
