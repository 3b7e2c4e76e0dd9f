"""A page's question, how to read its answer, and a "what is this?" link to its section of the docs.

    line = QuestionLine("Where does the difference live?", "Each cell patches one site …",
                        "causal.md", "1. Patching sweeps")
    line.opened.connect(...)          # the section dialog, after it is shown (tests)

The link opens the section (read from the source tree's docs/ folder, rendered as Markdown) in a
dialog inside the app: no browser, no network. Where the docs are not installed (a wheel), the
dialog names the file and section instead.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from PySide6 import QtCore, QtWidgets

DOCS = Path(__file__).resolve().parents[3] / "docs"


def doc_section(doc: str, title: str, docs: Path = DOCS) -> str | None:
    """The Markdown of section ``title`` ('## title' up to the next '## '), or None when absent."""
    try:
        text = (docs / doc).read_text(encoding="utf-8")
    except OSError:
        return None
    match = re.search(rf"^## {re.escape(title)}\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    return None if match is None else f"## {title}\n{match.group(1).strip()}\n"


class QuestionLine(QtWidgets.QLabel):
    opened = QtCore.Signal(object)            # the dialog showing the section

    def __init__(self, question: str, how_to_read: str, doc: str, section: str, parent=None):
        super().__init__(parent)
        self.doc, self.section = doc, section
        self.setObjectName("question_line")
        self.setWordWrap(True)
        self.setTextFormat(QtCore.Qt.TextFormat.RichText)
        self.setText(f"<b>{html.escape(question)}</b> {html.escape(how_to_read)} "
                     f"<a href='#doc'>what is this?</a>")
        self.setToolTip(f"docs/{doc}, section “{section}”")
        self.setOpenExternalLinks(False)
        self.linkActivated.connect(lambda _href: self.open_section())
        self.dialog = None

    def open_section(self) -> QtWidgets.QDialog:
        """The section in a dialog (made once, shown again on later clicks)."""
        if self.dialog is None:
            self.dialog = QtWidgets.QDialog(self)
            self.dialog.setObjectName("doc_section_dialog")
            self.dialog.setWindowTitle(f"{self.section} — docs/{self.doc}")
            self.dialog.resize(720, 560)
            lay = QtWidgets.QVBoxLayout(self.dialog)
            self.browser = QtWidgets.QTextBrowser()
            self.browser.setOpenExternalLinks(False)
            text = doc_section(self.doc, self.section)
            if text is None:
                self.browser.setPlainText(f"This is explained in docs/{self.doc}, section “{self.section}”, "
                                          "in Encoderscope's source repository.")
            else:
                self.browser.setMarkdown(text)
            lay.addWidget(self.browser)
            close = QtWidgets.QDialogButtonBox(QtWidgets.QDialogButtonBox.StandardButton.Close)
            close.rejected.connect(self.dialog.close)
            lay.addWidget(close)
        self.dialog.show()
        self.dialog.raise_()
        self.opened.emit(self.dialog)
        return self.dialog
