"""The Causal tab: where in the network the information lives, which tokens drive a score, which
attention edge carries it (core/intervene/patch_sweep.py, attribute.py, trace.py, edges.py).

Five pages share sentence A, sentence B and the word read at a [MASK]: a patching sweep (a cell
click applies that one patch in the Intervene tab and opens it in Step by step, which walks A with
B's numbers at the site, every step checked against the patched model), gradient attributions,
causal tracing, attention-edge cuts (the Attention tab's heatmap adds one per click; "Step by
step" walks the sentence with them, its masked scores showing the -inf), and Michel's gradient
head importance beside the measured drop (the importance map, from the same on-disk cache as the
Intervene tab's). Every number comes from a worker with progress and Cancel on the inspected
model; a model switch cancels the work and clears every page.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.follow_model import FollowModel
from app.gui.panels import model_calls
from app.gui.panels.causal import compute as C
from app.gui.panels.causal.views import AttributionView, CutsView, HeadGradientView, SweepView, TraceView
from app.gui.widgets.line_edit import long_line_edit
from app.gui.wording import model_label

EXAMPLE_A, EXAMPLE_B = "The cat sat on the mat.", "The dog sat on the mat."
PAGES = ("sweep", "attribute", "trace", "cuts", "heads")


class CausalPanel(QtWidgets.QWidget):
    shown = QtCore.Signal(str, object)       # page, its core result (after it is drawn)
    cancelled = QtCore.Signal(str)           # page
    failed = QtCore.Signal(str)
    patch_requested = QtCore.Signal(str, str, str)   # A, B, site: apply this one patch, walk it (Step by step)
    cuts_walk_requested = QtCore.Signal(str, object)  # the sentence, its Cuts: walk it with them (Step by step)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self._build()
        self.follows = {page: FollowModel(state, f"causal.{page}") for page in PAGES}
        self.follows["sweep"].model_changed.connect(self._on_backend)
        self._on_backend(getattr(state, "inspect_backend", None))

    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        form = QtWidgets.QGridLayout()
        self.text_a = long_line_edit(EXAMPLE_A, "Sentence A: the sentence that runs", "causal_a")
        self.text_b = long_line_edit(EXAMPLE_B, "Sentence B: where patched numbers come from; the other "
                                     "sentence of a similarity", "causal_b")
        self.target = long_line_edit("", "word at [MASK]", "causal_target")
        self.target.setMaximumWidth(160)
        self.target.setToolTip("With [MASK] in A: the word whose probability there is read (empty: the "
                               "top guess)")
        form.addWidget(QtWidgets.QLabel("A"), 0, 0)
        form.addWidget(self.text_a, 0, 1)
        form.addWidget(QtWidgets.QLabel("B"), 1, 0)
        form.addWidget(self.text_b, 1, 1)
        form.addWidget(QtWidgets.QLabel("p of"), 0, 2)
        form.addWidget(self.target, 0, 3)
        outer.addLayout(form)
        self.pages = QtWidgets.QTabWidget()
        self.sweep_view, self.attribution_view = SweepView(), AttributionView()
        self.trace_view, self.cuts_view = TraceView(), CutsView()
        self.heads_view = HeadGradientView()
        self.views = {"sweep": self.sweep_view, "attribute": self.attribution_view,
                      "trace": self.trace_view, "cuts": self.cuts_view, "heads": self.heads_view}
        for page, title in (("sweep", "Patching sweep"), ("attribute", "Attributions"),
                            ("trace", "Causal trace"), ("cuts", "Edge cuts"), ("heads", "Head gradients")):
            view = self.views[page]
            self.pages.addTab(view, title)
            view.run_requested.connect(lambda settings, page=page: self.run(page, settings))
            view.cancel_requested.connect(lambda page=page: self.state.jobs.cancel(f"causal.{page}"))
        self.sweep_view.cell_clicked.connect(self._patch_cell)
        self.cuts_view.walk_requested.connect(self._walk_cuts)
        outer.addWidget(self.pages, 1)
        self.shown_args: dict[str, tuple] = {}      # page -> the worker arguments of the picture it shows
        for edit in (self.text_a, self.text_b, self.target):
            edit.textChanged.connect(self._mark_stale)
        for view in self.views.values():           # every setting of every page's form
            for kind, changed in ((QtWidgets.QLineEdit, "textChanged"), (QtWidgets.QComboBox, "currentIndexChanged"),
                                  (QtWidgets.QAbstractSpinBox, "valueChanged"), (QtWidgets.QCheckBox, "toggled")):
                for child in view.findChildren(kind):
                    if hasattr(child, changed):
                        getattr(child, changed).connect(self._mark_stale)

    # ---- running -------------------------------------------------------------------------------
    def request(self, page: str, s: dict) -> tuple:
        """The worker function and its arguments for ``page`` with settings ``s``."""
        a, b, target = self.text_a.text(), self.text_b.text(), self.target.text()
        if page == "sweep":
            return C.sweep_fn, (a, b, s["kind"], target)
        if page == "attribute":
            other, word = (b, None) if s["target"] == "other" else (None, target.strip() or None)
            return C.attribute_fn, (a, s["method"], other, word, s["steps"])
        if page == "trace":
            resample = b if s.get("resample") else None
            return C.trace_fn, (a, s["words"], s["noise"], s["samples"], s["seed"], target, resample)
        if page == "heads":
            return C.head_gradient_fn, (s["metric"], 0, model_calls.importance_cache_dir())
        return C.cuts_fn, (a, s["cuts"], target)

    def run(self, page: str, settings: dict | None = None) -> bool:
        view = self.views[page]
        fn, args = self.request(page, view.settings() if settings is None else settings)
        view.set_running(True)
        view.say("")
        ran = self.follows[page].run(
            fn, *args, label=f"Causal: {page}",
            on_result=lambda result, backend: self._show(page, result, args),
            on_error=lambda message: self._error(page, message),
            on_progress=view.on_progress,
            on_cancelled=lambda: self._cancelled(page),
            on_finished=lambda: view.set_running(self.state.jobs.is_running(f"causal.{page}")))
        if not ran:
            view.set_running(False)
            view.say("Waiting for the model to load …")
        return ran

    def cancel(self, page: str) -> None:
        self.state.jobs.cancel(f"causal.{page}")

    def add_cut(self, text: str, layer: int, head: int | None, query: int, key: int) -> None:
        """An edge of ``text`` from the Attention tab (0-based): added to the cuts (a new sentence
        starts a new list) and run."""
        if text.strip() and text != self.text_a.text():
            self.text_a.setText(text)
            self.cuts_view.cuts.setText("")
        where = f"{layer + 1}" if head is None else f"{layer + 1}.{head + 1}"
        self.cuts_view.add_cut(f"{where}:{query}>{key}")
        self.pages.setCurrentWidget(self.cuts_view)
        self.run("cuts")

    def _walk_cuts(self) -> None:
        r = self.cuts_view.result
        if r is not None:
            self.cuts_walk_requested.emit(r.text, r.spec.cuts)

    def _patch_cell(self, site: str) -> None:
        """A sweep cell: the patch of the sweep shown (its own A and B, whatever is typed now)."""
        a, b = self.shown_args["sweep"][:2]
        self.patch_requested.emit(a, b, site)

    def _show(self, page: str, result, args: tuple) -> None:
        self.shown_args[page] = args
        view = self.views[page]
        view.show_result(result)
        backend = self.follows[page].backend
        at = {"sweep": 3, "trace": 5, "cuts": 2}.get(page)          # the target's place in the page's arguments
        note = C.p_note(backend, args[0], args[at]) if at is not None and backend is not None else ""
        if note:
            view.info.setText(view.info.text() + f"<br><span style='color:#b35900'>{html.escape(note)}</span>")
        self._mark_stale()
        self.shown.emit(page, result)

    def _mark_stale(self, *_) -> None:
        """A page whose picture was computed from other inputs than those typed now says so."""
        for page, view in self.views.items():
            shown = self.shown_args.get(page) if view.result is not None else None
            if shown is None or self.request(page, view.settings())[1] == shown:
                view.set_stale("")
                continue
            a, b = shown[0], shown[1] if page == "sweep" else None
            which = f"A “{html.escape(a)}”" + (f" and B “{html.escape(b)}”" if b is not None else "")
            view.set_stale(f"This picture is of {which} with the settings it ran with: the inputs have changed "
                           f"since. Press <b>{view.run_label}</b> to compute it for the new ones"
                           + (" (a cell click still applies the patch shown)." if page == "sweep" else "."))

    def _error(self, page: str, message: str) -> None:
        self.views[page].say(message, error=True)      # the last good picture stays
        self.failed.emit(message)

    def _cancelled(self, page: str) -> None:
        self.views[page].say("<i>Cancelled: the last picture (if any) is kept.</i>")
        self.cancelled.emit(page)

    # ---- following the inspected model ----------------------------------------------------------
    def _on_backend(self, backend) -> None:
        """A new model: its predecessor's work is cancelled and nothing of it stays on screen."""
        for page in PAGES:
            self.state.jobs.cancel(f"causal.{page}")
            self.follows[page].drop()
        note = "Loading the model …" if backend is None else model_label(backend.model_name)
        self.shown_args.clear()
        for view in self.views.values():
            view.clear(note)
            view.set_stale("")
            view.run_button.setEnabled(backend is not None)
