"""The pooling comparison under the walkthrough's "pooled" step: the sentence vector by [CLS],
by the mean and by the max of the token vectors, side by side, and - given a second sentence -
the cosine each pooling gives between the two. Numbers from ``core.walkthrough.steps.pooling_comparison``.
"""
from __future__ import annotations

import html

import numpy as np
from PySide6 import QtWidgets

from app.gui.widgets.labels import rich_label
from app.gui.widgets.matrix_heatmap import MatrixHeatmap


class PoolingView(QtWidgets.QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.result = None
        lay = QtWidgets.QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.label = rich_label("pooling_comparison")
        self.heatmap = MatrixHeatmap(self, row_title="pooling", col_title="dimension")
        self.heatmap.setMinimumHeight(200)
        lay.addWidget(self.label)
        lay.addWidget(self.heatmap, 1)

    def set_result(self, walkthrough, result, other: str = "") -> None:
        """``result`` a core.walkthrough.positions_demo.PoolingComparison; ``other`` the second sentence."""
        self.result = result
        names = list(result.poolings)
        self.heatmap.show_matrix(np.stack([np.asarray(result.vectors[n]) for n in names]), names,
                                 title="The sentence as one unit vector, by each pooling", signed=True)
        rows = "".join(
            f"<tr><td><b>{html.escape(n)}</b>{' (chosen)' if n == walkthrough.pooling else ''}</td>"
            f"<td>&nbsp;{html.escape(POOLING_WORDS.get(n, ''))}</td>"
            + (f"<td align='right'>&nbsp;{result.cosines[n]:.4f}</td>" if result.cosines else "")
            + "</tr>" for n in names)
        head = ("<tr><th align='left'>pooling</th><th align='left'>&nbsp;how</th>"
                + ("<th align='right'>&nbsp;cosine with the second sentence</th>" if result.cosines else "")
                + "</tr>")
        tail = (f"Second sentence: <i>{html.escape(other)}</i>" if result.cosines and other
                else "Type a second sentence (not read as a pair) to see the cosine each pooling gives.")
        self.label.setText(f"<b>CLS vs mean vs max</b><table>{head}{rows}</table>{tail}")


POOLING_WORDS = {"cls": "the [CLS] token's vector", "mean": "the average of the real tokens' vectors",
                 "max": "each dimension's largest value over the tokens"}
