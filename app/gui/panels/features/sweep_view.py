"""The features sweep: which of A's features, set to B's values, move A toward B. A runs with one
feature at a time given B's activations (A's error term kept); each feature is ranked by how far that
moves A's sentence vector toward B's (core.features.edit.features_sweep, what `encoderscope features
sweep` prints, at the same digits). A row clicked shows that feature in the browser.

    box = SweepBox()
    box.run_requested.connect(lambda a, b: ...)            # Sweep pressed (or Enter in B)
    box.bar.cancel_button.clicked.connect(...)             # app/gui/widgets/run_bar.py
    box.show_sweep(sweep, labels, site)                    # a FeatureSweep; labels: feature -> label
    box.feature_chosen.connect(lambda feature: ...)        # a row clicked
    box.set_stale(text)                                    # the inputs changed since the run shown
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QStyledItemDelegate

from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.run_bar import RunBar
from app.gui.widgets.tables import read_only_table

HEADERS = ["feature", "label", "in A", "in B", "toward B"]
SHARE_ROLE = Qt.ItemDataRole.UserRole + 2          # toward B as a float, for the bar (None: A is B)
FEATURE_ROLE = Qt.ItemDataRole.UserRole + 3


def percent(value) -> str:
    """A share of the way to B as the CLI prints it ('-' when A is B)."""
    return "-" if value is None else f"{value:.1%}"


def row_cells(effect, label: str = "") -> list[str]:
    """One feature's cells, at the CLI's digits (`features sweep`: 3 decimals, percent to 0.1)."""
    return [str(effect.feature), label, f"{effect.value_a:.3f}", f"{effect.value_b:.3f}", percent(effect.toward_b)]


class ShareBarDelegate(QStyledItemDelegate):
    """The toward-B cell: a bar as long as the share of the longest in the table (green toward B,
    red away from it), the number on it."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.scale = 1.0

    def paint(self, painter, option, index):
        share = index.data(SHARE_ROLE)
        if share is None:
            return super().paint(painter, option, index)
        super().paint(painter, option, index)
        painter.save()
        rect = QRectF(option.rect).adjusted(3, 4, -3, -4)
        frac = max(-1.0, min(1.0, float(share) / self.scale)) if self.scale > 0 else 0.0
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(40, 160, 80, 90) if frac >= 0 else QColor(200, 60, 60, 90))
        painter.drawRoundedRect(QRectF(rect.left(), rect.top(), rect.width() * abs(frac), rect.height()), 3, 3)
        painter.restore()


class SweepBox(QtWidgets.QWidget):
    run_requested = QtCore.Signal(str, str)      # A, B
    feature_chosen = QtCore.Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("features_sweep_page")
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        form = QtWidgets.QFormLayout()
        self.text_a = long_line_edit("the cat sat on the mat.", "A: the sentence that runs", "features_sweep_a")
        self.text_b = long_line_edit("the dog sat on the mat.", "B: the sentence whose feature values are put in",
                                     "features_sweep_b", on_enter=self._ask)
        self.text_a.returnPressed.connect(self._ask)
        form.addRow("A", self.text_a)
        form.addRow("B", self.text_b)
        layout.addLayout(form)
        self.bar = RunBar("Sweep", "features_sweep")
        self.bar.run_button.setToolTip("Run A once per feature active in A or B, that feature set to B's values "
                                       "(A's SAE error kept), and rank the features by how far A's sentence "
                                       "vector moves toward B's")
        self.bar.run_button.clicked.connect(self._ask)
        layout.addWidget(self.bar)
        self.summary = QtWidgets.QLabel("")
        self.summary.setObjectName("features_sweep_summary")
        self.summary.setWordWrap(True)
        layout.addWidget(self.summary)
        self.stale = QtWidgets.QLabel("")
        self.stale.setObjectName("features_sweep_stale")
        self.stale.setWordWrap(True)
        self.stale.setStyleSheet("color: #b35900;")
        self.stale.hide()
        layout.addWidget(self.stale)
        self.table = read_only_table("features_sweep_table", HEADERS)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.table.horizontalHeader().setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.bars = ShareBarDelegate(self.table)
        self.table.setItemDelegateForColumn(4, self.bars)
        self.table.setToolTip("Click a feature to see it in the browser (its top examples)")
        self.table.cellClicked.connect(self._clicked)
        layout.addWidget(self.table, 1)
        self.sweep = None

    def _ask(self) -> None:
        self.run_requested.emit(self.text_a.text().strip(), self.text_b.text().strip())

    def _clicked(self, row: int, _column: int) -> None:
        item = self.table.item(row, 0)
        if item is not None:
            self.feature_chosen.emit(int(item.data(FEATURE_ROLE)))

    def say(self, text: str, error: bool = False) -> None:
        self.summary.setText(f"<span style='color:#b00020'>{html.escape(text)}</span>" if error else text)

    def set_stale(self, text: str) -> None:
        self.stale.setText(text)
        self.stale.setVisible(bool(text))

    def show_sweep(self, sweep, labels: dict, site: str) -> None:
        self.sweep = sweep
        self.summary.setText(f"A's features set to B's ({sweep.alignment}), one at a time, at {site}; all at "
                             f"once: {percent(sweep.all_features)} of the way to B · {len(sweep.effects):,} "
                             "features active in A or B, the most toward B first")
        shares = [abs(e.toward_b) for e in sweep.effects if e.toward_b is not None]
        self.bars.scale = max(shares, default=1.0) or 1.0
        self.table.setRowCount(0)
        self.table.setRowCount(len(sweep.effects))
        for r, effect in enumerate(sweep.effects):
            for c, text in enumerate(row_cells(effect, labels.get(effect.feature, ""))):
                item = QtWidgets.QTableWidgetItem(text)
                if c != 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setData(FEATURE_ROLE, int(effect.feature))
                if c == 4:
                    item.setData(SHARE_ROLE, effect.toward_b)
                item.setToolTip(f"Feature {effect.feature}: mean activation {effect.value_a:.4g} over A's tokens, "
                                f"{effect.value_b:.4g} over B's; set to B's, A's vector moves "
                                f"{percent(effect.toward_b)} of the way to B (cosine with B "
                                f"{effect.cosine_to_b:.4f})")
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.set_stale("")

    def clear(self, note: str = "") -> None:
        self.sweep = None
        self.table.setRowCount(0)
        self.summary.setText(note)
        self.set_stale("")
