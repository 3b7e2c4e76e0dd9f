"""Screenshot of the Step by step tab's "Batch of two" view: the padding mask at work
(docs/screenshots/walkthrough_batch_mask.png, for docs/walkthrough.md and `make screenshots`).

    QT_QPA_PLATFORM=xcb xvfb-run -a .venv/bin/python -m tools.screenshots.batch_mask docs/screenshots
"""
from __future__ import annotations

import sys

from tools.screenshots.common import finish_panel_shots, grab, panel_shots_setup, qt_app

FIRST = "The dog slept."
SECOND = "The animal didn't cross the street because it was too tired."


def main(argv=None) -> int:
    app, args, (w, h), minilm, state = panel_shots_setup(__doc__, argv)
    from app.gui.panels.walkthrough.panel import WalkthroughPanel

    panel = WalkthroughPanel(state, auto_explain=False)
    panel.resize(w, h)
    panel.show()
    panel.text_edit.setText(FIRST)
    panel.other_edit.setText(SECOND)
    panel.set_view(2)
    state.jobs.wait(120000)
    for _ in range(5):
        qt_app().processEvents()
    grab(panel, args.out / "walkthrough_batch_mask.png")
    return finish_panel_shots(state)


if __name__ == "__main__":
    sys.exit(main())
