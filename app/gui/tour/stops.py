"""The stops of Help → Start here: for each, its tab, its words, the widget it rings, the widgets
its words name (the panel never covers them) and the buttons it offers.

The fill-mask stop depends on the inspected model: the packaged minilm has no masked-LM head, and
offline nothing can be downloaded, so on a first launch the stop says what does work and offers
it (a model with a head already on this machine, training one in the lab, or a model folder).
"""
from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtWidgets import QWidget

from app.gui.wording import model_label

LAB_STEPS = 300                   # minilm + a fresh MLM head: guesses words after ~4 min on 2 CPU cores


@dataclass(frozen=True)
class TourStop:
    tab: str                                          # the tab this stop shows
    title: str                                        # the stop's heading
    text: str | Callable[[QWidget], str]              # what to look at and do (rich text)
    target: Callable[[QWidget], QWidget | None]       # main window -> the widget to ring
    named: Callable[[QWidget], list] = field(default=lambda w: [])     # widgets the text names
    actions: Callable[[QWidget], list] = field(default=lambda w: [])   # [(label, callable(tour))]
    on_leave: Callable[[QWidget], None] = field(default=lambda w: None)  # undo what the stop opened


def _panel(window, title):
    return window.optional_panels[title] if title in window.optional_panels else None


def _attr(getter, name):
    def find(window):
        owner = getter(window)
        return getattr(owner, name, None) if owner is not None else None
    return find


def _attrs(getter, *names):
    def find(window):
        owner = getter(window)
        return [getattr(owner, n) for n in names if owner is not None and getattr(owner, n, None) is not None]
    return find


# ---- the fill-mask stop ------------------------------------------------------------------------
def _inspected_has_mlm(window) -> bool:
    return bool(getattr(window.state.inspect_backend, "has_mlm", False))


def _fillmask_target(window):
    """The sentence box; when the model has no masked-language head, the page that says so."""
    panel = _panel(window, "Fill-mask")
    if panel is None:
        return None
    return panel.text_edit if panel.pages.currentIndex() == 0 else panel.pages.currentWidget()


def _fillmask_named(window):
    panel = _panel(window, "Fill-mask")
    if panel is None or panel.pages.currentIndex() != 0:
        return []
    return [panel.text_edit, panel.predict_button]


def _ready_mlm_models() -> list[str]:
    """Models with a masked-LM head that load on this machine now (no download)."""
    from app.gui.panels.fillmask.no_mlm import mlm_models
    return [m["name"] for m in mlm_models() if m.get("available")]


def _fillmask_text(window) -> str:
    if _inspected_has_mlm(window):
        return ("Write a sentence with <b>[MASK]</b> where a word is missing, e.g. <i>The cat sat on the "
                "[MASK].</i>, and press Enter: the model's top guesses and their probabilities.")
    name = model_label(getattr(window.state.inspect_backend, "model_name", "") or "this model")
    ready = _ready_mlm_models()
    found = (f" On this machine: <b>{html.escape(model_label(ready[0]))}</b> has one." if ready else "")
    return (f"Fill-mask shows the model's guesses for a <b>[MASK]</b>ed word. It needs a masked-language "
            f"head, and <b>{html.escape(name)}</b> was published without one.{found} What works offline: "
            f"<b>train one in the lab</b> (minilm + a new head, {LAB_STEPS} steps on the sample corpus, a "
            f"few minutes on a CPU), or <b>open a model folder</b> that has one (a BERT/DistilBERT "
            f"“ForMaskedLM” folder or a checkpoint you trained). Or go on with Next and come back later.")


def _fillmask_actions(window):
    if _inspected_has_mlm(window):
        return []
    ready = _ready_mlm_models()[:1]
    offers = [(f"Inspect with {model_label(name)}", lambda tour, n=name: inspect_with(tour.window_, n))
              for name in ready]
    return offers + [("Train one in the lab", lambda tour: tour.detour(lab_detour(tour.window_))),
                     ("Open a model folder…", lambda tour: tour.window_.inspect_bar.browse.click())]


def inspect_with(window, name: str) -> None:
    window.inspect_bar.set_weights(name)
    window.state.set_inspect_choice(window.state.choice.with_(model=name))


def lab_detour(window) -> TourStop:
    """Set the lab up to train a masked-LM (minilm + a fresh head) and the stop that says what next."""
    from core.encoder.sources import DEFAULT_MODEL
    window.show_panel("Train")
    _panel(window, "Train").show_page("Run")
    train = _run_panel(window)
    if not train.running:
        # findData cannot match a tuple: compare the items' data
        starts = [train.start_from.itemData(i) for i in range(train.start_from.count())]
        if (DEFAULT_MODEL, "wordpiece") in starts:
            train.start_from.setCurrentIndex(starts.index((DEFAULT_MODEL, "wordpiece")))
        train.objective.setCurrentIndex(max(train.objective.findData("mlm"), 0))
        train.steps.setValue(LAB_STEPS)
    return TourStop(
        "Train", "Fill-mask: train a masked-LM",
        f"The lab is set: start from <b>{DEFAULT_MODEL} (+ a fresh MLM head)</b>, objective "
        f"<b>Masked-LM</b>, {LAB_STEPS} steps. Press the ringed <b>Start</b> and watch the loss fall. "
        f"When it has finished, press <b>Use this model</b>: Fill-mask then runs it. "
        f"<b>Back</b> returns to Fill-mask; <b>Next</b> goes on while it trains.",
        lambda w: _run_panel(w).start_button,
        _attrs(_run_panel, "start_button", "use_button", "cancel_button"))


