"""A one-line text box that takes text of any length.

QLineEdit cuts typed and pasted text at 32,767 characters by default, without a word; a pasted
document must reach the model whole, so that the model's own limits (tokens, characters) are
the ones reported.
"""
from __future__ import annotations

from PySide6.QtWidgets import QLineEdit

UNLIMITED = 2**31 - 1     # QLineEdit's maxLength is an int


def long_line_edit(text: str = "", placeholder: str = "", object_name: str = "", on_enter=None) -> QLineEdit:
    """A sentence box: no length limit, a clear button, `on_enter` called on Enter."""
    edit = QLineEdit(text)
    edit.setMaxLength(UNLIMITED)
    edit.setClearButtonEnabled(True)
    if placeholder:
        edit.setPlaceholderText(placeholder)
    if object_name:
        edit.setObjectName(object_name)
    if on_enter is not None:
        edit.returnPressed.connect(on_enter)
    return edit
