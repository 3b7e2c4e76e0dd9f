"""The architecture map beside the walkthrough's steps: the loaded model as a block diagram.

    view = ArchitectureMap()
    view.set_architecture(core.walkthrough.architecture.architecture(cfg, T, layer, head), titles)
    view.set_current("weights")                 # that block highlighted and scrolled into view
    view.step_clicked.connect(panel.show_step)  # every block is a step
    view.layer_clicked.connect(...)             # "jump to layer k" (0-based), same step

A QGraphicsScene drawn from core/walkthrough/architecture.py's blocks and arrows (no layout is decided
here beyond pixels): the repeated layer in a frame, its residual skips on the right, the real
tensor shapes on the arrows.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtGui, QtWidgets
from PySide6.QtCore import Qt

from app.gui.widgets.heatmap import TOOLTIP_STAYS_MS

COL_W, BOX_W, BOX_H, ROW_H = 104, 96, 28, 40     # pixels: grid column, box (two lines of label), grid row
FRAME_TOP, FRAME_BOTTOM = 22, 66                 # room for the layer frame's title and its repeat line
SKIP_X = 3 * COL_W + 8                           # where residual skips run down, right of the boxes
FILL = {"embedding": "#e3effb", "norm": "#fdf0c8", "attention": "#def3e3", "ffn": "#f5e1f1",
        "add": "#ececec", "output": "#e2e2f7", "patch": "#fde0c5"}
CURRENT = QtGui.QColor("#d62728")
SWITCHED_OFF = QtGui.QColor("#8c8c8c")      # a block an intervention switches off: grey, hatched
MIN_LABEL_PX = 9.0        # a block's label is never drawn smaller on screen: the map scrolls instead


class BlockItem(QtWidgets.QGraphicsRectItem):
    """One block: a rounded box with its label; clicking it asks for its step."""

    def __init__(self, block, x: float, y: float, on_click):
        super().__init__(0, 0, BOX_W, BOX_H)
        self.block, self.on_click = block, on_click
        self.switched_off = ""                    # why an intervention switches it off, if it does
        self.patched = ""                         # which patch from sentence B it shows, if it does
        self.setPos(x, y)
        self.setBrush(QtGui.QColor(FILL.get(block.kind, "#eeeeee")))
        self.setAcceptHoverEvents(True)
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.text = QtWidgets.QGraphicsSimpleTextItem(block.label, self)
        font = QtGui.QFont()
        font.setPointSizeF(7.5)
        self.text.setFont(font)
        self._fit_text()
        self.set_current(False)

    def mark_switched_off(self, why: str) -> None:
        """Drawn hatched grey with its label struck through: an intervention switches it off."""
        self.switched_off = why
        self.setBrush(QtGui.QBrush(SWITCHED_OFF, Qt.BrushStyle.BDiagPattern))
        font = self.text.font()
        font.setStrikeOut(True)
        self.text.setFont(font)

    def mark_patched(self, why: str) -> None:
        """A "patched from B" block (or a mask with edges cut) keeps its fill and gets an italic
        label: its numbers change, nothing is switched off (a struck-through label would say it is)."""
        self.patched = why
        font = self.text.font()
        font.setItalic(True)
        self.text.setFont(font)

    def _fit_text(self) -> None:
        # a long label goes onto two lines rather than shrinking ("mask (padding → −∞)" was ~5 px)
        self.text.setText(two_lines(self.block.label, self.text.font(), BOX_W - 6))
        r = self.text.boundingRect()
        scale = min(1.0, (BOX_W - 6) / max(r.width(), 1), (BOX_H - 2) / max(r.height(), 1))
        self.text.setScale(scale)
        self.text.setPos((BOX_W - r.width() * scale) / 2, (BOX_H - r.height() * scale) / 2)

    def set_current(self, on: bool) -> None:
        pen = QtGui.QPen(CURRENT if on else QtGui.QColor("#8a8a8a"), 2.6 if on else 1.0)
        self.setPen(pen)
        font = self.text.font()
        font.setBold(on)
        self.text.setFont(font)
        self._fit_text()
        self.setZValue(2 if on else 1)

    def paint(self, painter, option, widget=None):
        painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
        painter.setPen(self.pen())
        painter.setBrush(self.brush())
        painter.drawRoundedRect(self.rect(), 5, 5)

    def mousePressEvent(self, event):
        if event.button() == Qt.MouseButton.LeftButton:
            self.on_click(self.block.step)
            event.accept()
        else:
            super().mousePressEvent(event)


class LayerLink(QtWidgets.QGraphicsSimpleTextItem):
    """A layer number under the frame: click to see the same step in that layer."""

    def __init__(self, layer: int, current: bool, on_click, parent=None, switched: bool = False):
        super().__init__(f"{layer + 1}✕" if switched else str(layer + 1), parent)
        self.switched = switched
        self.layer, self.on_click = layer, on_click
        font = QtGui.QFont()
        font.setPointSizeF(8.5)
        font.setBold(current)
        font.setUnderline(not current)
        self.setFont(font)
        self.setBrush(CURRENT if current else QtGui.QColor("#1f5fa8"))
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(f"Layer {layer + 1}: the same step, with layer {layer + 1}'s weights"
                        + (" (the intervention switches part of it off)" if switched else ""))

    def mousePressEvent(self, event):
        self.on_click(self.layer)
        event.accept()


class ArchitectureMap(QtWidgets.QGraphicsView):
    """The block diagram; the current step's block is highlighted."""

    step_clicked = QtCore.Signal(str)
    layer_clicked = QtCore.Signal(int)          # 0-based

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("walkthrough_architecture")
        self.setScene(QtWidgets.QGraphicsScene(self))
        self.setRenderHints(QtGui.QPainter.RenderHint.Antialiasing | QtGui.QPainter.RenderHint.TextAntialiasing)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.setAlignment(Qt.AlignmentFlag.AlignHCenter | Qt.AlignmentFlag.AlignTop)
        self.setMinimumWidth(180)
        self.arch = None
        self.items: dict[str, BlockItem] = {}
        self.layer_links: list[LayerLink] = []
        self.edge_labels: list[QtWidgets.QGraphicsSimpleTextItem] = []
        self.repeat_item = None
        self.current: str | None = None

    # ---- drawing ------------------------------------------------------------------------------
    def set_architecture(self, arch, titles: dict | None = None) -> None:
        """Draw ``arch`` (core.walkthrough.architecture.Architecture); ``titles``: step name -> its title."""
        self.arch, titles = arch, titles or {}
        scene = self.scene()
        scene.clear()
        self.items, self.layer_links, self.edge_labels = {}, [], []
        first, last = arch.layer_rows
        for b in arch.blocks:
            item = BlockItem(b, b.col * COL_W + (COL_W - BOX_W) / 2, self._y(b.row), self.step_clicked.emit)
            tip = f"<b>{html.escape(titles.get(b.step, b.label))}</b><br>{html.escape(b.tip)}"
            shapes = sorted({e.shape for e in arch.edges if e.target == b.step})
            if shapes:
                tip += "<br>in: " + ", ".join(html.escape(s) for s in shapes)
            why = arch.switched_off.get(b.step)
            if why:
                changed = b.kind == "patch" or b.step == "masked_scores"    # B's numbers, or edges cut: not off
                (item.mark_patched if changed else item.mark_switched_off)(why)
                tip += f"<br><b style='color:#b35900'>{html.escape(why)}</b>"
            item.setToolTip(tip + "<br><i>click: show this step</i>")
            scene.addItem(item)
            self.items[b.step] = item
        self._frame(first, last)
        labelled = set()
        for e in arch.edges:
            # one label per fan-out (X -> Q, K, V) or fan-in (lookups -> sum) of the same shape
            keys = {("from", e.source, e.shape), ("to", e.target, e.shape)}
            self._edge(e, label=e.kind == "residual" or not keys & labelled)
            labelled |= keys if e.kind != "residual" else set()
        scene.setSceneRect(scene.itemsBoundingRect().adjusted(-4, -4, 4, 4))
        self._fit()
        if self.current in self.items:
            self.set_current(self.current)

    def clear(self) -> None:
        self.arch = None
        self.scene().clear()
        self.items, self.layer_links, self.edge_labels, self.repeat_item = {}, [], [], None

    def _y(self, row: int) -> float:
        first, last = self.arch.layer_rows
        return row * ROW_H + (FRAME_TOP if row >= first else 0) + (FRAME_BOTTOM if row > last else 0)

    def _frame(self, first: int, last: int) -> None:
        top, bottom = self._y(first) - FRAME_TOP + 4, self._y(last) + BOX_H + 10
        rect = QtCore.QRectF(-6, top, SKIP_X + 26, bottom - top)
        frame = self.scene().addRect(rect, QtGui.QPen(QtGui.QColor("#7d7d7d"), 1, Qt.PenStyle.DashLine))
        frame.setZValue(-1)
        title = self.scene().addSimpleText(f"Layer {self.arch.layer + 1} of {self.arch.n_layers}  "
                                           f"(head {self.arch.head + 1} shown)")
        title.setFont(_font(8, bold=True))
        title.setPos(rect.left() + 6, top + 2)
        self.repeat_item = self.scene().addText(self.arch.repeat_text, _font(7.5))
        self.repeat_item.setDefaultTextColor(QtGui.QColor("#555555"))
        self.repeat_item.setTextWidth(rect.width() - 4)
        self.repeat_item.setPos(rect.left(), bottom)
        below = bottom + self.repeat_item.boundingRect().height()
        jump = self.scene().addSimpleText("jump to layer:")
        jump.setFont(_font(7.5))
        jump.setPos(rect.left() + 4, below)
        x = jump.pos().x() + jump.boundingRect().width() + 6
        for item in (self.repeat_item, jump):     # over the arrow that leaves the frame
            item.setZValue(4)
        backing = self.scene().addRect(QtCore.QRectF(rect.left() + 2, bottom + 2, rect.width() - 4,
                                                     below + 14 - bottom), QtGui.QPen(Qt.PenStyle.NoPen),
                                       self.palette().base())
        backing.setZValue(3.5)
        for layer in range(self.arch.n_layers):
            link = LayerLink(layer, layer == self.arch.layer, self.layer_clicked.emit,
                             switched=layer in self.arch.layers_switched)
            self.scene().addItem(link)
            link.setPos(x, below - 1)
            link.setZValue(4)
            x += link.boundingRect().width() + 8
            self.layer_links.append(link)

    def _edge(self, e, label: bool = True) -> None:
        src, dst = self.items[e.source], self.items[e.target]
        s, t = src.sceneBoundingRect(), dst.sceneBoundingRect()
        pen = QtGui.QPen(QtGui.QColor("#1f5fa8" if e.kind == "residual" else "#555555"), 1.2)
        path = QtGui.QPainterPath()
        if e.kind == "residual":           # out of the right side, down the skip lane, into the add
            a, b = QtCore.QPointF(s.right(), s.center().y()), QtCore.QPointF(t.right(), t.center().y())
            path.moveTo(a)
            path.lineTo(SKIP_X, a.y())
            path.lineTo(SKIP_X, b.y())
            path.lineTo(b)
            end, direction, label_at = b, QtCore.QPointF(-1, 0), QtCore.QPointF(SKIP_X + 12, (a.y() + b.y()) / 2 - 18)
        else:
            a, b = QtCore.QPointF(s.center().x(), s.bottom()), QtCore.QPointF(t.center().x(), t.top())
            path.moveTo(a)
            path.lineTo(b)
            length = max(((b.x() - a.x()) ** 2 + (b.y() - a.y()) ** 2) ** 0.5, 1e-6)
            end, direction = b, QtCore.QPointF((b.x() - a.x()) / length, (b.y() - a.y()) / length)
            label_at = QtCore.QPointF((a.x() + b.x()) / 2 + 4, (a.y() + b.y()) / 2 - 6)
        item = self.scene().addPath(path, pen)
        item.setZValue(0)
        head = QtGui.QPolygonF([end, end - direction * 6 + QtCore.QPointF(-direction.y(), direction.x()) * 3,
                                end - direction * 6 - QtCore.QPointF(-direction.y(), direction.x()) * 3])
        self.scene().addPolygon(head, pen, QtGui.QBrush(pen.color()))
        if not label:
            return
        label = self.scene().addSimpleText(e.shape)
        label.setFont(_font(6.5))
        label.setBrush(QtGui.QColor("#6b6b6b"))
        label.setPos(label_at)
        label.setZValue(3)
        if e.kind == "residual":
            label.setRotation(90)             # written down the skip lane, beside its line
        label.setData(0, (e.source, e.target))
        self.edge_labels.append(label)

    # ---- the current step ---------------------------------------------------------------------
    def set_current(self, step: str | None) -> None:
        if self.current in self.items:
            self.items[self.current].set_current(False)
        self.current = step
        if step in self.items:
            self.items[step].set_current(True)
            self.ensureVisible(self.items[step], 10, 40)

    def viewportEvent(self, event):
        """A block's tooltip stays while the mouse rests on it (Qt hides it after ~10 s)."""
        if event.type() == QtCore.QEvent.Type.ToolTip:
            item = self.itemAt(event.pos())
            while item is not None and not item.toolTip():
                item = item.parentItem()
            if item is None:
                QtWidgets.QToolTip.hideText()
            else:
                rect = self.mapFromScene(item.sceneBoundingRect()).boundingRect()
                QtWidgets.QToolTip.showText(event.globalPos(), item.toolTip(), self.viewport(), rect,
                                            TOOLTIP_STAYS_MS)
            return True
        return super().viewportEvent(event)

    def resizeEvent(self, event):
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """Scale to the width there is (never above 1.3×, never below readable labels); the
        height, and the width where the labels need it, scroll."""
        rect = self.sceneRect()
        if rect.width() <= 0:
            return
        k = max(min(1.3, (self.viewport().width() - 4) / rect.width()), self._readable_scale())
        self.setTransform(QtGui.QTransform.fromScale(k, k))

    def _readable_scale(self) -> float:
        """The least zoom at which every block's label is MIN_LABEL_PX tall on screen."""
        sizes = [QtGui.QFontMetricsF(b.text.font()).height() * b.text.scale()
                 for b in self.scene().items() if isinstance(b, BlockItem)]
        return MIN_LABEL_PX / min(sizes) if sizes else 0.5


def two_lines(label: str, font: QtGui.QFont, width: float) -> str:
    """``label`` as it is when it fits ``width``, else broken at the space that makes the wider of
    its two lines narrowest."""
    metrics = QtGui.QFontMetricsF(font)
    if metrics.horizontalAdvance(label) <= width or " " not in label:
        return label
    words = label.split(" ")
    splits = [(" ".join(words[:i]), " ".join(words[i:])) for i in range(1, len(words))]
    first, second = min(splits, key=lambda p: max(metrics.horizontalAdvance(p[0]), metrics.horizontalAdvance(p[1])))
    return f"{first}\n{second}"


def _font(points: float, bold: bool = False) -> QtGui.QFont:
    font = QtGui.QFont()
    font.setPointSizeF(points)
    font.setBold(bold)
    return font
