"""The "Step by step" tab: every moving part of the encoder on the user's own sentence, with the
model's real numbers and, beside each step, the proof that they are the model's.

    panel = WalkthroughPanel(state)
    panel.explain_text("The cat sat on the mat.", layer=1, head=1)   # 1-based, as in the UI
    panel.explained.connect(lambda walkthrough: ...)                 # after the steps are shown
    panel.next_step(); panel.previous_step(); panel.show_step("weights")

The maths is ``core.walkthrough.steps`` (NumPy, checked against the torch encoder); it runs through
``state.run_latest`` off the UI thread: while one runs, only the newest request waits, and a
result that is not the newest request's is dropped. Sentences arrive from the Search,
Corpus and Attention panels through ``state.walkthrough_requested``; a patching-sweep cell (the
Causal tab) opens its patch here (``follow_patch``): sentence A walked with B's numbers at the
site, the step where they come in shown; its Edge cuts page sends its cuts (``follow_cuts``), walked
on their sentence only (their positions are its tokens) until another sentence or model comes.
With an SAE of the inspected model open (Features tab), each token's top features at its site are
listed under the summary.
"""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from app.gui import panel_state
from app.gui.current_intervention import current_intervention
from app.gui.follow_model import FollowModel
from app.gui.panels.features.token_view import TokenFeaturesView
from app.gui.panels.walkthrough.batch_view import BatchView
from app.gui.panels.walkthrough.controls import build_controls
from app.gui.panels.walkthrough.positions_view import PositionsView
from app.gui.panels.walkthrough.steps_page import build_steps_page
from app.gui.panels.walkthrough.steps_view import MATCH_LIMIT, badge_color
from app.gui.widgets.labels import rich_label
from app.gui.widgets.line_edit import long_line_edit
from core.intervene.spec import Intervention
from core.names import POOLINGS

EXAMPLE = "The cat sat on the mat because it was tired."
JOB_KEY = "walkthrough.explain"
POOLING_JOB_KEY = "walkthrough.pooling"
EXPORT_JOB_KEY = "walkthrough.export"


def explain_fn(backend, text: str, pair: str | None, layer: int, head: int, pooling: str, intervention=None,
               patch_from=None, progress=None, cancel=None):
    """Worker side: the walkthrough for (layer, head), 0-based, with the app's intervention applied
    (its patches followed from sentence B on the sentence they were aligned to)."""
    from app.gui.panels.intervene.compute import explain_intervened
    return explain_intervened(backend, text, pair or None, layer, head, pooling, intervention, progress, cancel,
                              patch_from)


def pooling_fn(backend, text: str, other: str):
    """Worker side: CLS vs mean vs max on ``text``, and each one's cosine with ``other``."""
    from core.walkthrough.positions_demo import pooling_comparison
    return pooling_comparison(backend, text, other or None)


def notebook_fn(walkthrough, backend, path: Path):
    """Worker side of "Export notebook…": what ``encoderscope explain TEXT --notebook`` writes."""
    from core.walkthrough.notebook_export import write_notebook
    return write_notebook(walkthrough, backend, path)


