"""The Intervene tab: switch parts of the inspected model off (or patch them from sentence B) and
see what changes, side by side, on the real model; and what every part is worth (the map).

Every number is computed in a worker (compute.py; the hooks of core.intervene act only on the
thread that applies them) with progress and Cancel; what is drawn is always the followed model's
(FollowModel). The intervention applied is one value (current_intervention), which Step by step
follows too. Switching the inspected model re-checks it: a part the new model lacks clears it.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.current_intervention import current_intervention
from app.gui.follow_model import FollowModel
from app.gui.panels import model_calls
from app.gui.panels.intervene import compute as C
from app.gui.panels.intervene.editor import InterventionEditor
from app.gui.panels.intervene.effects_view import EffectsView
from app.gui.panels.intervene.fill_view import FillMaskEffectsView
from app.gui.panels.intervene.importance_view import ImportanceView
from app.gui.panels.intervene.metrics_view import MetricsView
from app.gui.widgets.labels import rich_label
from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.run_bar import RunBar
from app.gui.wording import model_label, model_tooltip

EXAMPLE = "The cat sat on the mat because it was tired."
MASKED_EXAMPLE = "The cat sat on the [MASK]."
JOB_EFFECTS, JOB_METRICS = "intervene.effects", "intervene.metrics"
JOB_RANKING, JOB_MAP = "intervene.ranking", "intervene.importance"


class FittingScroll(QtWidgets.QScrollArea):
    """A vertical scroll area never narrower than what it holds: no horizontal scrollbar."""

    def minimumSizeHint(self) -> QtCore.QSize:
        hint = super().minimumSizeHint()
        if self.widget() is None:
            return hint
        extra = self.verticalScrollBar().sizeHint().width() + 2 * self.frameWidth() + 2
        return QtCore.QSize(self.widget().minimumSizeHint().width() + extra, hint.height())


class InterventionPanel(QtWidgets.QWidget):
    effects_shown = QtCore.Signal(object)     # compute.Effects, after the views are drawn
    metrics_shown = QtCore.Signal(object)     # [MetricEffect]
    ranking_shown = QtCore.Signal(object)     # index.corpus.intervene_ranking.RankingChanges
    map_shown = QtCore.Signal(object)         # ImportanceMap
    map_cancelled = QtCore.Signal()
    failed = QtCore.Signal(str)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.current = current_intervention(state)
        self.shown_backend = None             # the model whose numbers are drawn
        self._last_request: C.EffectsRequest | None = None
        self._dropped = ""                    # why a model switch dropped some parts (said after the re-run)
        self._refused: tuple = ()             # the patch sites of the last refused request (not "patched")
        self._build()
        self.follow = FollowModel(state, JOB_EFFECTS)
        self.metrics_follow = FollowModel(state, JOB_METRICS)
        self.map_follow = FollowModel(state, JOB_MAP)
        self.ranking_follow = FollowModel(state, JOB_RANKING, corpus=True)   # the store's own model
        self.follow.model_changed.connect(self._on_backend)
        self.ranking_follow.model_changed.connect(lambda _b: self.metrics_view.clear_ranking())
        self.current.changed.connect(self._current_changed)
        self.current.dropped.connect(self._on_dropped)
        self._on_backend(getattr(state, "inspect_backend", None))

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        form = QtWidgets.QHBoxLayout()             # one row: the plots get the height
        self.text_edit = long_line_edit(EXAMPLE, "Sentence A: the sentence whose attention and vector are shown",
                                        "intervene_text", on_enter=self.apply)
        self.masked_edit = long_line_edit(MASKED_EXAMPLE, "A sentence with [MASK] for fill-mask", "intervene_masked",
                                          on_enter=self.apply)
        self.target_edit = long_line_edit("mat", "token to follow", "intervene_target", on_enter=self.apply)
        self.target_edit.setMaximumWidth(110)
        self.target_edit.setToolTip("Its probability at the first [MASK], before and after")
        form.addWidget(QtWidgets.QLabel("Sentence"))
        form.addWidget(self.text_edit, 3)
        form.addWidget(QtWidgets.QLabel("Fill-mask"))
        form.addWidget(self.masked_edit, 2)
        form.addWidget(QtWidgets.QLabel("p of"))
        form.addWidget(self.target_edit, 1)
        outer.addLayout(form)

        self.description = rich_label("intervention_description")
        self.run_bar = RunBar("Apply", "effects")
        self.apply_button, self.progress, self.cancel_button = (self.run_bar.run_button, self.run_bar.progress,
                                                                self.run_bar.cancel_button)
        self.apply_button.setDefault(True)
        self.apply_button.setToolTip("Run the sentence with these parts switched off (Step by step follows too)")
        self.apply_button.clicked.connect(self.apply)
        self.cancel_button.clicked.connect(lambda: self.state.jobs.cancel(JOB_EFFECTS))
        # wide enough for its longest message ("Mean head outputs: 540 of 576"), whatever the description
        self.progress.setFixedWidth(self.progress.fontMetrics().horizontalAdvance(
            "Mean head outputs: 000 of 000 · about 00 s left") + 30)
        self.run_bar.add_field(self.description, 1)
        self.clear_button = QtWidgets.QPushButton("Clear")
        self.clear_button.setToolTip("Switch everything back on")
        self.clear_button.clicked.connect(self.clear)
        self.run_bar.row.addWidget(self.clear_button)
        outer.addWidget(self.run_bar)
        self.message = rich_label("intervene_message")
        outer.addWidget(self.message)

        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Horizontal)
        self.editor = InterventionEditor()
        self.editor_scroll = scroll = FittingScroll()
        scroll.setObjectName("intervene_editor_scroll")
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)   # it fits: see _fit
        scroll.setWidget(self.editor)
        split.addWidget(scroll)
        self.views = QtWidgets.QTabWidget()
        self.effects_view = EffectsView()
        self.fill_view = FillMaskEffectsView()
        self.metrics_view = MetricsView()
        self.importance_view = ImportanceView()
        self.views.addTab(self.effects_view, "Before | after | difference")
        self.views.addTab(self.fill_view, "Fill-mask")
        self.views.addTab(self.metrics_view, "Metrics and ranking")
        self.views.addTab(self.importance_view, "Importance map")
        split.addWidget(self.views)
        split.setStretchFactor(1, 3)
        split.setChildrenCollapsible(False)
        self.split = split
        outer.addWidget(split, 1)
        self._fit_editor()

        self.editor.changed.connect(self._describe)
        self.metrics_view.measure_requested.connect(self.measure)
        self.metrics_view.cancel_requested.connect(lambda: [self._cancel(k) for k in (JOB_METRICS, JOB_RANKING)])
        self.metrics_view.ranking_requested.connect(self.rank)
        self.importance_view.compute_requested.connect(self.compute_map)
        self.importance_view.cancel_requested.connect(lambda: self._cancel(JOB_MAP))
        self.importance_view.part_clicked.connect(self.apply_part)
        self._set_running(False)
        self._describe()

    def _fit_editor(self) -> None:
        """The editor's column as wide as its widest row (the 12-head grid, the positions row):
        every switch reachable without a horizontal scrollbar (FittingScroll asks the editor)."""
        for w in (self.editor.heads, self.editor.layers, self.editor):
            w.layout().invalidate()                 # the grids were rebuilt: their hints are stale
        self.editor_scroll.updateGeometry()

    # ---- the intervention ----------------------------------------------------------------------
    def _describe(self) -> None:
        spec = self.editor.value()
        b, sites = self.editor.patch_request()
        text = spec.describe() if not spec.is_empty or not sites else ""
        refused = bool(sites) and tuple(sites) == self._refused
        if sites and not refused:
            text = "; ".join(filter(None, [text, f"patched {', '.join(sites)} from B"]))
        applied = "" if self.editor.value() == self.current.spec.without_patch() else " <i>(not applied yet)</i>"
        note = (f" · <span style='color:#c0392b'>the patch of {html.escape(', '.join(sites))} from B was refused "
                "(why: under B)</span>" if refused else "")
        self.description.setText(f"<b>Switched off:</b> {html.escape(text or 'nothing')}{applied}{note}")

    def _current_changed(self, spec) -> None:
        if spec.without_patch() != self.editor.value():
            self.editor.set_value(spec)
        self._describe()

    def apply(self) -> None:
        """Apply what the editor names and compute its effects on the sentence."""
        backend = self.follow.backend
        spec = self.editor.value()
        b, sites = self.editor.patch_request()
        self.current.set(spec)
        request = C.EffectsRequest(self.text_edit.text(), spec, self.masked_edit.text(), self.target_edit.text(),
                                   b, sites)
        self._last_request = request
        self._refused = ()
        self._describe()
        if backend is None:
            self._say("Waiting for the model to load …")
            return
        self._say("")
        self._set_running(True)
        self.follow.run(C.effects_fn, request, label="Intervention effects", on_result=self._on_effects,
                        on_error=self._on_effects_error, on_progress=self._on_progress,
                        on_finished=lambda: self._set_running(self._busy(JOB_EFFECTS)))

    def apply_part(self, spec) -> None:
        """A map cell's ablation: shown in the editor and applied to the views."""
        self.editor.set_value(spec)
        self.views.setCurrentWidget(self.effects_view)
        self.apply()

    def clear(self) -> None:
        self.editor.clear()
        self.current.clear()
        self._last_request = None
        self.follow.drop()
        words = "Everything is switched on: choose parts to switch off and press Apply"
        self.effects_view.clear(words)
        self.fill_view.clear(words)
        self.metrics_view.clear()
        self._say("")

    # ---- results ---------------------------------------------------------------------------------
    def _on_effects(self, effects, backend) -> None:
        self.shown_backend = backend
        self.current.set(effects.spec, _patch_from(effects, backend))   # Step by step follows the patch
        self.effects_view.show_effects(effects)
        self.fill_view.show_effects(effects)
        self.importance_view.set_attentions(effects.attention.after, effects.attention.tokens)
        self.editor.show_alignment(effects.alignment)
        self.effects_shown.emit(effects)

    def _on_effects_error(self, message: str) -> None:
        if self._last_request is not None and self._last_request.sites:
            self.editor.show_refusal(message)       # the patch refused, said once, where B is typed
            self._refused = tuple(self._last_request.sites)
            self._describe()
            self._say("")
            self.failed.emit(message)
            return
        self._say(message, error=True)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.run_bar.on_progress(done, total, message)

    def _set_running(self, running: bool) -> None:
        self.run_bar.set_running(running)
        self.apply_button.setEnabled(self.follow.backend is not None if hasattr(self, "follow") else True)
        if running:
            if self.effects_view.effects is None:
                self.effects_view.stack.say("Computing the intervention's effects …")

    def _say(self, text: str, error: bool = False) -> None:
        if error:
            self.failed.emit(text)
            text = f"<span style='color:#c0392b'>{html.escape(text)}</span>"
        self.message.setText(text)

    def _busy(self, key: str) -> bool:
        """Whether a job of ``key`` runs (at a job's end: whether a newer one waiting behind it started)."""
        return self.state.jobs.is_running(key)

    def _cancel(self, key: str) -> None:
        self.state.jobs.cancel(key)

    # ---- metrics, ranking, the map -------------------------------------------------------------
    def measure(self) -> None:
        spec = self.current.spec if not self.current.spec.is_empty else self.editor.value()
        self.metrics_view.set_running(True, "Measuring")
        ran = self.metrics_follow.run(C.metrics_fn, spec, label="Intervention metrics",
                                      on_result=self._on_metrics, on_error=self._on_metrics_error,
                                      on_progress=self.metrics_view.on_progress,
                                      on_finished=self._metrics_finished)
        if not ran:
            self.metrics_view.set_running(False)

    def _metrics_finished(self) -> None:
        """A newer request may run already (it waited behind this one): the bar stays for it."""
        self.metrics_view.set_running(self._busy(JOB_METRICS) or self._busy(JOB_RANKING))

    def _on_metrics(self, metrics, backend) -> None:
        self.metrics_view.show_metrics(metrics, patched=bool(self.current.spec.patch or self.editor.patch_request()[1]))
        self.metrics_shown.emit(metrics)

    def _on_metrics_error(self, message: str) -> None:
        self.metrics_view.note.setText(message)
        self.failed.emit(message)

    def rank(self, query: str) -> None:
        spec = self.current.spec if not self.current.spec.is_empty else self.editor.value()
        note = ""
        inspected, corpus = self.state.inspect_backend, self.state.backend
        if inspected is not None and corpus is not None and inspected is not corpus:
            note = f" (the ranking runs on the corpus model, {model_label(corpus.model_name)})"
        self.metrics_view.set_running(True, "Ranking" + note)
        ran = self.ranking_follow.run(C.ranking_fn, self.state.store, query, spec,
                                      label="Ranking under the intervention",
                                      on_result=lambda changes, b: self._on_ranking(changes),
                                      on_error=self._on_metrics_error,
                                      on_finished=self._metrics_finished)
        if not ran:
            self.metrics_view.set_running(False)

    def _on_ranking(self, changes) -> None:
        self.metrics_view.show_ranking(changes)
        self.ranking_shown.emit(changes)

    def compute_map(self, metric: str, seed: int) -> None:
        self.importance_view.set_running(True)          # clears a last run's "Cancelled" too
        ran = self.map_follow.run(C.map_fn, metric, seed, model_calls.importance_cache_dir(),
                                  label=f"Importance map ({metric})",
                                  on_result=self._on_map, on_error=self._on_map_error,
                                  on_progress=self.importance_view.on_progress,
                                  on_cancelled=self._on_map_cancelled,
                                  on_finished=lambda: self.importance_view.set_running(self._busy(JOB_MAP)))
        if not ran:
            self.importance_view.set_running(False)

    def _on_map(self, m, backend) -> None:
        self.importance_view.show_map(m)
        self.map_shown.emit(m)

    def _on_map_error(self, message: str) -> None:
        self.importance_view.ended(f"<span style='color:#c0392b'>{html.escape(message)}</span>",
                                   "No map: " + message)
        self.failed.emit(message)

    def _on_map_cancelled(self) -> None:
        self.importance_view.ended("<i>Cancelled: no map computed (a finished map is cached).</i>",
                                   "Cancelled: no map computed. Press Compute map to start again")
        self.map_cancelled.emit()

    # ---- following the inspected model ----------------------------------------------------------
    def _on_backend(self, backend) -> None:
        """A newly inspected model: nothing of the last one stays on screen; the intervention is
        kept when the model has all its parts, else cleared with the reason."""
        self.shown_backend = None
        for key in (JOB_EFFECTS, JOB_METRICS, JOB_MAP):
            self.state.jobs.cancel(key)                   # the old model's work is not wanted any more
        self.metrics_follow.drop()
        self.map_follow.drop()
        if backend is None:
            for view in (self.effects_view, self.fill_view, self.importance_view):
                view.clear("Loading the model …")
            self.metrics_view.clear()
            self.apply_button.setEnabled(False)
            return
        self.apply_button.setEnabled(True)
        self.current.check(backend)                       # a part the model lacks: _on_dropped says so
        self.editor.set_model(int(backend.n_layers), int(backend.n_heads))
        self._fit_editor()
        name = model_label(backend.model_name)
        self.setToolTip(model_tooltip(backend.model_name))
        self.effects_view.clear(f"{name}: choose parts to switch off and press Apply to see what changes")
        self.fill_view.clear(f"{name}: press Apply to see how fill-mask's guesses change")
        self.importance_view.clear(f"{name}: press Compute map to see which parts the metric needs")
        self.metrics_view.clear()
        if self._last_request is not None:
            self.apply()                                  # the same request, on the new model
        if self._dropped:                                 # what the switch dropped stays said
            self._say(self._dropped, error=True)
            self._dropped = ""

    def _on_dropped(self, reason: str) -> None:
        """The new model lacks some parts: only those are dropped, the rest stays switched off."""
        self.editor.set_value(self.current.spec)
        if self.current.spec.is_empty:
            self._last_request = None
        self._dropped = reason
        self._say(reason, error=True)


def _patch_from(effects, backend):
    """Sentence B and the alignment of the effects' patch (None when nothing is patched)."""
    if effects.alignment is None:
        return None
    from core.walkthrough.patched import PatchFrom
    return PatchFrom(effects.request.text, effects.request.text_b, effects.alignment,
                     getattr(backend, "model_name", ""))
