"""Paints a cosine score as a horizontal bar with the number on it."""
from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

SCORE_ROLE = Qt.ItemDataRole.UserRole + 1


class ScoreBarDelegate(QStyledItemDelegate):
    """Expects a float in ``SCORE_ROLE`` (cosine, -1..1); bars show max(score, 0)."""

    def paint(self, painter, option, index):
        score = index.data(SCORE_ROLE)
        if score is None:
            return super().paint(painter, option, index)
        painter.save()
        if option.state & QStyle.StateFlag.State_Selected:
            painter.fillRect(option.rect, option.palette.highlight())
        rect = QRectF(option.rect).adjusted(4, 4, -4, -4)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(0, 0, 0, 18))
        painter.drawRoundedRect(rect, 3, 3)
        frac = max(0.0, min(1.0, float(score)))
        bar = QRectF(rect.left(), rect.top(), rect.width() * frac, rect.height())
        hue = int(10 + 110 * frac)          # red (low) -> green (high)
        painter.setBrush(QColor.fromHsv(hue, 150, 225))
        painter.drawRoundedRect(bar, 3, 3)
        role = (QPalette.ColorRole.HighlightedText if option.state & QStyle.StateFlag.State_Selected
                and frac < 0.3 else QPalette.ColorRole.Text)
        painter.setPen(option.palette.color(role))
        painter.drawText(rect.adjusted(6, 0, -6, 0), int(Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft),
                         f"{score:.3f}")
        painter.restore()

    def sizeHint(self, option, index):
        size = super().sizeHint(option, index)
        size.setWidth(max(size.width(), 120))
        return size
