"""Help → About: versions of everything that matters, and the device in use."""
from __future__ import annotations

import platform
from importlib import metadata

from PySide6.QtWidgets import QMessageBox

from app.gui.logs import log_file


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def about_text(state) -> str:
    import PySide6
    import torch

    rows = [
        ("Encoderscope", _version("encoderscope")),
        ("Python", platform.python_version()),
        ("PySide6 / Qt", f"{PySide6.__version__} / {PySide6.QtCore.qVersion()}"),
        ("torch", torch.__version__),
        ("transformers", _version("transformers")),
        ("faiss-cpu", _version("faiss-cpu")),
        ("numpy", _version("numpy")),
        ("pyqtgraph", _version("pyqtgraph")),
        ("Corpus model", state.choice.describe()),
        ("Inspected model", state.inspect_choice.describe() if getattr(state, "inspect_choice", None)
         else "the corpus model"),
        ("Device", state.device_name or "loading …"),
        ("Log file", str(log_file())),
    ]
    body = "".join(f"<tr><td><b>{k}</b>&nbsp;&nbsp;</td><td>{v}</td></tr>" for k, v in rows)
    return ("<h3>Encoderscope</h3><p>See every moving part of a transformer encoder: embed, "
            f"search, inspect attention, fill masks.</p><table>{body}</table>")


def show_about(parent, state) -> QMessageBox:
    box = QMessageBox(parent)
    box.setObjectName("about_box")
    box.setWindowTitle("About Encoderscope")
    box.setTextFormat(PySide6_rich())
    box.setText(about_text(state))
    box.open()
    return box


def PySide6_rich():
    from PySide6.QtCore import Qt
    return Qt.TextFormat.RichText
