"""The attention inspector: one head large, or every head at once, for any text.

The model call (``Backend.inspect``) runs through ``state.run`` off the UI thread; everything
after it (aggregating, hiding tokens, drawing) is numpy + pyqtgraph on the UI thread and takes
milliseconds (see bench/attention_render.py). The maths lives in ``core/inspect/attention_maps.py``.

Keyboard: with the heatmap or the grid focused, Left/Right step through heads and Up/Down
through layers; Ctrl+Enter in the text box inspects; Home resets the zoom.
"""
from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from app.gui import panel_state
from app.gui.current_intervention import current_intervention, intervention_note
from app.gui.follow_model import FollowModel
from app.gui.panels.attention.controls import build_controls
from app.gui.panels.attention.export import AttentionExporter, ExportSource, pair_text
from app.gui.panels.attention.view_pages import EXPLAIN, build_view_pages
from app.gui.widgets.labels import rich_label
from app.gui.widgets.line_edit import long_line_edit
from core.inspect import attention_maps as A

EXAMPLE = "The cat sat on the mat because it was tired."
JOB_KEY = "attention.inspect"

def inspect_fn(backend, text: str, compare_with: str = ""):
    """Worker side. A second sentence is read as a BERT pair: [CLS] a [SEP] b [SEP], token types 0/1."""
    return backend.inspect(text, pair=compare_with.strip() or None)