def _close_why(window) -> None:
    """Leaving the Why stop: its window would cover the next stops."""
    dialog = getattr(window.search_panel, "why_dialog", None)
    if dialog is not None and dialog.isVisible():
        dialog.close()


def _intervene_editor(window):
    panel = _panel(window, "Intervene")
    return panel.editor.heads if panel is not None else None


def _walk_map(window):
    """Step by step's architecture map, its Steps view shown (not Positions or Batch of two)."""
    panel = _panel(window, "Step by step")
    if panel is None:
        return None
    if panel.stack.currentIndex() != 0:
        panel.set_view(0)
    return panel.left_tabs


def _causal_sweep(window):
    panel = _panel(window, "Causal")
    if panel is None:
        return None
    panel.pages.setCurrentWidget(panel.sweep_view)
    return panel.sweep_view.picture


def _features_bar(window):
    """The Features tab's top bar (what an SAE trains on, its folder, Train), the Feature page shown."""
    panel = _panel(window, "Features")
    if panel is None:
        return None
    panel.pages.setCurrentIndex(0)
    return panel.bar


def _run_panel(window):
    """The lab's Run page (app/gui/panels/train/panel.py)."""
    return _panel(window, "Train").run_panel


STOPS = (
    TourStop("Search", "Start here: Search",
             "Encoderscope turns sentences into vectors and finds the nearest ones. Start with "
             "<b>Search</b>: the sample corpus is open (576 sentences). Type a query in the ringed "
             "box, for example <i>a cat sleeping in the sun</i>: the hits and their cosine scores "
             "appear as you type.",
             _attr(lambda w: w.search_panel, "query"),
             _attrs(lambda w: w.search_panel, "query")),
    TourStop("Attention", "Attention: who looks at whom",
             "Each head of each layer decides how much every token reads from every other token. "
             "Type a sentence in the <b>Text</b> box and press Enter, then hover a cell of the "
             "ringed map: row = the token reading, column = the token read. Try the "
             "<b>All heads</b> view and the Up/Down, Left/Right keys.",
             _attr(lambda w: _panel(w, "Attention"), "heatmap"),
             _attrs(lambda w: _panel(w, "Attention"), "text_edit", "grid_button")),
    TourStop("Step by step", "Step by step: inside the encoder",
             "The same sentence, one operation at a time: embeddings, Q, K, V, scores, softmax, "
             "the feed-forward network, pooling. Each step shows its formula, its real numbers and "
             "a badge proving they are the model's. Click a block of the ringed architecture map "
             "(or a step in its <b>List</b> tab), or use <b>Next ▶</b> (Alt+Right).",
             _walk_map,
             _attrs(lambda w: _panel(w, "Step by step"), "next_button")),
    TourStop("Search", "Why: a hit explained",
             "Back in Search: select a hit and press the ringed <b>Why?</b> button. The score is "
             "split exactly over pairs of query and hit tokens: which words made it a match. The Why "
             "window opens beside this panel.",
             _attr(lambda w: w.search_panel, "why_button"),
             _attrs(lambda w: w.search_panel, "why_button", "query"), on_leave=_close_why),
    TourStop("Fill-mask", "Fill-mask: what the model expects", _fillmask_text, _fillmask_target,
             _fillmask_named, _fillmask_actions),
    TourStop("Intervene", "Intervene: switch a part off",
             "What does one part of the model do? Switch it off and look. Click a head in the ringed "
             "grid (it turns red), then press <b>Apply</b>: its attention <i>before</i> and <i>after</i>, "
             "the difference, and how far the sentence's vector moved. <b>Importance map</b> switches "
             "every part off in turn and measures what each one is worth.",
             _intervene_editor, _attrs(lambda w: _panel(w, "Intervene"), "apply_button")),
    TourStop("Features", "Features: what a hidden state is made of",
             "A hidden state is 384 numbers; a <b>sparse autoencoder</b> rewrites each token's as a few of "
             "thousands of learned directions, <i>features</i>, most of which read as one thing (“fires on "
             "city names”). Type a <b>Folder</b> for it and press the ringed <b>Train</b>: on the sample "
             "corpus, at the 200,000 tokens set, a few minutes on a CPU (Cancel keeps a checkpoint, Train "
             "resumes it). Then pick a feature in the list to see the tokens it fires on, switch it off in a "
             "search, read its <b>Quality</b> against its floors, or ask on <b>Sweep</b> which of sentence "
             "A's features carry it toward B.",
             _attr(_features_bar, "train_button"), _attrs(_features_bar, "folder", "train_button")),
    TourStop("Causal", "Causal: where does the information live?",
             "Sentences <b>A</b> and <b>B</b> differ in one word. Press <b>Run sweep</b>: each cell of the "
             "ringed map patches one site of A (a layer at one token) with B's numbers and says how far "
             "A's vector moved toward B's (0 → 1). Click a cell to walk that patch in Step by step. The "
             "other pages trace, attribute and cut attention edges; each says its question, and "
             "<i>what is this?</i> opens its explanation.",
             _causal_sweep, _attrs(lambda w: getattr(_panel(w, "Causal"), "sweep_view", None), "run_button", "about")),
    TourStop("Map", "And then",
             "The ringed <b>Map</b> draws the whole corpus in 2-D, clustered: hover a point to read "
             "its sentence. <b>Train</b> trains the from-scratch encoder; <b>Step by step → Export "
             "notebook…</b> writes all of it as a NumPy notebook to hand out. This tour stays in "
             "<b>Help → Start here</b>.",
             lambda w: w.map_panel.plot),
)
