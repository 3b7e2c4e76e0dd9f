"""The attention inspector: one head large, or every head at once, for any text.

The model call (``Backend.inspect``) runs through ``state.run`` off the UI thread; everything
after it (aggregating, hiding tokens, drawing) is numpy + pyqtgraph on the UI thread and takes
milliseconds (see bench/attention_render.py). The maths lives in ``core/encoder/attention.py``.

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
from app.gui.follow_model import FollowModel
from app.gui.panels.attention.export import AttentionExporter, ExportSource, pair_text
from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.heatmap import COLORMAPS, DEFAULT_COLORMAP, HeatmapWidget
from app.gui.widgets.labels import rich_label
from app.gui.widgets.line_edit import long_line_edit
from core.encoder import attention as A

EXAMPLE = "The cat sat on the mat because it was tired."
JOB_KEY = "attention.inspect"

EXPLAIN = {
    "head": ("<b>One head.</b> Row = the token doing the looking (query); column = the token looked "
             "at (key). Each row sums to 1: it is how that token shares its attention. Many heads "
             "park weight on [CLS]/[SEP] when they have nothing better to do - hide them to see the rest."),
    "mean": ("<b>Mean over heads.</b> The average of every head in this layer: a summary of where "
             "the layer as a whole moves information. Rows still sum to 1."),
    "rollout": ("<b>Attention rollout</b> (Abnar &amp; Zuidema, 2020). The residual connection is "
                "modelled by adding the identity to each layer's mean attention and renormalising "
                "(½A + ½I); the layers are then multiplied from layer 1 up to the chosen one. "
                "Row i estimates how much of each input token flows into token i after that layer."),
}


def inspect_fn(backend, text: str, compare_with: str = ""):
    """Worker side. A second sentence is read as a BERT pair: [CLS] a [SEP] b [SEP], token types 0/1."""
    return backend.inspect(text, pair=compare_with.strip() or None)


class AttentionPanel(QtWidgets.QWidget):
    inspected = QtCore.Signal(object)        # the Inspection, after every view has been redrawn
    view_updated = QtCore.Signal()           # after each redraw (mode/layer/head/options)
    failed = QtCore.Signal(str)
    exported = QtCore.Signal(object)         # the Path of each file written by an export
    export_failed = QtCore.Signal(str, str)  # path, why ("cancelled" when cancelled)

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

        # controls
        bar = QtWidgets.QHBoxLayout()
        bar.setSpacing(6)
        self.view_group = QtWidgets.QButtonGroup(self)
        self.one_button = QtWidgets.QToolButton(text="One head")
        self.grid_button = QtWidgets.QToolButton(text="All heads")
        for i, b in enumerate((self.one_button, self.grid_button)):
            b.setCheckable(True)
            b.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
            self.view_group.addButton(b, i)
            bar.addWidget(b)
        self.one_button.setChecked(True)
        self.one_button.setToolTip("One attention matrix, large, with token labels")
        self.grid_button.setToolTip("Every head of every layer at once; click one to open it large")
        self.view_group.idClicked.connect(self.set_view)
        bar.addSpacing(10)

        bar.addWidget(QtWidgets.QLabel("Show"))
        self.mode_combo = QtWidgets.QComboBox()
        for mode in A.MODES:
            self.mode_combo.addItem(A.MODE_LABELS[mode], mode)
        self.mode_combo.setToolTip("Single head · mean over the heads of a layer · attention rollout "
                                   "through the layers up to the chosen one")
        self.mode_combo.currentIndexChanged.connect(self._mode_changed)
        bar.addWidget(self.mode_combo)

        def stepper(name, tip):
            label = QtWidgets.QLabel(name)
            spin = QtWidgets.QSpinBox()
            spin.setRange(1, 1)
            spin.setToolTip(tip)
            slider = QtWidgets.QSlider(Qt.Orientation.Horizontal)
            slider.setRange(1, 1)
            slider.setFixedWidth(90)
            slider.setPageStep(1)
            slider.setToolTip(tip)
            spin.valueChanged.connect(slider.setValue)
            slider.valueChanged.connect(spin.setValue)
            spin.valueChanged.connect(self.refresh)
            for w in (label, spin, slider):
                bar.addWidget(w)
            return label, spin, slider

        self.layer_label, self.layer_spin, self.layer_slider = stepper("Layer", "Layer (Up/Down keys)")
        self.head_label, self.head_spin, self.head_slider = stepper("Head", "Head (Left/Right keys)")
        # Two rows: in one, the controls overflowed a 1,200 px window in rollout mode.
        bar.addStretch(1)
        outer.addLayout(bar)
        bar = QtWidgets.QHBoxLayout()
        bar.setSpacing(6)

        self.hide_special = QtWidgets.QCheckBox("Hide [CLS]/[SEP]")
        self.hide_special.setToolTip("Remove the special tokens' rows and columns (padding is always hidden)")
        self.renormalise = QtWidgets.QCheckBox("Renormalise")
        self.renormalise.setToolTip("With special tokens hidden: rescale each row to sum to 1 over the "
                                    "visible tokens.\nOff: show the raw weights (rows sum to less than 1; "
                                    "the rest went to the hidden tokens).")
        self.renormalise.setEnabled(False)
        self.show_values = QtWidgets.QCheckBox("Numbers")
        self.show_values.setToolTip("Write each weight in its cell (for long texts, zoom in with the wheel)")
        self.hide_special.toggled.connect(self.renormalise.setEnabled)
        for cb in (self.hide_special, self.renormalise, self.show_values):
            cb.toggled.connect(self.refresh)
            bar.addWidget(cb)
        bar.addStretch(1)

        self.colormap_combo = QtWidgets.QComboBox()
        self.colormap_combo.addItems(list(COLORMAPS))
        self.colormap_combo.setCurrentText(DEFAULT_COLORMAP)
        self.colormap_combo.setToolTip("Colour map")
        self.colormap_combo.currentTextChanged.connect(self._colormap_changed)
        bar.addWidget(self.colormap_combo)

        self.export_button = QtWidgets.QToolButton(text="Export")
        self.export_button.setPopupMode(QtWidgets.QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QtWidgets.QMenu(self.export_button)
        self.export_png_action = menu.addAction("View as PNG…", lambda: self.export_png())
        self.export_csv_action = menu.addAction("This matrix as CSV…", lambda: self.export_csv())
        menu.addSeparator()
        self.export_all_csv_action = menu.addAction("All heads as CSV…", lambda: self.export_all_csv())
        self.export_npz_action = menu.addAction("All heads as NPZ (numpy)…", lambda: self.export_npz())
        self.export_button.setMenu(menu)
        self.export_button.setEnabled(False)
        bar.addWidget(self.export_button)
        outer.addLayout(bar)

        # views
        self.stack = QtWidgets.QStackedWidget()
        one = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
        self.heatmap = HeatmapWidget(self)
        self.heatmap.hovered.connect(self._hovered)
        self.heatmap.cell_clicked.connect(self._cell_clicked)
        self.heatmap.arrow_key.connect(self._arrow)
        self.heatmap.set_placeholder("Type a sentence above and press Enter")
        one.addWidget(self.heatmap)
        side = QtWidgets.QWidget()
        side_layout = QtWidgets.QVBoxLayout(side)
        side_layout.setContentsMargins(6, 0, 0, 0)
        self.explain_label = QtWidgets.QLabel(EXPLAIN["head"])
        self.explain_label.setWordWrap(True)
        self.explain_label.setTextFormat(Qt.TextFormat.RichText)
        self.hover_label = QtWidgets.QLabel("Hover a cell to read its weight.")
        self.hover_label.setObjectName("attention_hover")
        self.hover_label.setWordWrap(True)
        self.hover_label.setTextFormat(Qt.TextFormat.RichText)
        self.hover_label.setMinimumHeight(48)
        self.links_label = QtWidgets.QLabel("")
        self.links_label.setWordWrap(True)
        self.links_label.setTextFormat(Qt.TextFormat.RichText)
        self.links_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        for w in (self.explain_label, _rule(), self.hover_label, _rule(), self.links_label):
            side_layout.addWidget(w)
        side_layout.addStretch(1)
        side.setMinimumWidth(200)
        side.setMaximumWidth(320)
        one.addWidget(side)
        one.setStretchFactor(0, 1)
        one.setStretchFactor(1, 0)
        one.setSizes([800, 260])
        self.stack.addWidget(one)

        grid_page = QtWidgets.QWidget()
        gl = QtWidgets.QVBoxLayout(grid_page)
        gl.setContentsMargins(0, 0, 0, 0)
        self.grid = HeadGrid(self)
        self.grid.head_clicked.connect(self.open_head)
        self.grid.head_hovered.connect(self._grid_hovered)
        gl.addWidget(self.grid, 1)
        grid_bar = QtWidgets.QHBoxLayout()
        self.grid_hint = QtWidgets.QLabel("Each square is one head (rows: layers, columns: heads), "
                                          "its own query × key matrix. Click one to open it large.")
        self.grid_hint.setWordWrap(True)
        self.per_head_scale = QtWidgets.QCheckBox("Scale each head to its own maximum")
        self.per_head_scale.setChecked(True)
        self.per_head_scale.setToolTip("On: weak heads show their pattern too. Off: one colour scale "
                                       "for all heads (compare strength across heads).")
        self.per_head_scale.toggled.connect(self.grid.set_per_head_scale)
        grid_bar.addWidget(self.grid_hint, 1)
        grid_bar.addWidget(self.per_head_scale)
        gl.addLayout(grid_bar)
        self.stack.addWidget(grid_page)
        outer.addWidget(self.stack, 1)

        QtGui.QShortcut(QtGui.QKeySequence("Ctrl+Return"), self, self.inspect_current,
                        context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._mode_changed()

    # ---- model + requests ---------------------------------------------------------------------
    def _on_backend(self, backend) -> None:
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
        self.info_label.setText(html)

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
            self.hover_label.setText("Hover a cell to read its weight.")
            return
        row = self.matrix[i]
        names = A.distinct_labels(self.labels)
        self.hover_label.setText(
            f"<b>{html.escape(names[i])}</b> → <b>{html.escape(names[j])}</b>: <b>{v:.4f}</b><br>"
            f"<span style='color:gray'>the row of token {self.heatmap.positions[i]} sums to {row.sum():.3f}; "
            f"its largest weight goes to "
            f"{html.escape(names[int(row.argmax())])}</span>")

    def _cell_clicked(self, i: int, j: int) -> None:
        self.heatmap.setFocus()

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


def _rule() -> QtWidgets.QFrame:
    f = QtWidgets.QFrame()
    f.setFrameShape(QtWidgets.QFrame.Shape.HLine)
    f.setFrameShadow(QtWidgets.QFrame.Shadow.Sunken)
    return f
