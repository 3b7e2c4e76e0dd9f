"""The save-file dialog of the export buttons: it opens in the folder last saved to."""
from __future__ import annotations

from pathlib import Path

from PySide6 import QtWidgets


def ask_save_path(widget, caption: str, suggested: str, filt: str) -> Path | None:
    """A path chosen in a save dialog opened in ``widget.last_dir`` (which it then updates),
    or None when the user cancels."""
    path, _ = QtWidgets.QFileDialog.getSaveFileName(widget, caption, str(widget.last_dir / suggested), filt)
    if not path:
        return None
    widget.last_dir = Path(path).parent
    return Path(path)
