"""The Map tab: every sentence of the corpus in 2-D (PCA or UMAP), coloured by k-means cluster.

Hover shows a sentence; a click selects it and offers Search like this / Step by step /
Attention; the current search query is a star and its hits are
ringed; a lasso lists the sentences inside it; Export PNG / CSV (the CSV `encoderscope map`
writes). The map is computed by index.map.corpus_map in a worker, again whenever the corpus
changes (at once if the tab is showing, else when it is next shown). With an SAE of the corpus
model open (Features tab), *Colour by feature* shades each sentence by a feature instead.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.gui.follow_model import FollowModel
from app.gui.panels.features.map_colour import FeatureColouring
from app.gui.panels.map.plot import MapPlot
from app.gui.widgets.spin_box import spin_box

MAX_LISTED = 500            # lasso selections longer than this list their first MAX_LISTED


def build_map_job(store, method, clusters, progress=None, cancel=None):
    from index.map.corpus_map import build_map
    return build_map(store, method=method, clusters=clusters, progress=progress, cancel=cancel)


def place_query_job(backend, pooling, projection, query, seq):
    """(seq, (2,) map position of the query): embedded like the search embeds it."""
    vector = backend.embed([query], pooling=pooling)[0]
    vector = vector / max(float(np.linalg.norm(vector)), 1e-12)   # stored vectors are unit
    return seq, projection.project(vector)[0]


class MapPanel(QWidget):
    search_requested = Signal(str)     # "Search like this": the main window fills the search box
    map_shown = Signal(object)         # index.map.corpus_map.CorpusMap, once drawn

    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self.map = None                # the CorpusMap on screen
        self.row_of: dict = {}         # store id -> row of the map
        self.selected_row = -1
        self.lasso_rows = np.zeros(0, np.int64)
        self._stale = True             # the corpus changed since the map was made
        self._query_seq = 0            # number of the latest search shown
        self.query_follow = FollowModel(state, "map-query", corpus=True)   # newest search's star wins
        self._last_search = None

        self.method = QComboBox()
        self.method.setObjectName("map_method")
        self.method.addItem("PCA", "pca")
        self.method.addItem("UMAP", "umap")
        if importlib.util.find_spec("umap") is None:
            from index.map.projection import UMAP_INSTALL
            self.method.model().item(1).setEnabled(False)
            self.method.setItemData(1, f"Needs umap-learn: {UMAP_INSTALL}", Qt.ItemDataRole.ToolTipRole)
        from index.map.projection import default_method
        default, self._default_note = default_method()    # UMAP where installed; the note says why not
        self.method.setCurrentIndex(self.method.findData(default))
        self.method.setToolTip("UMAP (the default): keeps each sentence's neighbours around it, slower; "
                               "PCA: exact and fast, but two axes keep little of the neighbourhoods")
        self.clusters = spin_box("map_clusters", 1, 50, 8, "clusters: ",
                                 "Number of k-means clusters: press Enter or Recompute to apply")
        self.recompute_button = QPushButton("Recompute")
        self.lasso_button = QPushButton("Lasso select")
        self.lasso_button.setCheckable(True)
        self.lasso_button.setToolTip("Drag around points to list their sentences (off: drag pans)")
        self.png_button = QPushButton("Export PNG…")
        self.csv_button = QPushButton("Export CSV…")
        self.info = QLabel("The map is drawn when the corpus is open")
        self.info.setObjectName("map_info")
        self.info.setWordWrap(True)

        self.plot = MapPlot()
        self.sentence = QLabel("Hover over a point to read its sentence; click to select it.")
        self.sentence.setObjectName("map_sentence")
        self.sentence.setWordWrap(True)
        self.sentence.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.search_button = QPushButton("Search like this")
        self.attention_button = QPushButton("Attention")
        self.attention_button.setToolTip("Open the selected sentence in the attention inspector")
        self.walk_button = QPushButton("Step by step")
        self.walk_button.setToolTip("Follow the selected sentence through the encoder, step by step")
        self.walk_button.clicked.connect(self.walk_selected)
        self.lasso_label = QLabel("Selection: none (Lasso select, then drag around points)")
        self.lasso_list = QListWidget()
        self.lasso_list.setObjectName("map_lasso_list")

        self.feature_colour = FeatureColouring(state)    # sentences coloured by an SAE feature (Features tab)
        self.feature_colour.values_ready.connect(self.plot.set_values)
        self.feature_colour.said.connect(self._set_info)
        top = QHBoxLayout()
        for w in (self.method, self.clusters, self.recompute_button, self.lasso_button,
                  self.png_button, self.csv_button, self.feature_colour):
            top.addWidget(w)
        top.addStretch(1)
        side = QWidget()
        side_lay = QVBoxLayout(side)
        side_lay.setContentsMargins(0, 0, 0, 0)
        box = QGroupBox("Sentence")
        box_lay = QVBoxLayout(box)
        box_lay.addWidget(self.sentence)
        buttons = QHBoxLayout()
        for b in (self.search_button, self.walk_button, self.attention_button):
            buttons.addWidget(b)
        box_lay.addLayout(buttons)
        side_lay.addWidget(box)
        side_lay.addWidget(self.lasso_label)
        side_lay.addWidget(self.lasso_list, 1)
        split = QSplitter()
        split.addWidget(self.plot)
        split.addWidget(side)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        split.setSizes([900, 320])
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.info)
        lay.addWidget(split, 1)

        self._enable_selection_actions(False)
        self.recompute_button.clicked.connect(self.recompute)
        self.method.activated.connect(lambda _i: self.recompute())
        self.clusters.editingFinished.connect(self._clusters_edited)
        self.lasso_button.toggled.connect(self._set_lasso)
        self.png_button.clicked.connect(self.export_png_dialog)
        self.csv_button.clicked.connect(self.export_csv_dialog)
        self.search_button.clicked.connect(self.search_selected)
        self.attention_button.clicked.connect(self.inspect_selected)
        self.lasso_list.itemDoubleClicked.connect(
            lambda item: self.select_row(int(item.data(Qt.ItemDataRole.UserRole))))
        self.plot.hovered.connect(self.hover_row)
        self.plot.clicked.connect(self.select_row)
        self.plot.lassoed.connect(self.set_lasso_rows)
        state.corpus_changed.connect(self.mark_stale)     # set_store emits it too

    # ---- computing ----------------------------------------------------------------------------
    def mark_stale(self) -> None:
        """The corpus changed: recompute now if the tab shows, else when it is next shown."""
        self._stale = True
        if self.isVisible():
            self.recompute()

    def showEvent(self, event):
        super().showEvent(event)
        if self._stale:
            self.recompute()
        elif self._last_search is not None:
            self._place_query()

    def _clusters_edited(self):
        if self.map is None or self.clusters.value() != len(self.map.clusters):
            self.recompute()

    def recompute(self) -> None:
        store = self.state.store
        if store is None:
            self.state.drop_waiting("map")
            self.map = None
            self.plot.clear_points()
            self._set_info("No corpus is open yet")
            return
        self._stale = False
        method = self.method.currentData()
        self._set_info(f"Mapping the corpus ({method.upper()}) …")
        # while one runs, only the newest request waits (state.run_latest)
        self.state.run_latest("map", build_map_job, store, method, self.clusters.value(),
                              label="Mapping the corpus", on_result=self._on_map_job,
                              on_error=lambda msg: self._set_info(msg, error=True),
                              on_cancelled=lambda: self._set_info("Mapping cancelled: press Recompute "
                                                                  "to draw the map"))

    def _on_map_job(self, m) -> None:
        if not self.state.has_waiting("map"):     # else stale: the newer request runs next
            self.set_map(m)

    def set_map(self, m) -> None:
        """Draw a CorpusMap (what the worker returns)."""
        self.map = m
        self.row_of = {int(i): r for r, i in enumerate(m.ids.tolist())}
        self.selected_row = -1
        self.plot.set_points(m.xy, m.cluster, [f"{c.id}: {c.label} ({c.size:,})" for c in m.clusters])
        self.feature_colour.set_texts(m.texts)
        self.set_lasso_rows(np.zeros(0, np.int64))
        self._enable_selection_actions(False)
        self.sentence.setText("Hover over a point to read its sentence; click to select it.")
        quality = m.describe_quality()
        secs = sum(m.seconds.values())
        fallback = [self._default_note] if m.method == "pca" and self._default_note else []
        notes = "".join(f" · {n}" for n in m.notes + fallback)
        self._set_info(f"{len(m):,} sentences · {m.method.upper()}{' · ' + quality if quality else ''} · "
                       f"{len(m.clusters)} k-means clusters · computed in {secs:.1f} s{notes}")
        if self._last_search is not None:
            self.show_search(self._last_search)
        self.map_shown.emit(m)

    # ---- pointer --------------------------------------------------------------------------------
    def hover_row(self, row: int) -> None:
        self.plot.show_tip(row, self.map.texts[row] if row >= 0 and self.map is not None else "")

    def select_row(self, row: int) -> None:
        """Select a row of the map (-1: nothing); its sentence shows beside the map."""
        if self.map is None:
            return
        self.selected_row = row
        self.plot.mark_selected(row)
        self._enable_selection_actions(row >= 0)
        if row < 0:
            self.sentence.setText("Hover over a point to read its sentence; click to select it.")
            return
        c = self.map.clusters[int(self.map.cluster[row])]
        self.sentence.setText(f"{self.map.texts[row]}\n\n(id {int(self.map.ids[row])} · cluster "
                              f"{c.id}: {c.label})")

    def search_selected(self) -> None:
        if self._selected_text():
            self.search_requested.emit(self._selected_text())

    def inspect_selected(self) -> None:
        if self._selected_text():
            self.state.request_inspect(self._selected_text(), "")

    def walk_selected(self) -> None:
        if self._selected_text():
            self.state.request_walkthrough(self._selected_text())

    def _selected_text(self) -> str:
        return self.map.texts[self.selected_row] if self.map is not None and self.selected_row >= 0 else ""

    def _enable_selection_actions(self, on: bool) -> None:
        for b in (self.search_button, self.walk_button, self.attention_button):
            b.setEnabled(on)

    def _set_lasso(self, on: bool) -> None:
        self.plot.vb.lasso_mode = on

    def set_lasso_rows(self, rows) -> None:
        """List the sentences of rows (a lasso's result)."""
        self.lasso_rows = np.asarray(rows, np.int64)
        self.lasso_list.clear()
        self.plot.mark_lassoed(self.lasso_rows)
        if not len(self.lasso_rows):
            self.lasso_label.setText("Selection: none (Lasso select, then drag around points)")
            return
        shown = self.lasso_rows[:MAX_LISTED]
        more = f", the first {MAX_LISTED} listed" if len(self.lasso_rows) > MAX_LISTED else ""
        self.lasso_label.setText(f"Selection: {len(self.lasso_rows):,} sentences{more} "
                                 "(double-click one to select it)")
        for row in shown.tolist():
            self.lasso_list.addItem(self.map.texts[row])
            self.lasso_list.item(self.lasso_list.count() - 1).setData(Qt.ItemDataRole.UserRole, row)

    # ---- the search on the map ------------------------------------------------------------------
    def show_search(self, result) -> None:
        """Ring a search's hits and place its query (app.gui.corpus_jobs.SearchResult)."""
        self._last_search = result
        if self.map is None:
            return
        rows = [self.row_of[h.id] for h in result.hits if h.id in self.row_of]
        self.plot.mark_hits(rows)
        self.plot.mark_query(None)
        self._query_seq += 1
        self.query_follow.drop()        # a star on its way is an older search's
        if self.isVisible():             # else when the tab is shown: typing embeds no extra
            self._place_query()

    def _place_query(self) -> None:
        """Embed the last search's query (in a worker) and put its star on the map."""
        result, backend, corpus = self._last_search, self.state.backend, self.state.corpus
        if (self.map is None or backend is None or not result.query
                or (corpus is not None and corpus.compatible() is False)):
            return
        self.query_follow.run(place_query_job, self.state.pooling, self.map.projection, result.query,
                              self._query_seq, label="Placing the query on the map", show_progress=False,
                              wants_progress=False, on_result=lambda placed, _b: self._on_query_placed(placed),
                              on_error=lambda msg: self.state.status.emit(msg))

    def _on_query_placed(self, placed) -> None:
        _seq, xy = placed
        self.plot.mark_query(xy)

    # ---- export -------------------------------------------------------------------------------------
    def export_png(self, path) -> None:
        from pyqtgraph import exporters
        exporters.ImageExporter(self.plot.plotItem).export(str(path))

    def export_csv(self, path) -> None:
        from index.map.corpus_map import write_map_csv
        write_map_csv(path, self.map)

    def export_png_dialog(self) -> None:
        self._export("Export the map as PNG", "corpus-map.png", "PNG image (*.png)", self.export_png)

    def export_csv_dialog(self) -> None:
        self._export("Export the map as CSV", "corpus-map.csv", "CSV (*.csv)", self.export_csv)

    def _export(self, caption, name, filt, write) -> None:
        if self.map is None:
            self._set_info("Nothing to export yet: the map is not drawn", error=True)
            return
        path, _ = QFileDialog.getSaveFileName(self, caption, str(Path.home() / name), filt)
        if path:
            try:
                write(path)
            except OSError as e:
                self.state.error.emit(f"Could not write {path}: {e}")
                return
            self.state.status.emit(f"Saved {path}")

    # ---- remembered across restarts (app/gui/panel_state.py) ------------------------------------
    def save_state(self) -> dict:
        return {"clusters": self.clusters.value(), "method": self.method.currentData()}

    def restore_state(self, saved: dict) -> None:
        clusters = saved.get("clusters")
        if isinstance(clusters, int) and self.clusters.minimum() <= clusters <= self.clusters.maximum():
            self.clusters.setValue(clusters)
        row = self.method.findData(saved.get("method"))
        if row >= 0 and self.method.model().item(row).isEnabled():
            self.method.setCurrentIndex(row)
        if self.map is not None and (self.clusters.value(), self.method.currentData()) != (
                len(self.map.clusters), self.map.method):
            self.mark_stale()

    def _set_info(self, text: str, error: bool = False) -> None:
        self.info.setStyleSheet("color: #b00020;" if error else "")
        self.info.setText(text)
