"""Screenshots of the "Step by step" tab (for docs/walkthrough.md, the README, `make screenshots`).

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tools.screenshots.walkthrough docs/screenshots

Calls the core directly (a screenshot script may block) and hands the results to the panel
exactly as its workers would.
"""
from __future__ import annotations

import sys

from tools.screenshots.common import finish_panel_shots, grab, panel_shots_setup, qt_app
from tools.screenshots.inspector import SENTENCE

SECOND = "The dog stayed on the pavement since it was exhausted."


def populate_steps(panel, backend, text: str = SENTENCE, layer: int = 3, head: int = 2) -> None:
    """Explain ``text`` at (layer, head), 0-based, as the worker would."""
    from core.walkthrough import steps as W
    panel.state.jobs.wait(30000)
    qt_app().processEvents()
    panel.text_edit.setText(text)
    panel.other_edit.setText(SECOND)
    panel._last_request = (text, SECOND, False, layer, head, panel.pooling_combo.currentText())
    panel.set_result(W.explain(backend, text, layer=layer, head=head, pooling=panel.pooling_combo.currentText()),
                     backend)
    qt_app().processEvents()


def show_step(panel, name: str) -> None:
    panel.set_view(0)
    panel.show_step(name)
    if name == "weights":
        tokens = panel.walkthrough.tokens
        it = tokens.index("it") if "it" in tokens else 1
        panel.step_view._cell_clicked(it, int(panel.walkthrough.step("weights").values[it].argmax()))
        qt_app().processEvents()
        panel.page.ensureWidgetVisible(panel.step_view.build_up, 0, 0)    # the whole sum, its rows readable
    if name == "pooled":
        panel.state.jobs.wait(60000)         # the comparison job
    for _ in range(5):
        qt_app().processEvents()


def pin_score(panel, query: str = "it", key: str = "animal") -> None:
    """The scores step with one cell pinned in the value panel: its q·k terms."""
    panel.set_view(0)
    panel.show_step("scores")
    tokens = panel.walkthrough.tokens
    i = tokens.index(query) if query in tokens else 1
    j = tokens.index(key) if key in tokens else 2
    panel.step_view._cell_clicked(i, j)
    for _ in range(5):
        qt_app().processEvents()


def show_positions(panel) -> None:
    panel.set_view(1)
    panel.state.jobs.wait(120000)
    for _ in range(5):
        qt_app().processEvents()


def main(argv=None) -> int:
    app, args, (w, h), minilm, state = panel_shots_setup(__doc__, argv)
    from app.gui.panels.walkthrough.panel import WalkthroughPanel

    panel = WalkthroughPanel(state, auto_explain=False)
    panel.resize(w, h)
    panel.show()
    populate_steps(panel, minilm)
    for name in ("embeddings_layernorm", "weights", "ffn_activation", "pooled"):
        show_step(panel, name)
        grab(panel, args.out / f"walkthrough_{name}.png")
    show_step(panel, "q")                        # the map beside input → W_Q, b_Q → Q
    grab(panel, args.out / "walkthrough_map.png")
    pin_score(panel)
    grab(panel, args.out / "walkthrough_value_panel.png")
    show_positions(panel)
    grab(panel, args.out / "walkthrough_positions.png")
    return finish_panel_shots(state)


if __name__ == "__main__":
    sys.exit(main())
