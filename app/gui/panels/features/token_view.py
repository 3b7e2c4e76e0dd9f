"""Each token's top features at the open SAE's site, for a view that walks a sentence (Step by step).

    view = TokenFeaturesView(state)
    view.show_for(text)                         # in a worker, when an SAE of the inspected model is open
    view.shown.connect(lambda per_token: ...)   # [(token, [(feature, activation), ...])], once drawn

Hidden while no SAE is open; says why when the open SAE belongs to another model.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.current_features import current_features, why_not_fitting
from app.gui.follow_model import FollowModel
from app.gui.panels.features import compute as C

TOP = 5


def per_token_html(per_token, labels: dict | None = None) -> str:
    """One line per token: the token, then its features (number, label, activation), strongest first."""
    lines = []
    for token, pairs in per_token:
        shown = ", ".join(f"<b>#{f}</b>{_label(labels, f)} {a:.2g}" for f, a in pairs if a > 0) or "<i>none</i>"
        lines.append(f"<tt>{html.escape(token)}</tt> → {shown}")
    return "<br>".join(lines)


def _label(labels, feature) -> str:
    text = (labels or {}).get(int(feature), "")
    return f" “{html.escape(text)}”" if text else ""


class TokenFeaturesView(QtWidgets.QGroupBox):
    shown = QtCore.Signal(list)

    def __init__(self, state, parent=None):
        super().__init__("Features", parent)
        self.setObjectName("token_features")
        self.state = state
        self.current = current_features(state)
        self.follow = FollowModel(state, "features.tokens")
        self._text = ""
        layout = QtWidgets.QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        self.label = QtWidgets.QLabel("")
        self.label.setObjectName("token_features_text")
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        scroll = QtWidgets.QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        scroll.setWidget(self.label)
        scroll.setMaximumHeight(150)
        layout.addWidget(scroll)
        self.current.changed.connect(lambda _o: self.show_for(self._text))
        self.follow.model_changed.connect(lambda _b: self.show_for(self._text))
        self.setVisible(False)

    def show_for(self, text: str) -> bool:
        self._text = text
        opened, backend = self.current.opened, self.follow.backend
        self.setVisible(opened is not None)
        if opened is None or backend is None or not text.strip():
            return False
        reason = why_not_fitting(opened, backend)
        self.setTitle(f"Features at {opened.site} (the SAE open in the Features tab: each token's top {TOP})")
        if reason:
            self.label.setText(f"<i>The open SAE does not fit this model: {html.escape(reason)}</i>")
            return False
        return self.follow.run(C.labelled_token_features_fn, opened, text, TOP, label="Token features",
                               show_progress=False, on_result=lambda result, _b: self._show(opened, *result),
                               on_error=lambda m: self.label.setText(
                                   f"<span style='color:#c0392b'>{html.escape(m)}</span>"))

    def _show(self, opened, per_token, labels) -> None:
        if opened is not self.current.opened:
            return
        self.label.setText(per_token_html(per_token, labels))
        self.shown.emit(list(per_token))
