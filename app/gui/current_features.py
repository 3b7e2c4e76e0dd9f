"""The one sparse autoencoder the app has open: opened or trained in the Features tab, followed by
Step by step (each token's top features), Why (the features a query and a hit share) and the Map
(sentences coloured by a feature).

    current = current_features(state)         # one per AppState, made on first use
    current.changed.connect(lambda opened: ...)   # an OpenedSae, or None when closed
    current.set(OpenedSae(folder, sae, meta, index))
    current.opened                            # what is open now, or None
    current.fits(backend)                     # the open SAE, if it was trained on ``backend``'s weights

The value is only data: every view runs the SAE inside its own worker. An SAE fits one model (the
fingerprint in its meta): a view whose model is another one shows nothing of it, and says why.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from PySide6 import QtCore


@dataclass(frozen=True)
class OpenedSae:
    folder: Path
    sae: object               # core.features.sae.SparseAutoencoder
    meta: object              # core.features.saved.SaeMeta
    index: object = None      # core.features.browse.FeatureIndex, or None before it is built
    note: str = ""            # why there is no index (none yet, or one to build again)

    @property
    def site(self) -> str:
        return str(self.meta.site)

    def describe(self) -> str:
        return f"{self.folder.name} ({self.meta.width} features at {self.meta.site}, k {self.meta.k})"


class CurrentFeatures(QtCore.QObject):
    changed = QtCore.Signal(object)          # the OpenedSae now open, or None

    def __init__(self, parent=None):
        super().__init__(parent)
        self.opened: OpenedSae | None = None

    def set(self, opened: OpenedSae | None) -> None:
        if opened is not self.opened:
            self.opened = opened
            self.changed.emit(opened)

    def clear(self) -> None:
        self.set(None)

    def fits(self, backend) -> OpenedSae | None:
        """The open SAE when it was trained on ``backend``'s weights, else None."""
        if self.opened is None or backend is None:
            return None
        return self.opened if why_not_fitting(self.opened, backend) == "" else None


def why_not_fitting(opened: OpenedSae, backend) -> str:
    """'' when the SAE was trained on ``backend``'s model, else the reason in words."""
    from core.errors import EncoderscopeError
    from core.features.saved import check_model
    try:
        check_model(opened.meta, backend)
    except EncoderscopeError as e:
        return str(e)
    return ""


def current_features(state) -> CurrentFeatures:
    """The AppState's CurrentFeatures (a child object, made on first use)."""
    current = getattr(state, "_current_features", None)
    if current is None:
        current = CurrentFeatures(state)
        state._current_features = current
    return current
