"""The fill-mask panel: type a sentence with [MASK], see what the model would put there.

* [MASK] goes in by typing it, by the "Insert [MASK]" button / Ctrl+M at the cursor (it replaces
  a selection), or by clicking a word in the clickable copy of the sentence under the box.
* Each mask gets a top-k table with probability bars; several masks also get the joint
  completion (fill the surest mask, re-run, repeat) with its probability.
* Targets: score only the given words (multi-piece words are scored piece by piece).
* Per layer: the MLM head applied to every layer's hidden state - what each layer would guess.
* Clicking a prediction writes it into the sentence; if masks remain, the model runs again.

The model call (``Backend.fill_mask``) runs through ``state.run``; models without a masked-LM
head (``minilm``) get an explanation and the list of models that have one.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from app.gui import panel_state
from app.gui.follow_model import FollowModel
from app.gui.panels.fillmask.mask_table import MaskTable
from app.gui.panels.fillmask.mask_text import MASK, fill_mask_at, mask_spans, words
from app.gui.panels.fillmask.no_mlm import mlm_models, no_mlm_html, no_mlm_page
from app.gui.panels.fillmask.per_layer import build_layer_box, paint_layer_table
from app.gui.widgets.labels import rich_label
from app.gui.widgets.line_edit import long_line_edit

EXAMPLE = "The [MASK] sat on the mat because it was [MASK]."
JOB_KEY = "fillmask.predict"


def predict_fn(backend, text, top_k=10, targets=None, per_layer=False):
    """Worker side: the core call, as a plain dict."""
    return backend.fill_mask(text, top_k=top_k, targets=targets or None, per_layer=per_layer).to_dict()


# ---------------------------------------------------------------------------- widgets

class FillMaskPanel(QtWidgets.QWidget):
    predicted = QtCore.Signal(dict)         # the result dict, after the views are drawn
    failed = QtCore.Signal(str)

    def __init__(self, state, parent=None, list_models_fn=None, auto_predict: bool = True):
        super().__init__(parent)
        self.state = state
        self.auto_predict = auto_predict     # predict the example as soon as an MLM model is loaded
        self.result: dict | None = None
        self.result_backend = None           # the Backend that computed ``result``
        self.mask_tables: list[MaskTable] = []
        self._list_models_fn = list_models_fn
        self._repredict = False              # predict again once the next model is loaded
        self._build()
        self.follow = FollowModel(state, JOB_KEY)
        self.follow.model_changed.connect(self._on_backend)
        self._on_backend(getattr(state, "inspect_backend", None))

    # ---- layout --------------------------------------------------------------------------------
    def _build(self) -> None:
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(8, 8, 8, 8)
        self.pages = QtWidgets.QStackedWidget()
        outer.addWidget(self.pages)

        # page 0: the tool
        tool = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(tool)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(6)
        row = QtWidgets.QHBoxLayout()
        self.text_edit = long_line_edit(EXAMPLE, "A sentence with [MASK] where a word is missing",
                                        on_enter=self.predict)
        self.text_edit.textChanged.connect(self._text_changed)
        self.mask_button = QtWidgets.QPushButton("Insert [MASK]")
        self.mask_button.setToolTip("Put [MASK] at the cursor, replacing the selection (Ctrl+M)")
        self.mask_button.clicked.connect(self.insert_mask)
        self.predict_button = QtWidgets.QPushButton("Predict")
        self.predict_button.setDefault(True)
        self.predict_button.setToolTip("Run the model (Enter)")
        self.predict_button.clicked.connect(self.predict)
        row.addWidget(self.text_edit, 1)
        row.addWidget(self.mask_button)
        row.addWidget(self.predict_button)
        lay.addLayout(row)

        self.words_label = QtWidgets.QLabel()
        self.words_label.setObjectName("fillmask_words")
        self.words_label.setTextFormat(Qt.TextFormat.RichText)
        self.words_label.setWordWrap(True)
        self.words_label.setTextInteractionFlags(Qt.TextInteractionFlag.LinksAccessibleByMouse)
        self.words_label.linkActivated.connect(self._word_link)
        lay.addWidget(self.words_label)

        opts = QtWidgets.QHBoxLayout()
        opts.addWidget(QtWidgets.QLabel("Top-k"))
        self.topk_spin = QtWidgets.QSpinBox()
        self.topk_spin.setRange(1, 50)
        self.topk_spin.setValue(10)
        self.topk_spin.setToolTip("How many predictions per mask")
        opts.addWidget(self.topk_spin)
        opts.addSpacing(8)
        opts.addWidget(QtWidgets.QLabel("Targets"))
        self.targets_edit = QtWidgets.QLineEdit()
        self.targets_edit.setPlaceholderText("optional: only score these words, e.g. cat, dog, bird")
        self.targets_edit.setClearButtonEnabled(True)
        self.targets_edit.returnPressed.connect(self.predict)
        opts.addWidget(self.targets_edit, 1)
        self.per_layer_check = QtWidgets.QCheckBox("Per layer")
        self.per_layer_check.setToolTip("Also apply the MLM head to every layer's hidden state: "
                                        "watch the guess take shape layer by layer")
        self.per_layer_check.setChecked(True)
        opts.addWidget(self.per_layer_check)
        lay.addLayout(opts)

        self.status_label = rich_label("fillmask_status")
        lay.addWidget(self.status_label)

        self.joint_box = QtWidgets.QFrame()
        self.joint_box.setFrameShape(QtWidgets.QFrame.Shape.StyledPanel)
        jl = QtWidgets.QHBoxLayout(self.joint_box)
        jl.setContentsMargins(8, 4, 8, 4)
        self.joint_label = QtWidgets.QLabel("")
        self.joint_label.setTextFormat(Qt.TextFormat.RichText)
        self.joint_label.setWordWrap(True)
        self.joint_button = QtWidgets.QPushButton("Use it")
        self.joint_button.setToolTip("Write the joint completion into the sentence")
        self.joint_button.clicked.connect(self.use_joint)
        jl.addWidget(self.joint_label, 1)
        jl.addWidget(self.joint_button)
        self.joint_box.hide()
        lay.addWidget(self.joint_box)

        split = QtWidgets.QSplitter(Qt.Orientation.Vertical)
        self.split = split
        self._split_moved_by_user = False
        split.splitterMoved.connect(lambda *_: setattr(self, "_split_moved_by_user", True))
        self.tables_area = QtWidgets.QScrollArea()
        self.tables_area.setWidgetResizable(True)
        self.tables_area.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        self.tables_host = QtWidgets.QWidget()
        self.tables_layout = QtWidgets.QHBoxLayout(self.tables_host)
        self.tables_layout.setContentsMargins(0, 0, 0, 0)
        self.tables_area.setWidget(self.tables_host)
        split.addWidget(self.tables_area)

        split.addWidget(build_layer_box(self))
        split.setSizes([380, 220])
        lay.addWidget(split, 1)
        self.pages.addWidget(tool)

        self.pages.addWidget(no_mlm_page(self))    # page 1: no MLM head

        QtGui.QShortcut(QtGui.QKeySequence("Ctrl+M"), self, self.insert_mask,
                        context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        QtGui.QShortcut(QtGui.QKeySequence("Ctrl+Return"), self, self.predict,
                        context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self._text_changed(self.text_edit.text())

    # ---- model ------------------------------------------------------------------------------------
    def _on_backend(self, backend) -> None:
        # Another model (or none while loading): the tables were another model's guesses.
        had_result = self.result is not None
        if had_result and backend is not self.result_backend:
            self.clear_results()
        if backend is None:
            self.predict_button.setEnabled(False)
            self._status("<i>Loading the model …</i>")
            # a prediction asked for with the old model is redone after the load
            self._repredict = self._repredict or had_result or self.follow.running()
            return
        if not getattr(backend, "has_mlm", False):
            self.show_no_mlm(backend)
            return
        self.pages.setCurrentIndex(0)
        self.predict_button.setEnabled(True)
        name = Path(str(backend.model_name)).name or str(backend.model_name)
        self._status(f"<b>{html.escape(name)}</b> · type a sentence with [MASK] and press Enter")
        again, self._repredict = self._repredict or had_result, False
        if again or (self.auto_predict and MASK in self.text_edit.text()):
            self.predict()

    @property
    def has_explanation(self) -> bool:
        return self.pages.currentIndex() == 1

    def show_no_mlm(self, backend, message: str = "") -> None:
        name = Path(str(getattr(backend, "model_name", "this model"))).name
        models = mlm_models(self._list_models_fn)
        self.no_mlm_label.setText(no_mlm_html(name, models, message))
        self.pages.setCurrentIndex(1)

    def _switch_model(self, name: str) -> None:
        """Inspect with ``name`` (the corpus model, and so search, stay as they are)."""
        choice = getattr(self.state, "inspect_choice", None) or getattr(self.state, "choice", None)
        if choice is not None and hasattr(self.state, "set_inspect_choice"):
            self.state.set_inspect_choice(choice.with_(model=name))

    # ---- editing ------------------------------------------------------------------------------------
    def insert_mask(self) -> None:
        self.text_edit.insert(MASK)              # replaces the selection; keeps undo
        self.text_edit.setFocus()

    def mask_word(self, index: int) -> None:
        """Replace the index-th word of the sentence with [MASK] (undo with Ctrl+Z)."""
        start, end, _ = words(self.text_edit.text())[index]
        self._replace(start, end, MASK)

    def _replace(self, start: int, end: int, new: str) -> None:
        self.text_edit.setSelection(start, end - start)
        self.text_edit.insert(new)

    def _word_link(self, href: str) -> None:
        kind, _, idx = href.partition(":")
        if kind == "w":
            self.mask_word(int(idx))

    def _text_changed(self, text: str) -> None:
        parts, pos, n_mask = [], 0, 0
        for i, (s, e, w) in enumerate(words(text)):
            parts.append(html.escape(text[pos:s]))
            if w == MASK:
                parts.append(f"<span style='background:#fdd0a2;color:#7f2704'><b>&nbsp;[MASK {n_mask + 1}]"
                             "&nbsp;</b></span>")
                n_mask += 1
            else:
                parts.append(f"<a href='w:{i}' style='text-decoration:none'>{html.escape(w)}</a>")
            pos = e
        parts.append(html.escape(text[pos:]))
        hint = "<span style='color:gray'>Click a word to mask it:</span>&nbsp; "
        self.words_label.setText(hint + "".join(parts) if text.strip() else "")

    def mask_count(self) -> int:
        return self.text_edit.text().count(MASK)

    # ---- prediction ------------------------------------------------------------------------------
    def targets(self) -> list[str]:
        return [t for t in re.split(r"[,\s]+", self.targets_edit.text()) if t]

    def predict(self) -> None:
        backend = self.follow.backend
        if backend is None:
            self.follow.drop()
            self._repredict = True               # _on_backend predicts once the model is loaded
            self._status("<i>Waiting for the model to load …</i>")
            return
        if not backend.has_mlm:
            self.show_no_mlm(backend)
            return
        text = self.text_edit.text()
        if MASK not in text:
            self.clear_results()                 # the tables were another sentence's
            self._status("<span style='color:#b35900'>Put [MASK] where the model should guess a word: "
                         "type it, press Ctrl+M, or click a word above.</span>")
            return
        self._status("<i>Predicting …</i>")
        self.follow.run(predict_fn, text, top_k=self.topk_spin.value(), targets=self.targets(),
                        per_layer=self.per_layer_check.isChecked(), label="Fill-mask", wants_progress=False,
                        show_progress=False, on_result=lambda r, b, t=text: self._on_result(r, t, b),
                        on_error=self._on_error)

    def _on_error(self, message: str) -> None:
        self.clear_results()                     # what is shown was the previous sentence's
        backend = self.state.inspect_backend
        if backend is not None and not getattr(backend, "has_mlm", True):
            self.show_no_mlm(backend, message)
        else:
            self._status(f"<span style='color:#c0392b'>{html.escape(message)}</span>")
        self.failed.emit(message)

    def set_result(self, result: dict, text: str | None = None, backend=None) -> None:
        """Show a fill-mask result dict (also used by tests and screenshots)."""
        self._on_result(result, text if text is not None else self.text_edit.text(),
                        backend or self.state.inspect_backend)

    def _on_result(self, result: dict, text: str, backend) -> None:
        self.clear_results()
        self.result, self.result_text, self.result_backend = result, text, backend
        masks = result.get("masks", [])
        for n, m in enumerate(masks):
            box = QtWidgets.QGroupBox(f"[MASK {n + 1}]" if len(masks) > 1 else "[MASK]")
            bl = QtWidgets.QVBoxLayout(box)
            bl.setContentsMargins(4, 4, 4, 4)
            table = MaskTable(n, m["predictions"])
            table.picked.connect(self.fill_prediction)
            bl.addWidget(table)
            self.tables_layout.addWidget(box, 1)
            self.mask_tables.append(table)
        joint = result.get("joint")
        if joint and len(masks) > 1:
            toks = ", ".join(html.escape(t) for t in joint.get("tokens", []))
            self.joint_label.setText(f"<b>Joint completion</b> ({toks}): “{html.escape(joint['text'])}” · "
                                     f"p = <b>{joint['score']:.3g}</b> "
                                     f"<span style='color:gray'>(fill the surest mask, re-run, repeat)</span>")
            self.joint_box.show()
        else:
            self.joint_box.hide()
        self.layer_mask_combo.blockSignals(True)
        self.layer_mask_combo.clear()
        per_layer = result.get("per_layer") or []
        for n, _ in enumerate(per_layer):
            self.layer_mask_combo.addItem(f"[MASK {n + 1}]" if len(per_layer) > 1 else "[MASK]")
        self.layer_mask_combo.setVisible(len(per_layer) > 1)
        self.layer_mask_combo.blockSignals(False)
        self.layer_box.setVisible(bool(per_layer))
        self._n_layers = getattr(backend, "n_layers", 0)
        self._show_layers()
        self._fit_split()
        QtCore.QTimer.singleShot(0, self._fit_split)      # again once the layout has settled
        name = Path(str(getattr(backend, "model_name", ""))).name
        n = len(masks)
        self._status(f"<b>{html.escape(name)}</b> · {n} mask{'s' if n != 1 else ''} · "
                     f"click a prediction to put it in the sentence")
        self.predicted.emit(result)

    def clear_results(self) -> None:
        """Remove every prediction shown (tables, joint completion, per-layer table)."""
        self.result, self.result_backend = None, None
        for t in self.mask_tables:
            t.setParent(None)
            t.deleteLater()
        self.mask_tables = []
        while self.tables_layout.count():
            item = self.tables_layout.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        self.joint_box.hide()
        self.layer_mask_combo.clear()
        self.layer_table.clear()
        self.layer_table.setRowCount(0)
        self.layer_box.hide()

    def _show_layers(self, *_) -> None:
        per_layer = (self.result or {}).get("per_layer") or []
        idx = self.layer_mask_combo.currentIndex()
        t = self.layer_table
        t.clear()
        if not per_layer or idx < 0:
            t.setRowCount(0)
            return
        masks = self.result["masks"]
        final = {p["token"] for p in (masks[idx]["predictions"] if idx < len(masks) else [])[:1]}
        paint_layer_table(t, per_layer[idx]["layers"], self._n_layers, final)

    def _fit_split(self) -> None:
        """Give the per-layer table the height it needs to show every layer (the last, the
        model's answer, included) - up to 60% of the panel - unless the user moved the splitter."""
        if self._split_moved_by_user or self.layer_box.isHidden():
            return
        t = self.layer_table
        overhead = max(0, self.layer_box.sizeHint().height() - t.sizeHint().height())   # title row, margins
        need = (t.horizontalHeader().sizeHint().height() + t.verticalHeader().length() + 2 * t.frameWidth()
                + overhead + 4)
        if t.horizontalScrollBar().isVisible():
            need += t.horizontalScrollBar().sizeHint().height()
        total = sum(self.split.sizes()) or self.split.height()
        if total > 0:
            give = min(need, int(total * 0.6))
            self.split.setSizes([total - give, give])

    def resizeEvent(self, ev) -> None:
        super().resizeEvent(ev)
        if self.result is not None:
            self._fit_split()

    def _predictions_stale(self) -> bool:
        """The sentence was edited (or refilled) since the tables were computed: their mask
        numbers may no longer match the sentence's masks."""
        if self.result is not None and self.text_edit.text() != getattr(self, "result_text", None):
            if self.state.jobs.is_running(JOB_KEY):
                self._status("<i>Predicting the new sentence … (these tables are for the previous one)</i>")
            else:
                self._status("<span style='color:#b35900'>The sentence has changed since these "
                             "predictions: press Enter to predict again.</span>")
            return True
        return False

    def fill_prediction(self, mask_number: int, token: str) -> None:
        """Put a prediction into the sentence; predict again if masks are left."""
        if self._predictions_stale():
            return
        text = self.text_edit.text()
        spans = mask_spans(text)
        if mask_number >= len(spans):
            return
        new = fill_mask_at(text, mask_number, token)
        self.text_edit.selectAll()
        self.text_edit.insert(new)              # keeps undo (Ctrl+Z)
        if MASK in new:
            self.predict()
        else:
            self._status(f"Filled in “{html.escape(token)}”. Click a word above to mask another one.")

    def use_joint(self) -> None:
        joint = (self.result or {}).get("joint")
        if not joint or self._predictions_stale():
            return
        text = self.text_edit.text()
        for tok in joint.get("tokens", []):
            if MASK not in text:
                break
            text = fill_mask_at(text, 0, tok)
        self.text_edit.selectAll()
        self.text_edit.insert(text)

    def _status(self, html: str) -> None:
        self.status_label.setText(html)

    # ---- remembered across restarts (app/gui/panel_state.py) ------------------------------------
    def save_state(self) -> dict:
        return {"text": self.text_edit.text(), "top_k": self.topk_spin.value()}

    def restore_state(self, saved: dict) -> None:
        if panel_state.number(saved, "top_k"):
            self.topk_spin.setValue(saved["top_k"])
        self.text_edit.setText(panel_state.text(saved, "text", self.text_edit.text()))

