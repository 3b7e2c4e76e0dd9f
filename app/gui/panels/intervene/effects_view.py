"""Before | after | difference of one intervention on one sentence: the head grids, the chosen
head's attention large, the sentence vector's cosine with the original (and, when patching, how
far it moved toward B). Fill-mask's guesses have their own tab (fill_view.py).

    view = EffectsView(); view.show_effects(effects)     # compute.Effects, from the worker
    view.clear(placeholder)                              # nothing shown: the words say what to do
    view.select_head(layer, head)                        # 0-based; the three large maps follow
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtWidgets

from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.empty_state import EmptyState
from app.gui.widgets.heatmap import HeatmapWidget
from app.gui.widgets.labels import rich_label
from app.gui.widgets.significant import NO_CHANGE, change_words, sig
from app.gui.wording import model_label

COLUMNS = ("before", "after", "difference")
GRID_TITLES = {"before": "before · head", "after": "after · head", "difference": "|after − before| · head"}
LEGEND = ("<span style='color:#c0392b'>┅ dashed red</span>: a head switched off (or patched) · "
          "<span style='color:#d62728'>▭ solid red</span>: the head shown large below (click one) · "
          "after − before: <span style='color:#b2182b'>red</span> gained weight, "
          "<span style='color:#2166ac'>blue</span> lost")


def zeroed_note(spec, layer: int, head: int) -> str:
    """Why a switched-off head's own "after" pattern looks unchanged ('' for a head left on)."""
    if (layer, head) not in spec.heads:
        return ""
    put = "zeros" if spec.head_mode == "zero" else "its average output over the sample corpus"
    return (f"Head {layer + 1}.{head + 1} is switched off: its attention pattern is still computed (it changes "
            f"only if an earlier part was switched off), but its <i>output</i> is replaced by {put}. What the "
            f"switch changes is downstream: later layers no longer receive what this head found.")


class EffectsView(QtWidgets.QWidget):
    head_selected = QtCore.Signal(int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.effects = None
        self.head = (0, 0)
        self.chosen = False                           # a head clicked: it stays shown after each Apply
        self.marks: dict[str, list] = {}             # grid name -> the outlines of the heads switched off
        self.marked: set = set()
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        self.summary = rich_label("effects_summary")
        outer.addWidget(self.summary)

        content = QtWidgets.QWidget()
        grids = QtWidgets.QGridLayout(content)
        grids.setContentsMargins(0, 0, 0, 0)
        grids.setVerticalSpacing(2)
        self.grids: dict[str, HeadGrid] = {}
        self.maps: dict[str, HeatmapWidget] = {}
        self.map_titles: dict[str, QtWidgets.QLabel] = {}
        for c, name in enumerate(COLUMNS):
            grid = HeadGrid()
            grid.setObjectName(f"grid_{name}")
            grid.setMinimumHeight(90)
            grid.plot.getAxis("top").setLabel(GRID_TITLES[name])     # the column's title, in the grid
            grid.head_clicked.connect(self._clicked)
            grids.addWidget(grid, 0, c)
            heading = QtWidgets.QLabel()
            heading.setObjectName(f"map_title_{name}")
            heading.setWordWrap(True)
            grids.addWidget(heading, 3, c)
            heat = HeatmapWidget()
            heat.left_axis.setLabel("")            # the tokens say it: the rows get the room
            heat.top_axis.setLabel("")
            if name == "difference":
                heat.set_colormap("CET-D1")       # signed: blue lost weight, red gained
                heat.colorbar.getAxis("right").setLabel("after − before")
            heat.setMinimumHeight(150)
            self.grids[name], self.maps[name], self.map_titles[name] = grid, heat, heading
        self.difference_box = EmptyState(self.maps["difference"], "difference")
        for c, name in enumerate(COLUMNS):
            grids.addWidget(self.difference_box if name == "difference" else self.maps[name], 4, c)
        self.legend = QtWidgets.QLabel(LEGEND)
        self.legend.setObjectName("effects_legend")
        self.legend.setWordWrap(True)
        grids.addWidget(self.legend, 2, 0, 1, 3)
        self.head_note = rich_label("zeroed_head_note")
        grids.addWidget(self.head_note, 5, 0, 1, 3)
        grids.setRowStretch(0, 2)
        grids.setRowStretch(4, 5)
        self.stack = EmptyState(content, "effects")
        outer.addWidget(self.stack, 1)
        self.clear("Choose parts to switch off and press Apply")

    # ---- data -------------------------------------------------------------------------------
    def clear(self, placeholder: str = "") -> None:
        self.effects = None
        self._mark(())
        self.head = (0, 0)                      # a new model's grid starts at its first head
        self.chosen = False
        self.summary.clear()
        self.head_note.clear()
        for name in COLUMNS:
            self.grids[name].set_attentions(np.zeros((0, 0, 0, 0), np.float32), [])
            self.grids[name].set_selected(-1, -1)
            self.maps[name].set_matrix(np.zeros((0, 0)), [], [])
        self.stack.say(placeholder or "Choose parts to switch off and press Apply")

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
        biggest = float(changed[l, h])
        where = f" in head {l + 1}.{h + 1}" if biggest >= NO_CHANGE else " in any head"
        v = effects.vector
        lines = [f"<b>{html.escape(model_label(effects.model))}</b> · {html.escape(effects.spec.describe())}",
                 f"sentence vector: cosine with the original <b>{sig(v.cosine, 4)}</b> · attention: largest "
                 f"change <b>{change_words(biggest)}</b>{where}"]
        tb = effects.toward_b
        if tb is not None and tb.moved is None:
            lines.append("patched from B: A and B have the same vector, so there is no way to B to measure")
        elif tb is not None:
            lines.append(f"patched from B: cosine with B {sig(tb.cosine_a_b, 4)} → <b>{sig(tb.cosine_patched_b, 4)}"
                         f"</b>, <b>{tb.moved:.0%} of the way to B</b> (0%: A unchanged, 100%: as close to B as "
                         f"B itself)")
        self.summary.setText("<br>".join(lines))
        self.summary.setToolTip(str(effects.model))
        self.stack.show_content()
        if not self.chosen:                     # until a head is clicked: the one that changed most
            self.head = (int(l), int(h))
        self.select_head(*self.head)

    def _clicked(self, layer: int, head: int) -> None:
        self.chosen = True
        self.select_head(layer, head)

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
        where = f"head {layer + 1}.{head + 1}"
        self.maps["before"].set_matrix(att.before[layer, head], att.tokens, levels=(0.0, 1.0))
        self.maps["after"].set_matrix(att.after[layer, head], att.tokens, levels=(0.0, 1.0))
        self.map_titles["before"].setText(f"<b>before</b> · {where}")
        self.map_titles["after"].setText(f"<b>after</b> · {where}")
        diff = att.difference[layer, head]
        top = float(np.abs(diff).max())
        self.map_titles["difference"].setText(f"<b>after − before</b> · {where}")
        if top < NO_CHANGE:                     # nothing to draw: not a ±1e-06 scale of noise
            self.maps["difference"].set_matrix(np.zeros((0, 0)), [], [])
            self.difference_box.say(f"no change: head {layer + 1}.{head + 1}'s attention is the same after")
        else:
            self.maps["difference"].set_matrix(diff, att.tokens, levels=(-top, top))
            self.difference_box.show_content()
        note = zeroed_note(self.effects.spec, layer, head)
        self.head_note.setText(note)
        self.head_note.setVisible(bool(note))
        self.head_selected.emit(layer, head)

