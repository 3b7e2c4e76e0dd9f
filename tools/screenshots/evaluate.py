"""Screenshot of the Evaluate page (docs/screenshots/evaluate.png, for docs/evaluation.md and
the lab's docs): minilm on the shipped evaluation set, plain and whitened side by side.

    QT_QPA_PLATFORM=xcb xvfb-run -a .venv/bin/python -m tools.screenshots.evaluate docs/screenshots
"""
from __future__ import annotations

import sys

from tools.screenshots.common import grab, panel_shots_setup, spin


def main(argv=None) -> int:
    app, args, size, _minilm, state = panel_shots_setup(__doc__, argv)
    from app.gui.panels.train.evaluate_view import EvaluateView
    view = EvaluateView(state)
    view.resize(*size)
    view.whiten.setChecked(True)
    view.show()
    view.start()
    spin(app, until=lambda: view.report is not None and view.job is None, timeout=600)
    spin(app, 0.3)
    grab(view, args.out / "evaluate.png")
    state.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
