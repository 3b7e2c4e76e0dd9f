"""The features a query and a hit share, for the Why view: what both sentences fire on at the open
SAE's site, the strongest in both first (the corpus model: the one the search ran on).

    view = SharedFeaturesView(state)
    view.show_for(query, hit)                   # in a worker, when an SAE of the corpus model is open
    view.shown.connect(lambda shared: ...)      # [compute.SharedFeature], once drawn

Hidden while no SAE is open; says why when the open SAE belongs to another model.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.current_features import current_features, why_not_fitting
from app.gui.follow_model import FollowModel
from app.gui.panels.features import compute as C


def shared_html(site: str, shared) -> str:
    if not shared:
        return f"<b>Shared features</b> at {html.escape(site)}: <i>none: no feature fires on both</i>"
    items = ", ".join(f"<b>#{s.feature}</b>{' “' + html.escape(s.label) + '”' if s.label else ''} "
                      f"({s.query:.2g} · {s.hit:.2g})" for s in shared)
    return (f"<b>Shared features</b> at {html.escape(site)} (largest activation in the query · in the hit): "
            f"{items}")


class SharedFeaturesView(QtWidgets.QLabel):
    shown = QtCore.Signal(list)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.setObjectName("why_features")
        self.setWordWrap(True)
        self.setTextInteractionFlags(QtCore.Qt.TextInteractionFlag.TextSelectableByMouse)
        self.setToolTip("The sparse-autoencoder features (Features tab) that fire on a token of both sentences")
        self.state = state
        self.current = current_features(state)
        self.follow = FollowModel(state, "features.shared", corpus=True)
        self._pair = None
        self.current.changed.connect(lambda _o: self._pair and self.show_for(*self._pair))
        self.setVisible(False)

    def show_for(self, query: str, hit: str) -> bool:
        self._pair = (query, hit)
        opened, backend = self.current.opened, self.follow.backend
        self.setVisible(opened is not None)
        if opened is None or backend is None:
            return False
        reason = why_not_fitting(opened, backend)
        if reason:
            self.setText(f"<i>Shared features: the open SAE does not fit the corpus model: {html.escape(reason)}</i>")
            return False
        self.setText(f"<i>Shared features at {html.escape(opened.site)} …</i>")
        return self.follow.run(C.shared_features_fn, opened, query, hit, label="Shared features",
                               show_progress=False, on_result=lambda shared, _b: self._show(opened, shared),
                               on_error=lambda m: self.setText(f"<span style='color:#c0392b'>{html.escape(m)}</span>"))

    def _show(self, opened, shared) -> None:
        if opened is not self.current.opened:
            return
        self.setText(shared_html(opened.site, shared))
        self.shown.emit(list(shared))
