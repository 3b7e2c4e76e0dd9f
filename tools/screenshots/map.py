"""Screenshot of the Map tab (for the README and docs/map.md).

    QT_QPA_PLATFORM=xcb xvfb-run -a -s "-screen 0 1600x1000x24" .venv/bin/python -m tools.screenshots.map

Alone it opens the app on a fresh data folder (the sample corpus is indexed first, as on a
first launch); tools/screenshots/window.py calls ``shoot_map(app, window)`` on its own window.
"""
from __future__ import annotations

import sys

import numpy as np

from tools.screenshots.common import save, shoot_sample_window, spin, type_text

QUERY = "the biggest planet has dozens and dozens of moons"


def shoot_map(app, w, query: str = QUERY):
    """The Map tab with the query's star, its hits ringed and the top hit selected."""

    state, panel = w.state, w.map_panel
    w.show_panel("Search")
    if w.search_panel.query.text() != query:
        type_text(app, w.search_panel.query, query)
    spin(app, until=lambda: w.search_panel.last_result is not None
          and w.search_panel.last_result.query == query and not state.jobs.busy, timeout=60)
    w.show_panel("Map")
    spin(app, until=lambda: panel.map is not None and not state.jobs.busy, timeout=300)
    spin(app, until=lambda: len(panel.plot.query.getData()[0]) == 1, timeout=60)
    hits = w.search_panel.last_result.hits
    if hits and hits[0].id in panel.row_of:
        row = panel.row_of[hits[0].id]
        panel.select_row(row)
        # hover another hit: a box on the top hit would hide the query's star next to it
        panel.hover_row(panel.row_of.get(hits[-1].id, row))
        lo, hi = panel.map.xy.min(axis=0), panel.map.xy.max(axis=0)
        x, y = panel.map.xy[row]
        box = [(x - 0.4 * (hi[0] - lo[0]), y - 0.25 * (hi[1] - lo[1])),
               (x + 0.05 * (hi[0] - lo[0]), y - 0.25 * (hi[1] - lo[1])),
               (x + 0.05 * (hi[0] - lo[0]), y + 0.05 * (hi[1] - lo[1])),
               (x - 0.4 * (hi[0] - lo[0]), y + 0.05 * (hi[1] - lo[1]))]
        panel.plot.lasso(np.array(box))
    spin(app, 0.5)
    return save(w, "map")


def main() -> int:
    return shoot_sample_window(shoot_map)


if __name__ == "__main__":
    sys.exit(main())
