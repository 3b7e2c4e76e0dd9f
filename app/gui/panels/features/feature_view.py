"""One feature, as the browser shows it: its label, density and largest activation; its top-activating
tokens in their sentences (each token's background as strong as its activation, the top token
bold); a histogram of its activations where it fires; the vocabulary tokens its decoder direction
aligns with; and, for a model with a masked-LM head, the tokens it promotes.

    view = FeatureView()
    view.show_summary(summary)       # a core.features.browse.FeatureSummary
    view.clear(note)
"""
from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtWidgets

from app.gui.widgets.tables import read_only_table

HIGHLIGHT = (230, 97, 1)     # the orange of a firing token; its alpha is the activation's share of the top


def highlighted_sentence(tokens: list[str], activations: list[float], position: int, top: float) -> str:
    """HTML of one example: each token shaded by its activation (0 .. ``top``), the example's token bold."""
    parts = []
    for i, (token, value) in enumerate(zip(tokens, activations)):
        alpha = 0.0 if top <= 0 else max(0.0, min(1.0, float(value) / top))
        text = html.escape(token)
        if i == position:
            text = f"<b><u>{text}</u></b>"
        if alpha > 0.02:
            r, g, b = HIGHLIGHT
            text = (f"<span style='background-color: rgba({r},{g},{b},{alpha:.2f})' "
                    f"title='{float(value):.3g}'>{text}</span>")
        parts.append(text)
    return " ".join(parts)


def examples_html(summary) -> str:
    if not summary.top_examples:
        return "<i>This feature never fired on the indexed sentences.</i>"
    top = max((max(e.token_activations, default=0.0) for e in summary.top_examples), default=0.0)
    rows = [f"<tr><td align='right' style='color:#666'>{e.activation:.3g}&nbsp;</td>"
            f"<td>{highlighted_sentence(e.tokens, e.token_activations, e.position, top)}</td></tr>"
            for e in summary.top_examples]
    return "<table cellspacing='2'>" + "".join(rows) + "</table>"


def _fill(table: QtWidgets.QTableWidget, pairs, number_format: str) -> None:
    table.setRowCount(0)
    for token, value in pairs or []:
        row = table.rowCount()
        table.insertRow(row)
        table.setItem(row, 0, QtWidgets.QTableWidgetItem(str(token)))
        table.setItem(row, 1, QtWidgets.QTableWidgetItem(format(float(value), number_format)))
    table.resizeColumnsToContents()


class FeatureView(QtWidgets.QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.summary = None
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.header = QtWidgets.QLabel("")
        self.header.setObjectName("feature_header")
        self.header.setWordWrap(True)
        layout.addWidget(self.header)
        self.examples = QtWidgets.QTextBrowser()
        self.examples.setObjectName("feature_examples")
        self.examples.setToolTip("The tokens this feature fires on most, in their sentences: the stronger the "
                                 "orange, the stronger the activation (hover a token for its value)")
        layout.addWidget(self.examples, 3)
        below = QtWidgets.QHBoxLayout()
        self.histogram = pg.PlotWidget()
        self.histogram.setObjectName("feature_histogram")
        self.histogram.setMinimumHeight(140)
        self.histogram.setBackground("w")
        self.histogram.setLabel("bottom", "activation (where it fires)")
        self.histogram.setLabel("left", "tokens")
        self.histogram.setMouseEnabled(x=False, y=False)
        self.bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=pg.mkBrush(*HIGHLIGHT))
        self.histogram.addItem(self.bars)
        below.addWidget(self.histogram, 2)
        self.vocab = read_only_table("feature_vocab", ["Aligned token", "cosine"])
        self.vocab.setToolTip("The vocabulary tokens whose embeddings point most the way this feature's "
                              "decoder direction does")
        below.addWidget(self.vocab, 1)
        self.promoted = read_only_table("feature_promoted", ["Promoted token", "logit"])
        self.promoted.setToolTip("The tokens the masked-LM head favours when this feature's direction is added")
        below.addWidget(self.promoted, 1)
        layout.addLayout(below, 2)

    def show_summary(self, summary) -> None:
        self.summary = summary
        self.header.setText(f"<b>Feature {summary.feature}</b> · “{html.escape(summary.label)}” · fires on "
                            f"{summary.density:.2%} of the tokens · largest activation {summary.max_activation:.4g}")
        self.examples.setHtml(examples_html(summary))
        edges, counts = summary.histogram
        edges, counts = np.asarray(edges, float), np.asarray(counts, float)
        if counts.size and counts.any():
            self.bars.setOpts(x0=edges[:-1], x1=edges[1:], height=counts)
            used = np.flatnonzero(counts)          # the bins reach 10 x a typical norm: show the filled ones
            self.histogram.setXRange(0.0, float(edges[used[-1] + 1]) * 1.05, padding=0)
            self.histogram.setYRange(0.0, float(counts.max()) * 1.05, padding=0)
        else:
            self.bars.setOpts(x0=[], x1=[], height=[])
        _fill(self.vocab, summary.vocab_aligned, ".3f")
        self.promoted.setVisible(summary.promoted is not None)     # a model without a masked-LM head promotes none
        _fill(self.promoted, summary.promoted, ".2f")

    def clear(self, note: str = "") -> None:
        self.summary = None
        self.header.setText(note)
        self.examples.setHtml("")
        self.bars.setOpts(x0=[], x1=[], height=[])
        self.vocab.setRowCount(0)
        self.promoted.setRowCount(0)
