"""The attention panel's two pages: one head large (the heatmap, with what the view means, the
hovered weight and the strongest links beside it) and every head at once (the head grid)."""
from __future__ import annotations

from PySide6 import QtWidgets
from PySide6.QtCore import Qt

from app.gui.panels.attention.head_grid import HeadGrid
from app.gui.widgets.heatmap import HeatmapWidget

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


def build_view_pages(panel) -> QtWidgets.QStackedWidget:
    """The stack of the two pages; their widgets are the panel's attributes (heatmap, grid, ...)."""
    panel.stack = QtWidgets.QStackedWidget()
    one = QtWidgets.QSplitter(Qt.Orientation.Horizontal)
    panel.heatmap = HeatmapWidget(panel)
    panel.heatmap.hovered.connect(panel._hovered)
    panel.heatmap.cell_clicked.connect(panel._cell_clicked)
    panel.heatmap.arrow_key.connect(panel._arrow)
    panel.heatmap.set_placeholder("Type a sentence above and press Enter")
    one.addWidget(panel.heatmap)
    side = QtWidgets.QWidget()
    side_layout = QtWidgets.QVBoxLayout(side)
    side_layout.setContentsMargins(6, 0, 0, 0)
    panel.explain_label = QtWidgets.QLabel(EXPLAIN["head"])
    panel.explain_label.setWordWrap(True)
    panel.explain_label.setTextFormat(Qt.TextFormat.RichText)
    panel.hover_label = QtWidgets.QLabel("Hover a cell to read its weight.")
    panel.hover_label.setObjectName("attention_hover")
    panel.hover_label.setWordWrap(True)
    panel.hover_label.setTextFormat(Qt.TextFormat.RichText)
    panel.hover_label.setMinimumHeight(48)
    panel.links_label = QtWidgets.QLabel("")
    panel.links_label.setWordWrap(True)
    panel.links_label.setTextFormat(Qt.TextFormat.RichText)
    panel.links_label.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    panel.cuts_label = QtWidgets.QLabel("")          # the edges cut in the Causal tab, and the way there
    panel.cuts_label.setObjectName("attention_cuts")
    panel.cuts_label.setWordWrap(True)
    panel.cuts_label.setTextFormat(Qt.TextFormat.RichText)
    panel.cuts_label.linkActivated.connect(lambda _href: panel.show_cuts_requested.emit())
    for w in (panel.explain_label, _rule(), panel.hover_label, panel.cuts_label, _rule(), panel.links_label):
        side_layout.addWidget(w)
    side_layout.addStretch(1)
    side.setMinimumWidth(200)
    side.setMaximumWidth(320)
    one.addWidget(side)
    one.setStretchFactor(0, 1)
    one.setStretchFactor(1, 0)
    one.setSizes([800, 260])
    panel.stack.addWidget(one)

    grid_page = QtWidgets.QWidget()
    gl = QtWidgets.QVBoxLayout(grid_page)
    gl.setContentsMargins(0, 0, 0, 0)
    panel.grid = HeadGrid(panel)
    panel.grid.head_clicked.connect(panel.open_head)
    panel.grid.head_hovered.connect(panel._grid_hovered)
    gl.addWidget(panel.grid, 1)
    grid_bar = QtWidgets.QHBoxLayout()
    panel.grid_hint = QtWidgets.QLabel("Each square is one head (rows: layers, columns: heads), "
                                       "its own query × key matrix. Click one to open it large.")
    panel.grid_hint.setWordWrap(True)
    panel.per_head_scale = QtWidgets.QCheckBox("Scale each head to its own maximum")
    panel.per_head_scale.setChecked(True)
    panel.per_head_scale.setToolTip("On: weak heads show their pattern too. Off: one colour scale "
                                    "for all heads (compare strength across heads).")
    panel.per_head_scale.toggled.connect(panel.grid.set_per_head_scale)
    grid_bar.addWidget(panel.grid_hint, 1)
    grid_bar.addWidget(panel.per_head_scale)
    gl.addLayout(grid_bar)
    panel.stack.addWidget(grid_page)
    return panel.stack


def _rule() -> QtWidgets.QFrame:
    f = QtWidgets.QFrame()
    f.setFrameShape(QtWidgets.QFrame.Shape.HLine)
    f.setFrameShadow(QtWidgets.QFrame.Shadow.Sunken)
    return f
