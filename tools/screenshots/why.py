"""The Why view's screenshot (docs/screenshots/why.png), for `make screenshots` and docs/why.md.

    QT_QPA_PLATFORM=xcb xvfb-run -a .venv/bin/python -m tools.screenshots.why    # this shot alone

tools/screenshots/window.py calls ``shoot_why(app, window)`` right after its search shot, on the same
window: the Why view of the Jupiter hit, opened from the results as a user would.
"""
from __future__ import annotations

import sys
from pathlib import Path

from tools.screenshots.common import sample_window, save, spin, type_text

QUERY = "the biggest planet has dozens and dozens of moons"


def shoot_why(app, w, name: str = "why") -> Path | None:
    """Open the Why view on the hit about Jupiter (else the top hit) and save it."""

    hits = w.search_panel.results.hits
    if not hits:
        print("no search results: skipped the Why view shot", file=sys.stderr)
        return None
    row = next((i for i, h in enumerate(hits) if "Jupiter" in h.text), 0)
    w.search_panel.table.selectRow(row)
    dialog = w.search_panel.why_row(row)
    dialog.resize(1180, 800)
    spin(app, until=lambda: dialog.why is not None and not w.state.jobs.is_running("why"), timeout=60)
    i, j = (dialog.view.tokens_a.index("moons"), dialog.view.tokens_b.index("moons")) \
        if "moons" in dialog.view.tokens_a and "moons" in dialog.view.tokens_b else (1, 1)
    dialog.heatmap.hover(i, j)
    spin(app, 0.5)
    path = save(dialog, name)
    dialog.close()
    return path


def main() -> int:

    app, w = sample_window("encoderscope-why-shot-")
    w.show_panel("Search")
    type_text(app, w.search_panel.query, QUERY)
    spin(app, until=lambda: w.search_panel.last_result is not None
          and w.search_panel.last_result.query == QUERY, timeout=60)
    shoot_why(app, w)
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
