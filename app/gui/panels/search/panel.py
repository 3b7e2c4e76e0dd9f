"""Search panel: search as you type (debounced, in a worker, stale results dropped), k, results
with score bars; double-click or "Inspect attention" sends a hit to the attention inspector;
"Why?" (or the context menu) opens the Why view: the hit's score split over token pairs."""
from __future__ import annotations

import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.gui.corpus_jobs import search_job
from app.gui.follow_model import FollowModel
from app.gui.panels.search.results_model import ResultsModel
from app.gui.settings import as_int
from app.gui.widgets.line_edit import long_line_edit
from app.gui.widgets.score_delegate import ScoreBarDelegate
from app.gui.widgets.spin_box import spin_box

DEBOUNCE_MS = 10     # coalesces bursts (paste, auto-repeat); a search in flight coalesces the rest


def search_with(backend, store, pooling, query, k, seq=0):
    """Worker side: ``search_job`` with the model first, as FollowModel hands it."""
    return search_job(store, backend, pooling, query, k, seq)


class SearchPanel(QWidget):
    results_shown = Signal(object)     # SearchResult, after the table shows it

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self._seq = 0                  # number of the latest request (in each SearchResult)
        self.follow = FollowModel(state, "search", corpus=True)   # the corpus model: newest query wins
        self._typed_at = 0.0
        self.last_result = None

        self.query = long_line_edit(placeholder="Search the corpus by meaning — just type", object_name="query_edit")
        self.k = spin_box("k_spin", 1, 1000, 10, "k = ", "How many nearest sentences to show")
        self.inspect_button = QPushButton("Inspect attention")
        self.inspect_button.setObjectName("inspect_button")
        self.inspect_button.setToolTip("Open the selected hit in the attention inspector, compared with the query "
                                       "(or double-click a hit)")
        self.inspect_button.setEnabled(False)
        # ---- Why view (why_view.py): button + context menu; double-click stays "inspect"
        self.why_button = QPushButton("Why?")
        self.why_button.setObjectName("why_button")
        self.why_button.setToolTip("Why is the selected hit a hit? Its score split exactly over "
                                   "(query token, hit token) pairs")
        self.why_button.setEnabled(False)
        self.why_dialog = None         # app.gui.panels.why.view.WhyDialog, made on first use
        self.context_menu = None       # the last context menu shown (tests read its actions)
        self.walkthrough_button = QPushButton("Step by step")
        self.walkthrough_button.setObjectName("walkthrough_button")
        self.walkthrough_button.setToolTip("Follow the selected hit through the encoder, step by step")
        self.walkthrough_button.setEnabled(False)
        self.info = QLabel("Loading the model …")
        self.info.setObjectName("search_info")
        self.info.setWordWrap(True)

        self.results = ResultsModel(self)
        self.table = QTableView()
        self.table.setObjectName("results_table")
        self.table.setModel(self.results)
        self.table.setItemDelegateForColumn(1, ScoreBarDelegate(self.table))
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 14)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(0, 56)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Fixed)
        header.resizeSection(1, 170)
        header.setStretchLastSection(True)

        row = QHBoxLayout()
        row.addWidget(self.query, 1)
        row.addWidget(self.k)
        row.addWidget(self.inspect_button)
        row.addWidget(self.why_button)
        row.addWidget(self.walkthrough_button)
        lay = QVBoxLayout(self)
        lay.addLayout(row)
        lay.addWidget(self.info)
        lay.addWidget(self.table, 1)

        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self.search_now)
        self.query.textChanged.connect(self._on_typed)
        self.query.returnPressed.connect(self.search_now)
        self.k.valueChanged.connect(lambda _v: self._debounce.start())
        self.table.doubleClicked.connect(lambda index: self.inspect_row(index.row()))
        self.inspect_button.clicked.connect(self.inspect_selected)
        self.table.selectionModel().selectionChanged.connect(self._on_selection)
        self.why_button.clicked.connect(self.why_selected)
        self.walkthrough_button.clicked.connect(self.walkthrough_selected)
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._show_context_menu)
        self.follow.model_changed.connect(self._on_backend)
        state.corpus_changed.connect(self.search_now)
        state.job_started.connect(self._on_job_started)
        state.choice_changed.connect(lambda _c: self.search_now())

    # ---- searching ---------------------------------------------------------------------------------
    def _on_typed(self, _text):
        self._typed_at = time.perf_counter()
        self._debounce.start()

    def search_now(self):
        """Search for the current text now (or as soon as the search in flight returns)."""
        self._debounce.stop()
        text = self.query.text().strip()
        self._seq += 1
        self.follow.drop()             # whatever runs or waits was for an older query
        if not text:
            self.results.set_hits([])
            self._set_info(self._idle_info())
            return
        state = self.state
        if state.backend is None or state.store is None:
            self._set_info(self._loading_text())
            return
        if state.corpus is not None and state.corpus.compatible() is False:
            self.results.set_hits([])
            if state.corpus.busy:
                self._set_info("Re-embedding the corpus for the new model … search resumes when it is done")
            else:
                self._set_info("The corpus was embedded with another model or pooling: re-embed it "
                               "(Model → Re-embed, Ctrl+R) or switch back to search it.", error=True)
            return
        # while a search runs, the newest query waits (older waiting ones are dropped)
        self.follow.run(search_with, state.store, state.pooling, text, self.k.value(), self._seq, label="Search",
                        show_progress=False, wants_progress=False,
                        on_result=lambda result, _backend: self._on_result(result), on_error=self._on_error)

    def _on_result(self, result):
        self.last_result = result
        self.results.set_hits(result.hits)
        if result.hits:
            self.table.selectRow(0)
        total = self.state.corpus.count() if self.state.corpus is not None else 0
        self._set_info(f"{len(result.hits)} nearest of {total:,} sentences · {result.ms:.0f} ms · "
                       f"{self.state.choice.model} ({self.state.pooling} pooling), cosine similarity")
        self.results_shown.emit(result)

    def _on_error(self, message):
        self.results.set_hits([])
        self._set_info(message, error=True)

    def _set_info(self, text, error=False):
        self.info.setStyleSheet("color: #b00020;" if error else "")
        self.info.setText(text)

    def _loading_text(self) -> str:
        corpus = self.state.corpus
        if self.state.store is None and corpus is not None and corpus.busy and self.state.backend is not None:
            return ("Indexing the sample corpus with the default model (first start only) — "
                    "search opens when it is done")
        return "Loading the model and the corpus …"

    def _idle_info(self) -> str:
        if self.state.backend is None or self.state.store is None:
            return self._loading_text()
        return (f"Type to search {self.state.corpus.count():,} sentences by meaning "
                f"with {self.state.choice.model}")

    def _on_job_started(self, job):
        if job.key == "store" and not self.query.text().strip():
            self._set_info(self._idle_info())

    def _on_backend(self, backend):
        if backend is None:
            self._set_info(f"Loading {self.state.choice.model} …")
        else:
            self.search_now()

    # ---- inspector ---------------------------------------------------------------------------------
    def inspect_row(self, row: int):
        hit = self.results.hit(row)
        if hit is not None:
            self.state.request_inspect(hit.text, self.query.text().strip())

    def inspect_selected(self):
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.inspect_row(rows[0].row())

    # ---- why view ----------------------------------------------------------------------------------
    def _on_selection(self, *_):
        selected = self.table.selectionModel().hasSelection()
        self.inspect_button.setEnabled(selected)
        self.why_button.setEnabled(selected)
        self.walkthrough_button.setEnabled(selected)

    def why_row(self, row: int):
        """Open the Why view on hit ``row``: why it matched the query, pair by pair."""
        hit = self.results.hit(row)
        query = self.last_result.query if self.last_result is not None else self.query.text().strip()
        if hit is None or not query:
            return None
        if self.why_dialog is None:
            from app.gui.panels.why.view import WhyDialog
            self.why_dialog = WhyDialog(self.state, self.window())
        if getattr(self.state.store, "whitening", None) is not None:
            from core.evaluate.why import WHITENED_NOTE
            self.why_dialog.request(query, hit.text, None, WHITENED_NOTE.format(score=float(hit.score)))
        else:
            self.why_dialog.request(query, hit.text, float(hit.score))
        return self.why_dialog

    def why_selected(self):
        rows = self.table.selectionModel().selectedRows()
        return self.why_row(rows[0].row()) if rows else None

    def _show_context_menu(self, pos):
        index = self.table.indexAt(pos)
        if not index.isValid():
            return
        row = index.row()
        self.table.selectRow(row)
        menu = QMenu(self.table)
        menu.setObjectName("results_menu")
        menu.addAction("Why is this a hit?", lambda: self.why_row(row))
        menu.addAction("Inspect attention", lambda: self.inspect_row(row))
        menu.addAction("Step by step", self.walkthrough_selected)
        self.context_menu = menu
        menu.popup(self.table.viewport().mapToGlobal(pos))

    def walkthrough_selected(self):
        """Send the selected hit to the "Step by step" tab."""
        rows = self.table.selectionModel().selectedRows()
        hit = self.results.hit(rows[0].row()) if rows else None
        if hit is not None:
            self.state.request_walkthrough(hit.text)

    # ---- settings ----------------------------------------------------------------------------------
    def restore(self, settings):
        self.k.setValue(as_int(settings.value("search/k"), 10) or 10)
        self.query.setText(str(settings.value("search/query", "") or ""))

    def save(self, settings):
        settings.setValue("search/k", self.k.value())
        settings.setValue("search/query", self.query.text())
