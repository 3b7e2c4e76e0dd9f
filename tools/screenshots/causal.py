"""The Causal tab's screenshots (docs/causal.md): an empty page (its question and the button it
names), the heads sweep, one of its cells walked in Step by step, the attributions with their
values, the causal trace, and an edge cut; at 1200×780 (the window's default) and, with
``--large``, at 1600×1000 (names ending _1600x1000).

    xvfb-run -a .venv/bin/python -m tools.screenshots.causal [--large]
"""
from __future__ import annotations

import sys

from tools.screenshots.common import sample_window, save, spin

A, B = "the cat sat on the mat", "the dog sat on the mat"


def run_page(app, w, panel, page: str) -> bool:
    """Run ``page`` as its button does, with what its widgets show."""
    got = []
    panel.shown.connect(lambda p, r: got.append(p))
    panel.pages.setCurrentWidget(panel.views[page])
    panel.views[page].run_button.click()
    return spin(app, until=lambda: page in got and not w.state.jobs.busy, timeout=600)


def main(argv=None) -> int:
    large = "--large" in (sys.argv[1:] if argv is None else argv)
    size, suffix = ((1600, 1000), "_1600x1000") if large else ((1200, 780), "")
    app, w = sample_window("encoderscope-causal-shots-")
    w.resize(*size)
    w.show_panel("Causal")
    panel = w.optional_panels["Causal"]
    spin(app, until=lambda: panel.sweep_view.run_button.isEnabled(), timeout=300)
    spin(app, 0.5)
    save(w, "causal_empty" + suffix)
    panel.text_a.setText(A)
    panel.text_b.setText(B)
    sweep = panel.sweep_view
    sweep.kind.setCurrentIndex(sweep.kind.findData("heads"))
    if run_page(app, w, panel, "sweep"):
        spin(app, 0.5)
        save(w, "causal_sweep" + suffix)
        walk = w.optional_panels["Step by step"]
        sweep.heatmap.cell_clicked.emit(5, 11)          # head 6.12, as a click on its cell does
        if spin(app, until=lambda: walk.walkthrough is not None and walk.walkthrough.patched_from == B
                and walk.current_step_name() == "patched_head" and not w.state.jobs.busy, timeout=600):
            spin(app, 0.5)
            save(w, "causal_step_patched" + suffix)
        w.show_panel("Causal")
    panel.text_b.setText("a kitten rested on a rug")
    if run_page(app, w, panel, "attribute"):
        spin(app, 0.5)
        save(w, "causal_attribution" + suffix)
    panel.trace_view.words.setText("cat")
    if run_page(app, w, panel, "trace"):
        spin(app, 0.5)
        save(w, "causal_trace" + suffix)
    panel.cuts_view.cuts.setText("6.12:cat>cat")
    if run_page(app, w, panel, "cuts"):
        spin(app, 0.3)
        save(w, "causal_cuts" + suffix)
    w.close()
    w.state.jobs.shutdown(20_000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
