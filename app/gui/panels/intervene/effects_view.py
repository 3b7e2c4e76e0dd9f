"""Before | after | difference of one intervention on one sentence: the head grids, the chosen
head's attention large, the sentence vector's cosine with the original, and fill-mask's guesses.

    view = EffectsView(); view.show_effects(effects)     # compute.Effects, from the worker
    view.clear(placeholder)                              # nothing shown (model switched, cleared)
    view.select_head(layer, head)                        # 0-based; the three large maps follow
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.heatmap import HeatmapWidget
from app.gui.widgets.tables import read_only_table

COLUMNS = ("before", "after", "difference")


class EffectsView(QtWidgets.QWidget):
    head_selected = QtCore.Signal(int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.effects = None
        self.head = (0, 0)
        self.marks: dict[str, list] = {}             # grid name -> the outlines of the heads switched off
        self.marked: set = set()
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.summary = QtWidgets.QLabel()
        self.summary.setObjectName("effects_summary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(QtCore.Qt.TextFormat.RichText)
        outer.addWidget(self.summary)

        grids = QtWidgets.QGridLayout()
        self.grids: dict[str, HeadGrid] = {}
        self.maps: dict[str, HeatmapWidget] = {}
        for c, name in enumerate(COLUMNS):
            title = QtWidgets.QLabel(f"<b>{name}</b>" + (" (|after − before|)" if name == "difference" else ""))
            grids.addWidget(title, 0, c)
            grid = HeadGrid()
            grid.setMinimumHeight(110)
            grid.head_clicked.connect(self.select_head)
            grids.addWidget(grid, 1, c)
            heat = HeatmapWidget()
            if name == "difference":
                heat.set_colormap("CET-D1")       # signed: blue lost weight, red gained
            heat.setMinimumHeight(160)
            grids.addWidget(heat, 2, c)
            self.grids[name], self.maps[name] = grid, heat
        grids.setRowStretch(1, 2)
        grids.setRowStretch(2, 3)
        outer.addLayout(grids, 1)

        lower = QtWidgets.QHBoxLayout()
        self.fill_table = read_only_table("fill_mask_effects", ["before", "p", "after", "p"])
        self.fill_table.setMaximumHeight(120)
        fill_box = QtWidgets.QVBoxLayout()
        self.fill_label = QtWidgets.QLabel()
        self.fill_label.setObjectName("fill_mask_note")
        self.fill_label.setWordWrap(True)
        self.fill_label.setTextFormat(QtCore.Qt.TextFormat.RichText)
        fill_box.addWidget(QtWidgets.QLabel("<b>Fill-mask</b> at the first [MASK]"))
        fill_box.addWidget(self.fill_table)
        fill_box.addWidget(self.fill_label)
        lower.addLayout(fill_box, 1)
        outer.addLayout(lower)
        self.clear("Choose parts to switch off and press Apply")

    # ---- data -------------------------------------------------------------------------------
    def clear(self, placeholder: str = "") -> None:
        self.effects = None
        self._mark(())
        self.summary.setText(f"<i>{html.escape(placeholder)}</i>" if placeholder else "")
        for name in COLUMNS:
            self.grids[name].set_attentions(np.zeros((0, 0, 0, 0), np.float32), [])
            self.maps[name].set_matrix(np.zeros((0, 0)), [], [])
            self.maps[name].set_placeholder(placeholder if name == "after" else "")
        self.fill_table.setRowCount(0)
        self.fill_label.clear()

    def show_effects(self, effects) -> None:
        self.effects = effects
        att = effects.attention
        L, H = att.before.shape[:2]
        self.head = (min(self.head[0], L - 1), min(self.head[1], H - 1))
        self.grids["before"].set_attentions(att.before, att.tokens)
        self.grids["after"].set_attentions(att.after, att.tokens)
        self.grids["difference"].set_attentions(np.abs(att.difference), att.tokens)
        for grid in self.grids.values():
            grid.set_per_head_scale(False)          # one scale: a zeroed head's change is not blown up
        self._mark(effects.spec.heads | {(s.layer, s.head) for s in effects.spec.patch if s.kind == "head"})
        changed = np.abs(att.difference).max(axis=(2, 3))
        l, h = np.unravel_index(int(np.argmax(changed)), changed.shape)
        v = effects.vector
        text = (f"<b>{html.escape(effects.model)}</b> · {html.escape(effects.spec.describe())}<br>"
                f"sentence vector: cosine with the original <b>{v.cosine:.6f}</b> · attention: largest change "
                f"<b>{changed[l, h]:.3g}</b> in head {l + 1}.{h + 1}")
        self.summary.setText(text)
        self.select_head(*self.head)
        self._show_fill(effects)

    def _mark(self, heads) -> None:
        """A dashed outline round each head switched off (or patched) on the three grids."""
        self.marked = set(heads)
        for name, grid in self.grids.items():
            for item in self.marks.get(name, []):
                grid.plot.removeItem(item)
            self.marks[name] = []
            for layer, head in sorted(heads):
                box = QtWidgets.QGraphicsRectItem(grid.cell_rect(layer, head))
                pen = pg.mkPen("#c0392b", width=2, style=QtCore.Qt.PenStyle.DashLine)
                pen.setCosmetic(True)
                box.setPen(pen)
                box.setZValue(9)
                box.setToolTip(f"head {layer + 1}.{head + 1} is switched off")
                grid.plot.addItem(box, ignoreBounds=True)
                self.marks[name].append(box)

    def marked_heads(self) -> set:
        """(layer, head) of every outlined head: each outline sits on that head's cell."""
        grid = self.grids["after"]
        return {(l, h) for l, h in self.marked
                if any(b.rect() == grid.cell_rect(l, h) for b in self.marks.get("after", []))}

    def select_head(self, layer: int, head: int) -> None:
        """Show head (layer, head) large in the three maps (0-based)."""
        self.head = (layer, head)
        if self.effects is None:
            return
        att = self.effects.attention
        for grid in self.grids.values():
            grid.set_selected(layer, head)
        where = f"layer {layer + 1}, head {head + 1}"
        self.maps["before"].set_matrix(att.before[layer, head], att.tokens, title=f"before · {where}",
                                       levels=(0.0, 1.0))
        self.maps["after"].set_matrix(att.after[layer, head], att.tokens, title=f"after · {where}", levels=(0.0, 1.0))
        diff = att.difference[layer, head]
        top = max(float(np.abs(diff).max()), 1e-6)
        self.maps["difference"].set_matrix(diff, att.tokens, title=f"after − before · {where}", levels=(-top, top))
        self.head_selected.emit(layer, head)

    def _show_fill(self, effects) -> None:
        fill = effects.fill
        self.fill_table.setRowCount(0)
        if fill is None:
            self.fill_label.setText(f"<i>{html.escape(effects.fill_note)}</i>")
            return
        before = fill.before.masks[0]["predictions"] if fill.before.masks else []
        after = fill.after.masks[0]["predictions"] if fill.after.masks else []
        self.fill_table.setRowCount(max(len(before), len(after)))
        for c, preds in ((0, before), (2, after)):
            for r, p in enumerate(preds):
                self.fill_table.setItem(r, c, QtWidgets.QTableWidgetItem(str(p["token"])))
                self.fill_table.setItem(r, c + 1, QtWidgets.QTableWidgetItem(f"{p['score']:.4f}"))
        self.fill_table.resizeColumnsToContents()
        notes = [html.escape(effects.fill_note)] if effects.fill_note else []
        if fill.target:
            notes.insert(0, f"p(<b>{html.escape(fill.target)}</b>) at the first mask: {fill.target_before:.4f} → "
                            f"<b>{fill.target_after:.4f}</b> ({fill.target_after - fill.target_before:+.4f})")
        self.fill_label.setText("<br>".join(notes))

    # ---- for tests ----------------------------------------------------------------------------
    def fill_rows(self) -> list[tuple[str, float, str, float]]:
        rows = []
        for r in range(self.fill_table.rowCount()):
            cells = [self.fill_table.item(r, c) for c in range(4)]
            rows.append(tuple(None if c is None else (float(c.text()) if i % 2 else c.text())
                              for i, c in enumerate(cells)))
        return rows
