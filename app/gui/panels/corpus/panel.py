"""Corpus panel: add / paste / import sentences, a filterable table of the corpus, delete."""
from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.gui.corpus_service import CorpusService
from app.gui.importers import COMMON_ENCODINGS, needs_field
from app.gui.panels.corpus.column_dialog import ColumnDialog
from app.gui.panels.corpus.table_model import CorpusModel
from app.gui.widgets.line_edit import long_line_edit
from core.errors import EncoderscopeError

FILE_FILTER = "Sentences (*.txt *.csv *.jsonl);;Text (*.txt);;CSV (*.csv);;JSON lines (*.jsonl)"


class CorpusPanel(QWidget):
    count_changed = Signal(int)
    selection_changed = Signal(int)          # rows selected (Delete / Inspect need one or more)

    def __init__(self, state, service: CorpusService | None = None, parent=None):
        super().__init__(parent)
        self.state = state
        self.service = service or state.corpus or CorpusService(state)
        self.setAcceptDrops(True)
        self._dialogs = []

        self.add_edit = long_line_edit()
        self.add_edit.setObjectName("add_edit")
        self.add_edit.setPlaceholderText("Type a sentence and press Enter to add it to the corpus")
        self.add_edit.setClearButtonEnabled(True)
        self.add_button = QPushButton("Add")
        self.paste_button = QPushButton("Paste lines")
        self.paste_button.setToolTip("Add every non-empty line on the clipboard (Ctrl+Shift+V)")
        self.import_button = QPushButton("Import file…")
        self.import_button.setToolTip("Import a .txt, .csv or .jsonl file (or drop it on this panel)")

        self.filter_edit = QLineEdit()
        self.filter_edit.setObjectName("filter_edit")
        self.filter_edit.setPlaceholderText("Filter the corpus (substring, case-insensitive)")
        self.filter_edit.setClearButtonEnabled(True)
        self.count_label = QLabel()
        self.count_label.setObjectName("corpus_count")

        self.model = CorpusModel(self)
        self.table = QTableView()
        self.table.setObjectName("corpus_table")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 10)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(0, 70)
        header.setStretchLastSection(True)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)

        self.delete_button = QPushButton("Delete selected")
        self.delete_button.setObjectName("delete_button")
        self.delete_button.setEnabled(False)
        self.inspect_button = QPushButton("Inspect attention")
        self.inspect_button.setObjectName("inspect_button")
        self.inspect_button.setToolTip("Open the selected sentence in the attention inspector "
                                       "(or double-click a row)")
        self.inspect_button.setEnabled(False)
        self.walkthrough_button = QPushButton("Step by step")
        self.walkthrough_button.setObjectName("walkthrough_button")
        self.walkthrough_button.setToolTip("Follow the selected sentence through the encoder, step by step")
        self.walkthrough_button.setEnabled(False)
        self.walkthrough_button.clicked.connect(self.walkthrough_selected)
        self.reembed_button = QPushButton("Re-embed with current model")
        self.reembed_button.setToolTip("Recompute every vector with the model, weights and pooling chosen above")
        self.hint = QLabel("Drop .txt, .csv or .jsonl files here to import them")
        self.hint.setObjectName("hint")
        self.hint.setStyleSheet("color: palette(mid);")
        self.hint.setWordWrap(True)     # wraps rather than widening the window past its old minimum

        top = QHBoxLayout()
        top.addWidget(self.add_edit, 1)
        top.addWidget(self.add_button)
        top.addWidget(self.paste_button)
        top.addWidget(self.import_button)
        mid = QHBoxLayout()
        mid.addWidget(self.filter_edit, 1)
        mid.addWidget(self.count_label)
        bottom = QHBoxLayout()
        bottom.addWidget(self.delete_button)
        bottom.addWidget(self.inspect_button)
        bottom.addWidget(self.walkthrough_button)
        bottom.addWidget(self.reembed_button)
        bottom.addStretch(1)
        bottom.addWidget(self.hint)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addLayout(mid)
        lay.addWidget(self.table, 1)
        lay.addLayout(bottom)

        self._filter_timer = QTimer(self, singleShot=True, interval=120)
        self._filter_timer.timeout.connect(lambda: self.model.set_filter(self.filter_edit.text()))
        self.filter_edit.textChanged.connect(lambda _t: self._filter_timer.start())
        self.add_edit.returnPressed.connect(self.add_current)
        self.add_button.clicked.connect(self.add_current)
        self.paste_button.clicked.connect(self.paste_lines)
        self.import_button.clicked.connect(self.import_dialog)
        self.delete_button.clicked.connect(self.delete_selected)
        self.reembed_button.clicked.connect(self.reembed)
        self.inspect_button.clicked.connect(self.inspect_selected)
        self.table.doubleClicked.connect(lambda index: self.inspect_row(index.row()))
        self.table.selectionModel().selectionChanged.connect(self._on_selection)
        self.model.modelReset.connect(self._update_count)
        # a reset (delete, filter) drops the selection without selectionChanged: re-check it
        self.model.modelReset.connect(self._on_selection)
        self.model.rowsInserted.connect(self._update_count)

        self.service.rows_reset.connect(self.model.set_rows)
        self.service.rows_added.connect(self._append)
        self.service.rows_removed.connect(self.model.remove_ids)
        self.service.mismatch.connect(self.ask_reembed)
        self.service.ingest_done.connect(self._after_ingest)
        self.service.encoding_needed.connect(self.ask_encoding)
        self.state.busy.connect(self._on_busy)
        self._update_count()

    # ---- actions -------------------------------------------------------------------------------
    def add_current(self):
        text = self.add_edit.text().strip()
        if not text:
            return
        if self.service.add_texts([text], label="Adding a sentence") is not None:
            self.add_edit.clear()

    def paste_lines(self, text: str | None = None):
        from core.readers import collect, read_text
        text = QGuiApplication.clipboard().text() if not isinstance(text, str) else text
        got = collect(read_text(text or "", source="clipboard"))
        if not got.sentences:
            self.state.status.emit("The clipboard holds no text to add")
            return None
        if got.no_letters:
            self.state.status.emit(f"Skipped {got.no_letters} line(s) without any letter or digit")
        return self.service.add_texts([s.text for s in got.sentences],
                                      metadata=[s.metadata for s in got.sentences])

    def import_dialog(self):
        path, _ = QFileDialog.getOpenFileName(self, "Import sentences", str(Path.home()), FILE_FILTER)
        if path:
            self.import_file(path)

    def import_file(self, path, column: str | None = None):
        """Import a file; csv/jsonl without ``column`` first ask which column holds the text."""
        path = Path(path)
        if needs_field(path) and column is None:
            try:
                dialog = ColumnDialog(path, self)
            except (EncoderscopeError, OSError) as e:
                self.state.error.emit(str(e))
                return None
            dialog.accepted.connect(lambda: self.service.import_file(path, dialog.column))
            dialog.finished.connect(lambda _r: self._dialogs.remove(dialog) if dialog in self._dialogs else None)
            self._dialogs.append(dialog)
            dialog.open()
            return dialog
        return self.service.import_file(path, column)

    def ask_encoding(self, need):
        """The file is not UTF-8: offer the common encodings, then import it again with the one
        chosen (``need``: corpus_jobs.NeedsEncoding)."""
        dialog = QInputDialog(self)
        dialog.setObjectName("encoding_dialog")
        dialog.setWindowTitle(f"Import {Path(need.path).name}")
        dialog.setLabelText(f"{need.message}.\n\nRead it as:")
        dialog.setComboBoxItems(list(COMMON_ENCODINGS))
        dialog.setComboBoxEditable(False)
        dialog.setOkButtonText("Import")
        dialog.textValueSelected.connect(lambda enc: self.service.import_file(need.path, need.column, enc))
        dialog.finished.connect(lambda _r: self._dialogs.remove(dialog) if dialog in self._dialogs else None)
        self._dialogs.append(dialog)
        dialog.open()
        return dialog

    def selected_ids(self) -> list[int]:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        return [self.model.id_at(r) for r in rows]

    def inspect_row(self, row: int) -> None:
        """Send the sentence in table row ``row`` to the attention inspector."""
        if 0 <= row < self.model.rowCount():
            self.state.request_inspect(self.model.text_at(row))

    def inspect_selected(self) -> None:
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        if rows:
            self.inspect_row(rows[0])

    def walkthrough_selected(self) -> None:
        """Send the selected sentence to the "Step by step" tab."""
        rows = sorted({i.row() for i in self.table.selectionModel().selectedRows()})
        if rows:
            self.state.request_walkthrough(self.model.text_at(rows[0]))

    def delete_selected(self):
        ids = self.selected_ids()
        if ids:
            self.service.remove(ids)

    def reembed(self):
        self.service.reembed()

    def ask_reembed(self, store_model: str, new_model: str, count: int):
        box = QMessageBox(QMessageBox.Icon.Question, "Re-embed the corpus?",
                          f"<p>The corpus ({count:,} sentences) was embedded with<br>"
                          f"&nbsp;&nbsp;<b>{store_model}</b></p>"
                          f"<p>You chose<br>&nbsp;&nbsp;<b>{new_model}</b></p>"
                          "<p>Vectors from two models cannot be mixed. Re-embed every sentence with the new "
                          "choice (it runs in the background and can be cancelled), or keep the model the "
                          "corpus was built with?</p>", QMessageBox.StandardButton.NoButton, self)
        box.setTextFormat(Qt.TextFormat.RichText)
        box.setObjectName("reembed_box")
        self.reembed_yes = box.addButton("Re-embed", QMessageBox.ButtonRole.AcceptRole)
        self.reembed_no = box.addButton("Keep the corpus model", QMessageBox.ButtonRole.RejectRole)
        box.setDefaultButton(self.reembed_yes)
        box.finished.connect(lambda _r: self.service.answer_mismatch(box.clickedButton() is self.reembed_yes))
        self._reembed_box = box
        box.open()
        return box

    # ---- drag and drop -------------------------------------------------------------------------
    def dragEnterEvent(self, event):
        if event.mimeData().hasUrls() and any(u.isLocalFile() for u in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event):
        files = [u.toLocalFile() for u in event.mimeData().urls() if u.isLocalFile()]
        event.acceptProposedAction()
        if not files:
            return
        self.import_file(files[0])
        if len(files) > 1:     # one corpus job at a time: say so instead of dropping them silently
            self.state.status.emit(f"Importing {Path(files[0]).name} only: drop the other {len(files) - 1} "
                                   f"file(s) one at a time, after this import")

    # ---- state -> widgets ------------------------------------------------------------------------
    def _append(self, ids, texts):
        known = set(self.model._ids)
        new_ids, new_texts = [], []
        for i, t in zip(ids, texts):
            if i is not None and i not in known:
                known.add(i)
                new_ids.append(i)
                new_texts.append(t)
        self.model.append_rows(new_ids, new_texts)
        if new_ids and not self.model.filter_text:
            self.table.scrollToBottom()

    def _after_ingest(self, result):
        if result.skipped and result.added == 0 and not result.cancelled:
            self.state.error.emit(result.summary())

    def _on_selection(self, *_):
        rows = self.table.selectionModel().selectedRows()
        self.delete_button.setEnabled(bool(rows))
        self.inspect_button.setEnabled(len(rows) == 1)
        self.selection_changed.emit(len(rows))
        self.walkthrough_button.setEnabled(len(rows) == 1)

    def _on_busy(self, busy: bool):
        self.reembed_button.setEnabled(not self.service.busy)

    def _update_count(self, *_):
        total, shown = self.model.total(), self.model.rowCount()
        self.count_label.setText(f"{total:,} sentences" if shown == total else f"{shown:,} of {total:,} match")
        self.count_changed.emit(total)

    # ---- settings --------------------------------------------------------------------------------
    def restore(self, settings):
        self.filter_edit.setText(str(settings.value("corpus/filter", "") or ""))

    def save(self, settings):
        settings.setValue("corpus/filter", self.filter_edit.text())
