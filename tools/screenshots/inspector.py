"""Screenshots of the attention inspector and the fill-mask panel (for the README / `make screenshots`).

    QT_QPA_PLATFORM=offscreen .venv/bin/python -m tools.screenshots.inspector docs/screenshots
        [--mlm-model FOLDER_OR_HUB_ID]

Also usable from tools/screenshots/window.py on the panels of a real main window::

    from tools.screenshots.inspector import populate_attention, populate_fillmask
    populate_attention(window.optional_panels["Attention"], view="head")   # blocks until drawn
    populate_fillmask(window.optional_panels["Fill-mask"], backend=mlm_backend)

The populate functions call the model directly (no worker thread: a screenshot script may
block) and hand the result to the panel exactly as a worker would.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from tools.screenshots.common import grab, panel_shots_setup, qt_app

SENTENCE = "The animal didn't cross the street because it was too tired."
FILL_TEXT = "The [MASK] was delayed because of the heavy [MASK]."


def coreference_head(ins, query="it", key="animal") -> tuple[int, int]:
    """The (layer, head) where ``query`` attends most to ``key``: a head worth showing."""
    toks = list(ins.tokens)
    if query in toks and key in toks:
        qi, ki = toks.index(query), toks.index(key)
        a = np.asarray(ins.attentions)[:, :, qi, ki]
        l, h = np.unravel_index(int(a.argmax()), a.shape)
        return int(l), int(h)
    return 2, 0


def populate_attention(panel, backend=None, text: str = SENTENCE, view: str = "head") -> None:
    """Fill an AttentionPanel with ``text``; view: "head" | "grid" | "rollout"."""
    backend = backend or panel.state.backend
    _settle(panel)
    panel.text_edit.setText(text)
    panel._last_request = (text, "")
    ins = backend.inspect(text)
    panel.set_inspection(ins, backend)
    layer, head = coreference_head(ins)
    if view == "rollout":
        panel.hide_special.setChecked(False)
        panel.set_mode("rollout")
        panel.set_layer_head(ins.attentions.shape[0] - 1)
        panel.set_view(0)
    elif view == "grid":
        panel.hide_special.setChecked(True)
        panel.set_mode("head")
        panel.set_layer_head(layer, head)
        panel.set_view(1)
        panel.grid._hover = (layer, head)
        panel.grid._place(panel.grid.hover_box, layer, head)
        panel._grid_hovered(layer, head)
    else:
        panel.hide_special.setChecked(True)
        panel.show_values.setChecked(True)
        panel.set_mode("head")
        panel.set_layer_head(layer, head)
        panel.set_view(0)
        toks = panel.labels
        if "it" in toks and "animal" in toks:
            i, j = toks.index("it"), toks.index("animal")
            panel.heatmap.hover(i, j)
    qt_app().processEvents()


def populate_fillmask(panel, backend=None, text: str = FILL_TEXT) -> None:
    backend = backend or panel.state.backend
    _settle(panel)
    panel.text_edit.setText(text)
    if not getattr(backend, "has_mlm", False):
        panel.show_no_mlm(backend)
    else:
        panel.pages.setCurrentIndex(0)
        result = backend.fill_mask(text, top_k=panel.topk_spin.value(), per_layer=True).to_dict()
        panel.set_result(result, text, backend)
    qt_app().processEvents()


def _settle(panel) -> None:
    """Let any job the panel started on its own (the example) finish first, so it cannot land
    on top of what the screenshot shows."""
    for _ in range(2):                   # a request that waited for it starts when it ends
        panel.state.jobs.wait(30000)
        qt_app().processEvents()


def mlm_backend(model: str | None):
    """The best masked-LM model here: the one asked for, distilbert-base-uncased if cached."""
    from core.encoder.backends import get_backend
    candidates = [model] if model else []
    candidates += [os.environ.get("ENCODERSCOPE_MLM_MODEL", ""), "distilbert-base-uncased"]
    for name in filter(None, candidates):
        try:
            b = get_backend(name, backend="scratch")
            if b.has_mlm:
                return b
        except Exception as e:  # noqa: BLE001
            print(f"skipping {name}: {e}")
    return None


def main(argv=None) -> int:
    app, args, (w, h), minilm, state = panel_shots_setup(
        __doc__, argv, lambda ap: ap.add_argument(
            "--mlm-model", default=None, help="model for the fill-mask shot (a trained checkpoint folder)"))
    from app.gui.panels.attention.panel import AttentionPanel
    from app.gui.panels.fillmask.panel import FillMaskPanel
    from app.gui.state import AppState
    out = []
    panel = AttentionPanel(state, auto_inspect=False)
    panel.resize(w, h)
    panel.show()
    for view, name in (("head", "inspector_head.png"), ("grid", "inspector_grid.png"),
                       ("rollout", "inspector_rollout.png")):
        populate_attention(panel, minilm, view=view)
        out.append(grab(panel, args.out / name))

    fm = FillMaskPanel(state, auto_predict=False)
    fm.resize(w, h)
    fm.show()
    populate_fillmask(fm, minilm)
    out.append(grab(fm, args.out / "fillmask_no_head.png"))
    mlm = mlm_backend(args.mlm_model)
    if mlm is not None:
        mstate = AppState()
        mstate.backend = mlm
        fm2 = FillMaskPanel(mstate, auto_predict=False)
        fm2.resize(w, h)
        fm2.show()
        populate_fillmask(fm2, mlm)
        out.append(grab(fm2, args.out / "fillmask.png"))
    else:
        print("no masked-LM model here (distilbert-base-uncased not cached; pass --mlm-model a trained "
              "checkpoint): skipped fillmask.png")
    state.shutdown(2000)
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
