"""The top-k table of one [MASK]: rank, token, and a probability bar (a delegate draws it)."""
from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

BAR_COLOR = QtGui.QColor("#4292c6")


class ProbabilityDelegate(QtWidgets.QStyledItemDelegate):
    """Draws a horizontal bar for a probability in [0, 1] (Qt.UserRole), with the number on it."""

    def paint(self, painter, option, index):
        value = index.data(Qt.ItemDataRole.UserRole)
        if value is None:
            return super().paint(painter, option, index)
        opt = QtWidgets.QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        style = opt.widget.style() if opt.widget else QtWidgets.QApplication.style()
        opt.text = ""
        style.drawControl(QtWidgets.QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        r = option.rect.adjusted(3, 4, -3, -4)
        painter.save()
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        track = QtGui.QColor(BAR_COLOR)
        track.setAlpha(30)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(track)
        painter.drawRoundedRect(r, 3, 3)
        w = max(0.0, min(1.0, float(value))) * r.width()
        if w > 0:
            painter.setBrush(BAR_COLOR)
            painter.drawRoundedRect(QtCore.QRectF(r.x(), r.y(), max(w, 2.0), r.height()), 3, 3)
        painter.setPen(option.palette.color(QtGui.QPalette.ColorRole.Text) if w < r.width() * 0.55
                       else QtGui.QColor("white"))
        text = f"{100 * float(value):.1f}%" if value >= 0.001 else f"{100 * float(value):.2g}%"
        painter.drawText(r.adjusted(6, 0, -4, 0), int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft), text)
        painter.restore()


class MaskTable(QtWidgets.QTableWidget):
    """Top-k predictions for one mask: rank, token, probability bar."""

    picked = QtCore.Signal(int, str)        # mask number, token

    def __init__(self, mask_number: int, predictions: list[dict], parent=None):
        super().__init__(len(predictions), 3, parent)
        self.mask_number = mask_number
        self.predictions = predictions
        self.setHorizontalHeaderLabels(["#", "token", "probability"])
        self.verticalHeader().hide()
        self.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QtWidgets.QAbstractItemView.SelectionMode.SingleSelection)
        self.setItemDelegateForColumn(2, ProbabilityDelegate(self))
        self.setShowGrid(False)
        self.setAlternatingRowColors(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        bold = QtGui.QFont()
        bold.setBold(True)
        for r, p in enumerate(predictions):
            rank = QtWidgets.QTableWidgetItem(str(r + 1))
            rank.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            tok = QtWidgets.QTableWidgetItem(p["token"])
            tok.setFont(bold)
            tip = f"Click to put “{p['token']}” in the sentence"
            if p.get("multi_piece"):
                tip += f"\nscored as {len(p.get('pieces', []))} pieces: {' + '.join(p.get('pieces', []))}"
            tok.setToolTip(tip)
            prob = QtWidgets.QTableWidgetItem("")
            prob.setData(Qt.ItemDataRole.UserRole, float(p["score"]))
            prob.setData(Qt.ItemDataRole.DisplayRole, f"{float(p['score']):.4f}")
            prob.setToolTip(f"p = {float(p['score']):.6f}")
            for c, item in enumerate((rank, tok, prob)):
                self.setItem(r, c, item)
        h = self.horizontalHeader()
        h.setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(1, QtWidgets.QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(2, QtWidgets.QHeaderView.ResizeMode.Stretch)
        self.setMinimumWidth(240)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        self.cellClicked.connect(lambda row, _c: self.picked.emit(self.mask_number, self.predictions[row]["token"]))

    def tokens(self) -> list[str]:
        return [self.item(r, 1).text() for r in range(self.rowCount())]

    def scores(self) -> list[float]:
        return [float(self.item(r, 2).data(Qt.ItemDataRole.UserRole)) for r in range(self.rowCount())]
