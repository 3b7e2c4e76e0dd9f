"""Colour the corpus map's sentences by a feature: each sentence's largest activation of it (the open
SAE, the corpus model), computed in a worker over the map's sentences.

    colour = FeatureColouring(state)
    colour.set_texts(corpus_map.texts)          # the map's sentences, in its row order
    colour.values_ready.connect(plot.set_values)    # (n,) float32, or None: back to the clusters

Hidden while no SAE of the corpus model is open.
"""
from __future__ import annotations

import html

from PySide6 import QtCore, QtWidgets

from app.gui.current_features import current_features
from app.gui.follow_model import FollowModel
from app.gui.panels.features import compute as C
from app.gui.widgets.spin_box import spin_box


class FeatureColouring(QtWidgets.QWidget):
    values_ready = QtCore.Signal(object)      # (n,) values per map row, or None: colour by cluster
    said = QtCore.Signal(str)

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.current = current_features(state)
        self.follow = FollowModel(state, "features.map", corpus=True)
        self.texts: list[str] = []
        layout = QtWidgets.QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.on = QtWidgets.QCheckBox("Colour by feature")
        self.on.setObjectName("map_feature_on")
        self.on.setToolTip("Colour each sentence by its largest activation of this feature of the SAE open "
                           "in the Features tab (off: by k-means cluster)")
        self.feature = spin_box("map_feature", 0, 0, 0, "#")
        self.feature.setKeyboardTracking(False)
        layout.addWidget(self.on)
        layout.addWidget(self.feature)
        self.on.toggled.connect(lambda _b: self.refresh())
        self.feature.valueChanged.connect(lambda _v: self.on.isChecked() and self.refresh())
        self.current.changed.connect(self._opened)
        self.follow.model_changed.connect(lambda _b: self._opened(self.current.opened))
        self._opened(self.current.opened)

    def _opened(self, opened) -> None:
        fits = self.current.fits(self.follow.backend) is not None
        self.setVisible(fits)
        if opened is not None:
            self.feature.setMaximum(int(opened.meta.width) - 1)
        if not fits and self.on.isChecked():
            self.on.setChecked(False)           # the clusters again
        elif self.on.isChecked():
            self.refresh()

    def set_texts(self, texts: list[str]) -> None:
        self.texts = list(texts)
        if self.on.isChecked():
            self.refresh()

    def refresh(self) -> bool:
        opened = self.current.fits(self.follow.backend)
        if not self.on.isChecked() or opened is None or not self.texts:
            self.follow.drop()
            self.values_ready.emit(None)
            return False
        feature, texts = self.feature.value(), self.texts
        self.said.emit(f"Colouring by feature {feature} …")
        return self.follow.run(C.sentence_values_fn, opened, texts, feature, label=f"Feature {feature} on the map",
                               on_result=lambda values, _b: self._show(opened, texts, feature, values),
                               on_error=lambda m: self.said.emit(html.escape(m)))

    def _show(self, opened, texts, feature, values) -> None:
        if opened is not self.current.opened or texts is not self.texts or not self.on.isChecked():
            return
        self.values_ready.emit(values)
        fired = int((values > 0).sum())
        self.said.emit(f"Feature {feature} fires on {fired:,} of {len(values):,} sentences "
                       f"(largest {float(values.max(initial=0)):.3g})")