class AttentionPanel(QtWidgets.QWidget):
    inspected = QtCore.Signal(object)        # the Inspection, after every view has been redrawn
    view_updated = QtCore.Signal()           # after each redraw (mode/layer/head/options)
    failed = QtCore.Signal(str)
    exported = QtCore.Signal(object)         # the Path of each file written by an export
    export_failed = QtCore.Signal(str, str)  # path, why ("cancelled" when cancelled)
    edge_clicked = QtCore.Signal(str, int, object, int, int)   # text, layer, head (None: all), query, key
    show_cuts_requested = QtCore.Signal()     # "open the Causal tab's Edge cuts"

    def __init__(self, state, parent=None, auto_inspect: bool = True):
        super().__init__(parent)
        self.state = state
        self.auto_inspect = auto_inspect     # inspect the example as soon as a model is loaded
        self.inspection = None
        self.model_label_text = ""
        self._rollout = None                 # (L, T, T) cache for the current inspection
        # the newest (text, compare_with) asked for: run again when the model loads or changes
        self._last_request: tuple[str, str] | None = None
        self.last_dir = Path.home()
        self.matrix = np.zeros((0, 0))       # what the one-head view shows (after hiding)
        self.labels: list[str] = []
        self.exporter = AttentionExporter(state, self, self._export_source, self._saved)
        self._info_html = ""
        self._cuts = ("", frozenset())       # (sentence, Cuts) of the Causal tab's Edge cuts: crossed out
        self.intervention = current_intervention(state)     # said under the info line while one is applied
        self.intervention.changed.connect(lambda _spec: self._set_info(self._info_html))
        self._build()
        self.follow = FollowModel(state, JOB_KEY)
        self.follow.model_changed.connect(self._on_backend)
        state.inspect_requested.connect(self.request)
        self._on_backend(getattr(state, "inspect_backend", None))

    # ---- layout ------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        outer.setSpacing(6)

        # input
        form = QtWidgets.QGridLayout()
        form.setHorizontalSpacing(6)
        self.text_edit = long_line_edit(EXAMPLE, "Type a sentence and press Enter", on_enter=self.inspect_current)
        self.pair_edit = long_line_edit("", "Optional second sentence: read as a pair, [CLS] first [SEP] second "
                                        "[SEP]", on_enter=self.inspect_current)
        self.inspect_button = QtWidgets.QPushButton("Inspect")
        self.inspect_button.setDefault(True)
        self.inspect_button.setToolTip("Run the model on the text (Enter)")
        self.inspect_button.clicked.connect(self.inspect_current)
        form.addWidget(QtWidgets.QLabel("Text"), 0, 0)
        form.addWidget(self.text_edit, 0, 1)
        form.addWidget(self.inspect_button, 0, 2)
        self.walkthrough_button = QtWidgets.QPushButton("Step by step")
        self.walkthrough_button.setToolTip("Follow this text through the encoder, step by step")
        self.walkthrough_button.clicked.connect(self.walkthrough_current)
        form.addWidget(self.walkthrough_button, 0, 3)
        form.addWidget(QtWidgets.QLabel("Pair with"), 1, 0)
        form.addWidget(self.pair_edit, 1, 1, 1, 2)
        outer.addLayout(form)

        self.info_label = rich_label("attention_info")
        outer.addWidget(self.info_label)

        build_controls(self, outer)

        self.stack = build_view_pages(self)
        outer.addWidget(self.stack, 1)

        QtGui.QShortcut(QtGui.QKeySequence("Ctrl+Return"), self, self.inspect_current,
                        context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._mode_changed()

    # ---- model + requests ---------------------------------------------------------------------
    def _on_backend(self, backend) -> None:
        self._cuts = ("", frozenset())            # the cuts were the last model's (the Causal tab clears them too)
        if backend is None:
            self._set_info("<i>Loading the model …</i>")
            self.inspect_button.setEnabled(False)
            return
        self.inspect_button.setEnabled(True)
        request = self._last_request
        if request is None and self.auto_inspect and self.text_edit.text().strip():
            request = (self.text_edit.text(), self.pair_edit.text())
        if request is not None:
            self._start(*request)                      # same text, new model: same views
        else:
            self._set_info(f"{self._model_text(backend)} · type a sentence and press Enter")

    def request(self, text: str, compare_with: str = "") -> None:
        """From the search/corpus panels (``state.inspect_requested``)."""
        self.text_edit.setText(text)
        self.pair_edit.setText(compare_with or "")
        self.inspect_current()

    def walkthrough_current(self) -> None:
        """Send the text to the "Step by step" tab."""
        if self.text_edit.text().strip():
            self.state.request_walkthrough(self.text_edit.text())

    def inspect_current(self) -> None:
        self.inspect_text(self.text_edit.text(), self.pair_edit.text())

    def inspect_text(self, text: str, compare_with: str = "") -> None:
        if not text.strip():
            self._set_info("<span style='color:#b35900'>Type a sentence first.</span>")
            return
        if self.text_edit.text() != text:
            self.text_edit.setText(text)
        if self.pair_edit.text() != (compare_with or ""):
            self.pair_edit.setText(compare_with or "")
        self._start(text, compare_with)

    def _start(self, text: str, compare_with: str = "") -> None:
        self._last_request = (text, compare_with)
        backend = self.follow.backend
        if backend is None:
            self.follow.drop()
            self._set_info("<i>Waiting for the model to load …</i>")
            return                                     # _on_backend runs it
        self._set_info(f"{self._model_text(backend)} · <i>inspecting …</i>")
        self.follow.run(inspect_fn, text, compare_with or "", label="Inspecting attention", wants_progress=False,
                        show_progress=False, on_result=self._on_inspection, on_error=self._on_error)

    def _on_error(self, message: str) -> None:
        self._set_info(f"<span style='color:#c0392b'>{html.escape(message)}</span>")
        self.failed.emit(message)

    def _model_text(self, backend) -> str:
        name = Path(str(getattr(backend, "model_name", "?"))).name or str(backend.model_name)
        kind = {"scratch": "from-scratch encoder", "hf": "transformers"}.get(getattr(backend, "backend", ""), "")
        return (f"<b>{html.escape(name)}</b> ({kind}) · {backend.n_layers} layers × {backend.n_heads} heads"
                if kind else f"<b>{html.escape(name)}</b> · {backend.n_layers} layers × {backend.n_heads} heads")

    def _set_info(self, html: str) -> None:
        self._info_html = html
        self.info_label.setText(html + intervention_note(self.intervention.spec))

    # ---- results --------------------------------------------------------------------------------
    def set_inspection(self, ins, backend=None) -> None:
        """Show an Inspection (also used by tests and screenshots)."""
        self._on_inspection(ins, backend or self.state.inspect_backend)

    def _on_inspection(self, ins, backend) -> None:
        self.inspection = ins
        att = A.check_attentions(ins.attentions)
        L, H, T, _ = att.shape
        self._rollout = None
        for spin, slider, n in ((self.layer_spin, self.layer_slider, L), (self.head_spin, self.head_slider, H)):
            for w in (spin, slider):
                w.blockSignals(True)
                w.setRange(1, n)
                w.blockSignals(False)
            slider.setValue(spin.value())
        info = f"{self._model_text(backend)} · {T} tokens" if backend is not None else f"{T} tokens"
        if ins.truncated:
            max_len = getattr(backend, "max_length", T)
            pair = bool(self._last_request and self._last_request[1].strip())
            where = ("from the end of the longer sentence" if pair else "from the end")
            info += (f" · <span style='color:#b35900'><b>truncated:</b> the text is {T + ins.truncated} "
                     f"tokens long and the model reads at most {max_len}, so {ins.truncated} "
                     f"were cut {where}</span>")
        if getattr(ins, "device", ""):
            info += f" · {html.escape(ins.device)}"
        self._set_info(info)
        self.export_button.setEnabled(True)
        self.refresh()
        self.heatmap.reset_zoom()
        self.inspected.emit(ins)

    # ---- view state -------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return self.mode_combo.currentData()

    def set_mode(self, mode: str) -> None:
        self.mode_combo.setCurrentIndex(A.MODES.index(mode))

    @property
    def layer(self) -> int:
        return self.layer_spin.value() - 1

    @property
    def head(self) -> int:
        return self.head_spin.value() - 1

    def set_layer_head(self, layer: int, head: int | None = None) -> None:
        self.layer_spin.blockSignals(True)
        self.layer_spin.setValue(layer + 1)
        self.layer_spin.blockSignals(False)
        self.layer_slider.setValue(self.layer_spin.value())
        if head is not None:
            self.head_spin.setValue(head + 1)
        self.refresh()

    def set_view(self, index: int) -> None:
        self.stack.setCurrentIndex(index)
        self.view_group.button(index).setChecked(True)
        # The grid always shows every raw head, without numbers: those controls don't apply.
        for w in (self.mode_combo, self.show_values):
            w.setEnabled(index == 0)
        (self.heatmap if index == 0 else self.grid).setFocus()

    def open_head(self, layer: int, head: int) -> None:
        """Grid click: the head, large, as a raw single head."""
        self.mode_combo.blockSignals(True)
        self.set_mode("head")
        self.mode_combo.blockSignals(False)
        self._mode_changed(refresh=False)
        self.set_layer_head(layer, head)
        self.set_view(0)

    def _mode_changed(self, *_, refresh: bool = True) -> None:
        mode = self.mode
        for w in (self.head_label, self.head_spin, self.head_slider):
            w.setEnabled(mode == "head")
        self.layer_label.setText("Up to layer" if mode == "rollout" else "Layer")
        self.explain_label.setText(EXPLAIN[mode])
        if refresh:
            self.refresh()

    def _colormap_changed(self, name: str) -> None:
        self.heatmap.set_colormap(name)
        self.grid.set_colormap(name)

    def _arrow(self, key: int) -> None:
        if self.inspection is None:
            return
        if key in (Qt.Key.Key_Left, Qt.Key.Key_Right) and self.mode == "head":
            self.head_spin.setValue(self.head_spin.value() + (1 if key == Qt.Key.Key_Right else -1))
        elif key in (Qt.Key.Key_Up, Qt.Key.Key_Down):
            self.layer_spin.setValue(self.layer_spin.value() + (1 if key == Qt.Key.Key_Down else -1))

    def keep(self) -> np.ndarray:
        return A.keep_indices(self.inspection.tokens, hide_special=self.hide_special.isChecked())

    def current_matrix_full(self) -> np.ndarray:
        """The aggregated (T, T) matrix before hiding tokens."""
        att = self.inspection.attentions
        if self.mode == "rollout":
            if self._rollout is None:
                self._rollout = A.rollout_layers(att)
            return self._rollout[self.layer]
        return A.aggregate(att, self.mode, self.layer, self.head)

    def title(self) -> str:
        if self.mode == "head":
            return f"Layer {self.layer + 1}, head {self.head + 1}"
        if self.mode == "mean":
            return f"Layer {self.layer + 1}, mean over {self.inspection.attentions.shape[1]} heads"
        return f"Attention rollout, layers 1–{self.layer + 1}"

    def refresh(self, *_) -> None:
        if self.inspection is None:
            return
        keep = self.keep()
        renorm = self.hide_special.isChecked() and self.renormalise.isChecked()
        tokens = list(self.inspection.tokens)
        self.labels = [tokens[i] for i in keep]
        self.matrix = A.hide(self.current_matrix_full(), keep, renormalise=renorm)
        note = " (rows renormalised)" if renorm else ""
        self.heatmap.set_matrix(self.matrix, self.labels, title=self.title() + note, positions=keep)
        self._show_cuts()
        self.hover_label.setText("Hover a cell to read its weight.")
        self.heatmap.set_show_values(self.show_values.isChecked())
        grid_att = A.hide(self.inspection.attentions, keep, renormalise=renorm)
        self.grid.set_attentions(grid_att, self.labels)
        self.grid.set_selected(self.layer, self.head if self.mode == "head" else -1)
        self._show_links()
        self.view_updated.emit()

    def _show_links(self) -> None:
        links = A.top_links(self.matrix, A.distinct_labels(self.labels), k=6)
        rows = "".join(f"<tr><td>{html.escape(q)}</td><td>&nbsp;→&nbsp;</td><td>{html.escape(k)}</td>"
                       f"<td align='right'>&nbsp;{w:.2f}</td></tr>" for q, k, w in links)
        self.links_label.setText(f"<b>Strongest links</b> (query → key, self-links left out)"
                                 f"<table>{rows}</table>" if rows else "")

    def _hovered(self, i: int, j: int, v: float) -> None:
        if i < 0:
            self.hover_label.setText("Hover a cell to read its weight."
                                     + (" Click one to cut that edge." if self.cuttable() else ""))
            return
        row = self.matrix[i]
        names = A.distinct_labels(self.labels)
        self.hover_label.setText(
            f"<b>{html.escape(names[i])}</b> → <b>{html.escape(names[j])}</b>: <b>{v:.4f}</b><br>"
            f"<span style='color:gray'>the row of token {self.heatmap.positions[i]} sums to {row.sum():.3f}; "
            f"its largest weight goes to "
            f"{html.escape(names[int(row.argmax())])}</span>"
            + ("<br><i>click: cut this edge (Causal ▸ Edge cuts)</i>" if self.cuttable() else ""))

    def cuttable(self) -> bool:
        """Whether a click on the heatmap cuts an edge (one head, or the heads' mean: every head)."""
        return self.inspection is not None and self.mode in ("head", "mean") and not self.pair_edit.text().strip()

    def mark_cuts(self, text: str, cuts) -> None:
        """The edges cut in the Causal tab (core.intervene.edges.Cut of ``text``): crossed out here."""
        self._cuts = (text, frozenset(cuts))
        self._show_cuts()

    def _show_cuts(self) -> None:
        text, cuts = self._cuts
        self.heatmap.click_hint = ("click: cut this edge (the Causal tab's Edge cuts page shows what it changes)"
                                   if self.cuttable() else "")
        here = [c for c in cuts if self.inspection is not None and text == self.text_edit.text()
                and c.layer == self.layer and (c.head is None or (self.mode == "head" and c.head == self.head))]
        where = {p: i for i, p in enumerate(self.heatmap.positions)}
        self.heatmap.set_marks([(where[c.query], where[c.key]) for c in here if c.query in where and c.key in where])
        shown = ", ".join(sorted(c.describe() for c in cuts)) if text == self.text_edit.text() else ""
        self.cuts_label.setText(f"<b>Cut</b> (crossed out): {html.escape(shown)} · <a href='#cuts'>open Edge "
                                "cuts</a>" if shown else "")

    def _cell_clicked(self, i: int, j: int) -> None:
        """A cell of one head (or of the heads' mean: every head) is an edge the Causal tab can cut."""
        self.heatmap.setFocus()
        if self.inspection is None or self.mode not in ("head", "mean") or self.pair_edit.text().strip():
            return
        pos = self.heatmap.positions
        self.edge_clicked.emit(self.text_edit.text(), self.layer, self.head if self.mode == "head" else None,
                               pos[i], pos[j])

    def _grid_hovered(self, layer: int, head: int) -> None:
        if layer >= 0:
            q, k, v = self.grid.top_link(layer, head)
            self.grid_hint.setText(f"<b>Layer {layer + 1}, head {head + 1}</b>: strongest link "
                                   f"{html.escape(q)} → {html.escape(k)} ({v:.2f}). Click to open it large.")


    # ---- export (app/gui/panels/attention/export.py) ---------------------------------------
    def export_png(self, path=None) -> Path | None:
        return self.exporter.png(path)

    def export_csv(self, path=None) -> Path | None:
        return self.exporter.csv(path)

    def export_all_csv(self, path=None):
        """All heads as one long CSV, in a worker; ``exported``/``export_failed`` tell when done."""
        return self.exporter.all_csv(path)

    def export_npz(self, path=None):
        return self.exporter.npz(path)

    def _export_source(self) -> ExportSource | None:
        if self.inspection is None:
            return None
        if self.mode == "head":
            stem = f"attention_L{self.layer + 1}_H{self.head + 1}"
        else:
            stem = f"attention_L{self.layer + 1}_{self.mode}"
        one_head = self.stack.currentIndex() == 0
        backend = self.state.inspect_backend
        return ExportSource(
            attentions=self.inspection.attentions, tokens=list(self.inspection.tokens), matrix=self.matrix,
            labels=self.labels, stem=stem, view=self.heatmap if one_head else self.grid,
            view_stem=stem if one_head else "attention_all_heads",
            text=pair_text(*(self._last_request or ("", ""))),
            model=str(getattr(backend, "model_name", "") or "") if backend is not None else "")

    def _saved(self, path, ok: bool, why: str = "") -> None:
        if ok:
            self.state.status.emit(f"Saved {path}")
            self.exported.emit(Path(path))
        else:
            if why != "cancelled":           # a cancel is the user's choice, said in the status bar
                self.state.error.emit(f"Could not save {path}{': ' + why if why else ''}")
            self.export_failed.emit(str(path), why)

    # ---- remembered across restarts (app/gui/panel_state.py) ------------------------------------
    def save_state(self) -> dict:
        return {"text": self.text_edit.text(), "pair": self.pair_edit.text(), "mode": self.mode,
                "layer": self.layer_spin.value(), "head": self.head_spin.value(),
                "view": self.stack.currentIndex()}

    def restore_state(self, saved: dict) -> None:
        self.text_edit.setText(panel_state.text(saved, "text", self.text_edit.text()))
        self.pair_edit.setText(panel_state.text(saved, "pair"))
        if saved.get("mode") in A.MODES:
            self.set_mode(saved["mode"])
        for spin, slider, key in ((self.layer_spin, self.layer_slider, "layer"),
                                  (self.head_spin, self.head_slider, "head")):
            slider.setMaximum(max(slider.maximum(), panel_state.number(saved, key, 1)))
            panel_state.set_spin(spin, panel_state.number(saved, key))
        if panel_state.number(saved, "view") in (0, 1):
            self.set_view(saved["view"])
        if self._last_request is not None:     # the example already ran: show the saved sentence
            self.inspect_current()