class WalkthroughPanel(QtWidgets.QWidget):
    explained = QtCore.Signal(object)        # the Walkthrough, after its steps are listed and drawn
    step_shown = QtCore.Signal(str)          # a step's name, after it is drawn
    failed = QtCore.Signal(str)
    exported = QtCore.Signal(object)         # the Path of the notebook written
    pooling_shown = QtCore.Signal(object)    # the pooling comparison, after it is drawn

    def __init__(self, state, parent=None, auto_explain: bool = True):
        super().__init__(parent)
        self.state = state
        self.auto_explain = auto_explain     # explain the example once a model is loaded and the tab shown
        self.walkthrough = None
        self.walkthrough_backend = None      # the backend that computed self.walkthrough
        self.pooling_result = None           # (request it was computed for, result)
        self._open_step = None               # the step to show once a walk has it ("Patched from B", ...)
        self._awaited_patch = None           # (text, site) to walk once the Intervene tab has applied it
        self._cuts = None                    # (sentence, Cuts) from the Causal tab, walked on that sentence
        self._last_request = None            # the newest request: run again when the model loads or changes
        self._asked = False                  # a sentence, patch or cuts was asked for: the example never replaces it
        self._shown_key = None               # (text, pair, intervention, patch source) of the walk on screen
        self.last_dir = Path.home()
        self._build()
        self.follow = FollowModel(state, JOB_KEY)
        self.follow.model_changed.connect(self._on_backend)
        self.pooling_follow = FollowModel(state, POOLING_JOB_KEY)
        self.intervention = current_intervention(state)      # set in the Intervene tab; the steps follow it
        self.intervention.changed.connect(self._controls_changed)
        self.intervention.changed.connect(self.positions_view.set_intervention)
        self.positions_view.set_intervention(self.intervention.spec)
        if hasattr(state, "walkthrough_requested"):
            state.walkthrough_requested.connect(self.request)
        self._on_backend(getattr(state, "backend", None))

    # ---- layout ------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        outer.setSpacing(6)
        form = QtWidgets.QGridLayout()
        self.text_edit = long_line_edit(EXAMPLE, "Type a sentence and press Enter", "walkthrough_text",
                                        on_enter=self.explain_current)
        self.other_edit = long_line_edit("", "Optional second sentence: compared by each pooling, or read "
                                         "as a pair", "walkthrough_other", on_enter=self.explain_current)
        self.as_pair = QtWidgets.QCheckBox("Read both as one pair")
        self.as_pair.setToolTip("[CLS] first [SEP] second [SEP], token types 0 then 1 (BERT-style pairs)")
        self.explain_button = QtWidgets.QPushButton("Explain")
        self.explain_button.setDefault(True)
        self.explain_button.clicked.connect(self.explain_current)
        form.addWidget(QtWidgets.QLabel("Text"), 0, 0)
        form.addWidget(self.text_edit, 0, 1)
        form.addWidget(self.explain_button, 0, 2)
        form.addWidget(QtWidgets.QLabel("Second"), 1, 0)
        form.addWidget(self.other_edit, 1, 1)
        form.addWidget(self.as_pair, 1, 2)
        outer.addLayout(form)

        build_controls(self, outer)

        self.info_label = rich_label("walkthrough_info")
        outer.addWidget(self.info_label)
        self.token_features = TokenFeaturesView(self.state)   # each token's top SAE features (Features tab)
        outer.addWidget(self.token_features)

        self.stack = QtWidgets.QStackedWidget()
        self.stack.addWidget(build_steps_page(self))
        self.positions_view = PositionsView(self.state, self)
        self.stack.addWidget(self.positions_view)
        # its size hint (a tall step) must not make the tab's own scroll area scroll Previous/Next away
        self.stack.setSizePolicy(QtWidgets.QSizePolicy.Policy.Preferred, QtWidgets.QSizePolicy.Policy.Ignored)
        self.batch_view = BatchView(self.state, self)
        self.batch_view.said_above = lambda: self.info_label.text()
        self.stack.addWidget(self.batch_view)
        outer.addWidget(self.stack, 1)
        self._update_nav()

        self._debounce = QtCore.QTimer(self, singleShot=True, interval=150)
        self._debounce.timeout.connect(self._controls_changed)
        for key, slot in (("Alt+Right", self.next_step), ("Alt+Left", self.previous_step)):
            QtGui.QShortcut(QtGui.QKeySequence(key), self, slot,
                            context=Qt.ShortcutContext.WidgetWithChildrenShortcut)

    # ---- requests -----------------------------------------------------------------------------
    def request(self, text: str) -> None:
        """A sentence sent from another panel (``state.walkthrough_requested``)."""
        self._asked = True
        self.text_edit.setText(text)
        self.explain_current()

    def follow_patch(self, text: str, site, applying: bool = False) -> None:
        """A patch (a core.intervene Site from B into ``text``) to walk: ``text`` at the site's layer
        (and head), its "Patched from B" step shown once the patched walk arrives. The patch itself
        is the app's intervention (set by the Intervene tab), which the walk follows; until it holds
        the patch (always, with ``applying``: the tab is about to apply it) the walk waits for it."""
        from core.walkthrough.patched import KIND_STEP
        self._asked = True                     # the example must not be walked over the patch's outcome
        self._open_step = KIND_STEP[site.kind]
        self.set_view(0)
        if not applying and self._patch_applied(site):
            self._walk_patched(text, site)
            return
        # the Intervene tab is about to apply it (applying) or still computing B's side: walking
        # now would show A unpatched first
        self._awaited_patch = (text, site)
        self._forget_walk()                    # A unpatched (or the last sentence) must not show meanwhile
        self._set_info(f"Applying the patch {_html(site.describe())} from B (the Intervene tab computes it) …")

    def patch_failed(self, why: str) -> None:
        """The Intervene tab could not apply the awaited patch: say so instead of waiting."""
        if self._awaited_patch is not None:
            self._awaited_patch = self._open_step = None
            self._set_info(f"<span style='color:#b35900'>The patch from B was not applied: {_html(why)}</span>")

    def _patch_applied(self, site) -> bool:
        return any((s.kind, s.layer, s.head) == (site.kind, site.layer, site.head)
                   for s in self.intervention.spec.patch)

    def _walk_patched(self, text: str, site) -> None:
        self.explain_text(text, "", False, site.layer + 1, None if site.head is None else site.head + 1)

    def follow_cuts(self, text: str, cuts) -> None:
        """Attention edges of ``text`` knocked out (core.intervene.edges.Cut, the Causal tab's):
        ``text`` walked with them at the first cut's layer (and head), its masked scores shown."""
        first = min(cuts, key=lambda c: (c.layer, c.head is None, c.head or 0))   # a named head before "every"
        self._asked = True
        self._cuts = (text, frozenset(cuts))
        self._open_step = "masked_scores"
        self.set_view(0)
        self.explain_text(text, "", False, first.layer + 1, None if first.head is None else first.head + 1)

    def explain_current(self) -> None:
        self._asked = True
        self._awaited_patch = None             # a walk asked for now replaces one awaited
        self.explain_text(self.text_edit.text(), self.other_edit.text(), as_pair=self.as_pair.isChecked())
        if self.stack.currentIndex() in (1, 2):
            self.set_view(self.stack.currentIndex())   # the positions / the batch of the sentence as typed now

    def explain_text(self, text: str, other: str = "", as_pair: bool = False, layer: int | None = None,
                     head: int | None = None) -> None:
        """Explain ``text``; ``layer``/``head`` 1-based (None: the spin boxes' values)."""
        if not text.strip():
            self._set_info("<span style='color:#b35900'>Type a sentence above (and press Enter) to "
                           "follow it through the encoder step by step.</span>")
            return
        for edit, value in ((self.text_edit, text), (self.other_edit, other)):
            if edit.text() != value:
                edit.setText(value)
        self.as_pair.setChecked(as_pair)
        for spin, value in ((self.layer_spin, layer), (self.head_spin, head)):
            if value is not None:
                spin.blockSignals(True)
                spin.setMaximum(max(spin.maximum(), value))
                spin.setValue(value)
                spin.blockSignals(False)
        self._start((text, other.strip(), as_pair and bool(other.strip()), self.layer_spin.value() - 1,
                     self.head_spin.value() - 1, self.pooling_combo.currentText()))

    def _controls_changed(self) -> None:
        if self._awaited_patch is not None:
            if self._patch_applied(self._awaited_patch[1]):
                self._walk_patched(*self._awaited_patch)
            return
        if self._last_request is not None and self.text_edit.text().strip():
            self.explain_current()
        if self.stack.currentIndex() in (1, 2):
            self.set_view(self.stack.currentIndex())   # the demo's / the batch's layer follows too

    def _set_ranges(self, backend, layer: int | None = None, head: int | None = None) -> None:
        """Layer and head spin boxes span the model's layers and heads (1-based), without re-running."""
        for spin, n, value in ((self.layer_spin, getattr(backend, "n_layers", 1), layer),
                               (self.head_spin, getattr(backend, "n_heads", 1), head)):
            spin.blockSignals(True)
            spin.setRange(1, max(1, int(n)))
            if value is not None:
                spin.setValue(value)
            spin.blockSignals(False)

    def _start(self, request) -> None:
        self._last_request = request
        backend = self.follow.backend
        if backend is None:
            self.follow.drop()
            self._set_info("<i>Waiting for the model to load …</i>")
            return                                     # _on_backend runs it
        text, other, as_pair, layer, head, pooling = request
        spec, patch_from = self.intervention.fitting(backend), self.intervention.patch_from
        if self._cuts is not None and (text != self._cuts[0] or as_pair):
            self._cuts = None                          # their positions were another sentence's
        if self._cuts is not None:                     # the Edge cuts page's cuts alone, as that page shows them
            spec, patch_from = Intervention(cuts=self._cuts[1]), None
        key = (text, other if as_pair else None, spec, patch_from)
        if key != self._shown_key:
            self._forget_walk()                        # another sentence or intervention: no old numbers meanwhile
        self._set_info(f"{self._model_text(backend)} · <i>computing every step …</i>")
        self.follow.run(explain_fn, text, other if as_pair else None, layer, head, pooling,
                        spec, patch_from, label="Step by step",
                        show_progress=False, on_result=lambda r, b, k=key: self._on_result(r, b, k),
                        on_error=self._on_error)

    def _forget_walk(self) -> None:
        """No walk on screen (the steps page empty) until the one asked for arrives."""
        self.walkthrough, self._shown_key = None, None
        self.step_list.blockSignals(True)
        self.step_list.clear()
        self.step_list.blockSignals(False)
        self.arch_map.clear()
        self.page.widget().setVisible(False)
        self.export_button.setEnabled(False)
        self._update_nav()

    def _on_backend(self, backend) -> None:
        self._cuts = None                              # positions of the last model's tokens
        if backend is None:
            self._set_info("<i>Loading the model …</i>")
            self.explain_button.setEnabled(False)
            return
        self.explain_button.setEnabled(True)
        self._set_ranges(backend)
        if self._last_request is None:
            self._auto_explain()
        else:   # same sentence, the newly chosen model: layer and head kept within its ranges
            text, other, as_pair, layer, head, pooling = self._last_request
            self._start((text, other, as_pair, min(layer, self.layer_spin.maximum() - 1),
                         min(head, self.head_spin.maximum() - 1), pooling))

    def _auto_explain(self) -> None:
        """The example, once: when a model is loaded and the tab is on screen (not for a hidden tab)."""
        if self._awaited_patch is not None:
            return                             # a patched walk is on its way
        if self._asked:
            return                             # asked for something (its walk, or why it failed, is shown)
        if (self.auto_explain and self.isVisible() and self.walkthrough is None and self._last_request is None
                and self.state.inspect_backend is not None and self.text_edit.text().strip()):
            self.explain_current()
        elif self.state.inspect_backend is not None and self._last_request is None:
            self._set_info(f"{self._model_text(self.state.inspect_backend)} · type a sentence and press Enter")

    def showEvent(self, event) -> None:
        super().showEvent(event)
        QtCore.QTimer.singleShot(0, self._auto_explain)

    # ---- results --------------------------------------------------------------------------------
    def _on_error(self, message: str) -> None:
        self._set_info(f"<span style='color:#c0392b'>{_html(message)}</span>")
        self.failed.emit(message)

    def set_result(self, walkthrough, backend=None) -> None:
        """Show a Walkthrough (as a worker would hand it; also for screenshots)."""
        self._on_result(walkthrough, backend or self.state.inspect_backend)

    def _on_result(self, result, backend, key=None) -> None:
        walkthrough = result
        current = self.current_step_name()
        self.walkthrough, self.walkthrough_backend, self._shown_key = walkthrough, backend, key
        self.page.widget().setVisible(True)
        self._set_ranges(backend, walkthrough.layer + 1, walkthrough.head + 1)
        self.step_list.blockSignals(True)
        self.step_list.clear()
        for i, step in enumerate(walkthrough.steps):
            item = QtWidgets.QListWidgetItem(f"{i + 1:2d}. {step.title}")
            item.setData(Qt.ItemDataRole.UserRole, step.name)
            item.setForeground(QtGui.QColor(badge_color(step.max_abs_diff)))
            item.setToolTip(step.shape_text)
            self.step_list.addItem(item)
        self.step_list.blockSignals(False)
        self.step_list.setMinimumWidth(min(340, self.step_list.sizeHintForColumn(0) + 28))
        self._set_info(self._summary(walkthrough, backend))
        self.export_button.setEnabled(True)
        names = [s.name for s in walkthrough.steps]
        self._draw_map(walkthrough)
        if self._open_step in names and (self._open_step != "masked_scores" or walkthrough.intervention):
            current, self._open_step = self._open_step, None     # a patch or cut has arrived: show where
        self.show_step(current if current in names else names[0])
        self.token_features.show_for(walkthrough.text)
        self.explained.emit(walkthrough)

    def _draw_map(self, w) -> None:
        from core.walkthrough.architecture import architecture
        if w.config is None:
            self.arch_map.clear()                      # never the last walk's model
            return
        self.arch_map.set_architecture(architecture(w.config, len(w.tokens), w.layer, w.head, w.intervention),
                                       {s.name: f"{i + 1}. {s.title}" for i, s in enumerate(w.steps)})

    def jump_to_layer(self, layer: int) -> None:
        """The same step in another layer (0-based): the walk is recomputed for it."""
        if self.layer_spin.value() != layer + 1:
            self.layer_spin.setValue(layer + 1)          # the debounce re-explains; the step is kept

    def _summary(self, w, backend) -> str:
        T = len(w.tokens)
        checked = sum(s.max_abs_diff is not None for s in w.steps)
        text = (f"{self._model_text(backend)} · {T} tokens · layer {w.layer + 1}, head {w.head + 1} · "
                f"{w.pooling} pooling · {len(w.steps)} steps")
        if checked:
            worst = w.worst_diff
            text += (f" · <span style='color:{badge_color(worst)}'>{checked} checked against the model, "
                     f"{'all equal' if worst <= MATCH_LIMIT else 'NOT all equal'} (largest |Δ| {worst:.1e})"
                     f"</span>")
        if w.truncated:
            pair = self._last_request is not None and self._last_request[2]
            where = "from the end of the longer sentence" if pair else "from the end"
            text += (f" · <span style='color:#b35900'><b>truncated:</b> the text is {T + w.truncated} tokens "
                     f"and the model reads at most {w.max_length or T}, so {w.truncated} were cut "
                     f"{where}</span>")
        if w.intervention is not None:
            text += f"<br><span style='color:#b35900'><b>Intervened:</b> {_html(w.intervention.describe())}</span>"
        elsewhere = self.intervention.spec
        if self._cuts is not None and w.text == self._cuts[0] and not elsewhere.is_empty:
            text += (f" · the Intervene tab's {_html(elsewhere.describe())} is not applied here: the Edge cuts "
                     "page's cuts alone, as that page shows them")
        if w.patched_from is not None:
            text += f" · <b>patched from B</b> ({_html(w.patched_from)})"
        if w.note:
            text += f"<br><span style='color:#b35900'>{_html(w.note)}</span>"
        return text

    # ---- walking ----------------------------------------------------------------------------------
    def current_step_name(self) -> str | None:
        item = self.step_list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def step_names(self) -> list[str]:
        return [s.name for s in self.walkthrough.steps] if self.walkthrough is not None else []

    def show_step(self, name: str) -> None:
        row = self.step_names().index(name)
        if self.step_list.currentRow() == row:
            self._row_changed(row)                     # drawn again (e.g. for a new walk)
        else:
            self.step_list.setCurrentRow(row)          # draws it through currentRowChanged

    def next_step(self) -> None:
        if self.step_list.currentRow() < self.step_list.count() - 1:
            self.step_list.setCurrentRow(self.step_list.currentRow() + 1)

    def previous_step(self) -> None:
        if self.step_list.currentRow() > 0:
            self.step_list.setCurrentRow(self.step_list.currentRow() - 1)

    def _row_changed(self, row: int) -> None:
        if self.walkthrough is None or not 0 <= row < len(self.walkthrough.steps):
            self._update_nav()
            return
        step = self.walkthrough.steps[row]
        self.step_view.set_step(self.walkthrough, step)
        self.arch_map.set_current(step.name)
        self.page_wheel.watch_all(self.page.widget())    # the weights strip makes new plots
        self.pooling_view.setVisible(step.name == "pooled")
        if step.name == "pooled":
            self._show_pooling()
        self._update_nav()
        self.step_shown.emit(step.name)

    def _pooling_request(self):
        text, other, as_pair = self._last_request[:3]
        return self.state.inspect_backend, text, "" if as_pair else other

    def _show_pooling(self) -> None:
        """The CLS / mean / max comparison under the pooled step, computed once per sentence."""
        request = self._pooling_request()
        if self.pooling_result is not None and self.pooling_result[0] == request:
            self.pooling_view.set_result(self.walkthrough, self.pooling_result[1], request[2])
            return
        self.pooling_view.label.setText("<i>comparing CLS, mean and max pooling …</i>")
        if request[0] is None:
            return                                     # the model is loading: shown again after it
        self.pooling_follow.run(pooling_fn, *request[1:], label="Pooling comparison",
                                wants_progress=False, show_progress=False,
                                on_result=lambda r, _b, q=request: self._on_pooling(q, r),
                                on_error=lambda m: self.pooling_view.label.setText(
                                    f"<span style='color:#c0392b'>{_html(m)}</span>"))

    def _on_pooling(self, request, result) -> None:
        self.pooling_result = (request, result)
        if self.current_step_name() == "pooled":
            if request == self._pooling_request():
                self.pooling_view.set_result(self.walkthrough, result, request[2])
                self.pooling_shown.emit(result)
            else:
                QtCore.QTimer.singleShot(0, self._show_pooling)   # the sentence changed meanwhile

    def _update_nav(self) -> None:
        row, n = self.step_list.currentRow(), self.step_list.count()
        self.prev_button.setEnabled(row > 0)
        self.next_button.setEnabled(0 <= row < n - 1)
        self.position_label.setText(f"Step {row + 1} of {n}" if n and row >= 0 else "")

    def set_view(self, index: int) -> None:
        """0: the steps; 1: the positions view (computed on first show); 2: the batch of two."""
        self.stack.setCurrentIndex(index)
        self.view_group.button(index).setChecked(True)
        typed = self.text_edit.text()
        if index and self.walkthrough is not None and typed.strip() and self.walkthrough.text != typed:
            self.explain_current()     # the line above describes the walk: never another sentence's count
            return
        if index == 1:
            text = self.text_edit.text().strip() or EXAMPLE
            self.positions_view.show_for(text, self.layer_spin.value() - 1)
        if index == 2:
            self.batch_view.show_for(self.text_edit.text(), self.other_edit.text(), self.layer_spin.value() - 1,
                                     self.head_spin.value() - 1)

    # ---- export ------------------------------------------------------------------------------------
    def export_notebook(self, path=None):
        """Write the notebook for the sentence shown, in a worker. Returns the Job (or None)."""
        if self.walkthrough is None:
            return None
        if path is None:
            path, _ = QtWidgets.QFileDialog.getSaveFileName(
                self, "Export the walkthrough as a notebook", str(self.last_dir / "walkthrough.ipynb"),
                "Jupyter notebook (*.ipynb)")
            if not path:
                return None
        path = Path(path)
        self.last_dir = path.parent
        return self.state.run(EXPORT_JOB_KEY, notebook_fn, self.walkthrough, self.walkthrough_backend, path,
                              label="Exporting the notebook", wants_progress=False, show_progress=True,
                              on_result=lambda _out, p=path: self._exported(p),
                              on_error=lambda message, p=path: self.state.error.emit(
                                  f"Could not write {p}: {message}"))

    def _exported(self, path: Path) -> None:
        self.state.status.emit(f"Saved {path}")
        self.exported.emit(path)

    # ---- helpers -----------------------------------------------------------------------------------
    def _model_text(self, backend) -> str:
        name = Path(str(getattr(backend, "model_name", "?"))).name or str(getattr(backend, "model_name", "?"))
        return (f"<b>{_html(name)}</b> · {getattr(backend, 'n_layers', '?')} layers × "
                f"{getattr(backend, 'n_heads', '?')} heads")

    def _set_info(self, html: str) -> None:
        self.info_label.setText(html)

    # ---- remembered across restarts (app/gui/panel_state.py) ------------------------------------
    def save_state(self) -> dict:
        return {"text": self.text_edit.text(), "other": self.other_edit.text(), "pair": self.as_pair.isChecked(),
                "layer": self.layer_spin.value(), "head": self.head_spin.value(),
                "pooling": self.pooling_combo.currentText(), "view": self.stack.currentIndex()}

    def restore_state(self, saved: dict) -> None:
        self.text_edit.setText(panel_state.text(saved, "text", self.text_edit.text()))
        self.other_edit.setText(panel_state.text(saved, "other"))
        self.as_pair.setChecked(saved.get("pair") is True)
        for spin, key in ((self.layer_spin, "layer"), (self.head_spin, "head")):
            spin.blockSignals(True)
            panel_state.set_spin(spin, panel_state.number(saved, key))
            spin.blockSignals(False)
        if panel_state.text(saved, "pooling") in POOLINGS:
            self.pooling_combo.setCurrentText(saved["pooling"])
        if panel_state.number(saved, "view") == 1:
            self.set_view(1)
        if self._last_request is not None:     # the example already ran: show the saved sentence
            self.explain_current()


def _html(text) -> str:
    import html
    return html.escape(str(text), quote=False)
