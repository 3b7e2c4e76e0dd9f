"""Fill-mask's guesses at the first [MASK] before | after the intervention, and the probability
of one followed token: its own tab of the Intervene views, so the five rows always show whole.

    view = FillMaskEffectsView(); view.show_effects(effects)   # compute.Effects
    view.clear(words)                                          # nothing yet: what to do
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.widgets.empty_state import EmptyState
from app.gui.widgets.significant import before_after, sig


class FillMaskEffectsView(QtWidgets.QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        content = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(content)
        lay.setContentsMargins(0, 0, 0, 0)
        self.fill_label = QtWidgets.QLabel()
        self.fill_label.setObjectName("fill_mask_note")
        self.fill_label.setWordWrap(True)
        self.fill_label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        lay.addWidget(QtWidgets.QLabel("<b>Fill-mask</b>: the model's top guesses at the first [MASK]"))
        lay.addWidget(self.fill_label)
        self.fill_table = QtWidgets.QTableWidget(0, 4)
        self.fill_table.setObjectName("fill_mask_effects")
        self.fill_table.setHorizontalHeaderLabels(["before", "p", "after", "p"])
        self.fill_table.verticalHeader().setVisible(False)
        self.fill_table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.fill_table.horizontalHeader().setSectionResizeMode(QtWidgets.QHeaderView.ResizeMode.Stretch)
        lay.addWidget(self.fill_table)
        lay.addStretch(1)
        self.stack = EmptyState(content, "fill_mask")
        outer.addWidget(self.stack, 1)
        self.clear("Press Apply to see how the intervention changes fill-mask's guesses")

    def clear(self, words: str) -> None:
        self.fill_table.setRowCount(0)
        self.fill_label.clear()
        self.stack.say(words)

    def show_effects(self, effects) -> None:
        fill = effects.fill
        self.fill_table.setRowCount(0)
        if fill is None:
            self.clear(effects.fill_note or "Type a sentence with [MASK] to see the guesses change")
            return
        before = fill.before.masks[0]["predictions"] if fill.before.masks else []
        after = fill.after.masks[0]["predictions"] if fill.after.masks else []
        self.fill_table.setRowCount(max(len(before), len(after)))
        for c, preds in ((0, before), (2, after)):
            for r, p in enumerate(preds):
                self.fill_table.setItem(r, c, QtWidgets.QTableWidgetItem(str(p["token"])))
                self.fill_table.setItem(r, c + 1, QtWidgets.QTableWidgetItem(sig(p["score"], 3)))
        self._fit_rows()
        notes = [html.escape(effects.fill_note)] if effects.fill_note else []
        if fill.target:
            b, a, d = before_after(fill.target_before, fill.target_after)
            notes.insert(0, f"p(<b>{html.escape(fill.target)}</b>) at the first mask: {b} → <b>{a}</b> ({d})")
        self.fill_label.setText("<br>".join(notes))
        self.stack.show_content()

    def _fit_rows(self) -> None:
        """The table as tall as its rows: every guess shows whole, none behind a scrollbar."""
        t = self.fill_table
        height = t.horizontalHeader().sizeHint().height() + 2 * t.frameWidth()
        height += sum(t.rowHeight(r) for r in range(t.rowCount()))
        t.setFixedHeight(height + 2)

    # ---- for tests ----------------------------------------------------------------------------
    def fill_rows(self) -> list[tuple[str, float, str, float]]:
        rows = []
        for r in range(self.fill_table.rowCount()):
            cells = [self.fill_table.item(r, c) for c in range(4)]
            rows.append(tuple(None if c is None else (float(c.text()) if i % 2 else c.text())
                              for i, c in enumerate(cells)))
        return rows
