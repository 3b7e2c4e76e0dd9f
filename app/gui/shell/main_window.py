"""The main window: the corpus-model and "Inspect with" toolbars; the Search and Corpus tabs and
the tabs built when first needed (Attention, Step by step, Fill-mask, Train, Map); menus; a
status bar with the device in use, the corpus count and the running job's progress."""
from __future__ import annotations

import importlib
import os

from PySide6.QtCore import QByteArray, Qt, QTimer, QUrl
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMessageBox,
    QTabWidget,
)

from app.gui import panel_state
from app.gui.corpus_service import SAMPLE_STORE, CorpusService
from app.gui.logs import log, log_dir, setup_logging
from app.gui.panels.corpus.panel import CorpusPanel
from app.gui.panels.search.panel import SearchPanel
from app.gui.settings import as_int, open_settings, stores_dir
from app.gui.shell.inspect_bar import InspectBar
from app.gui.shell.menus import build_menus
from app.gui.shell.model_bar import ModelBar
from app.gui.shell.panel_tabs import LazyPanels, plain_holder, put_in_holder, scroll_holder
from app.gui.state import AppState, ModelChoice
from app.gui.widgets.job_progress import JobProgress
from app.gui.widgets.status_message import StatusMessage
from app.gui.widgets.wheel_guard import WheelGuard
from index.store.location import LOCATION_ENV

TITLE = "Encoderscope"



# The panels built when first needed (app/gui/shell/panel_tabs.py): each imports pyqtgraph, so its module is
# imported by its factory, not at start-up. Tab title -> factory(state) -> the panel.
def _lazy(module: str, name: str):
    """factory(state) -> the panel `name` of `module`, imported when the factory first runs."""
    def build(state):
        return getattr(importlib.import_module(module), name)(state)
    return build


OPTIONAL_PANELS = {"Attention": _lazy("app.gui.panels.attention.panel", "AttentionPanel"),
                   "Step by step": _lazy("app.gui.panels.walkthrough.panel", "WalkthroughPanel"),
                   "Fill-mask": _lazy("app.gui.panels.fillmask.panel", "FillMaskPanel"),
                   "Intervene": _lazy("app.gui.panels.intervene.panel", "InterventionPanel"),
                   "Causal": _lazy("app.gui.panels.causal.panel", "CausalPanel"),
                   "Features": _lazy("app.gui.panels.features.panel", "FeaturesPanel"),
                   "Train": _lazy("app.gui.panels.train.lab", "TrainLab")}  # Run, Runs, Experiments pages
MAP_PANEL = {"Map": _lazy("app.gui.panels.map.panel", "MapPanel")}
PREBUILD_DELAY_MS = 1500   # after the corpus model loaded, build the unbuilt panels one at a time


class MainWindow(QMainWindow):
    def __init__(self, state: AppState | None = None, settings=None, parent=None):
        super().__init__(parent)
        setup_logging()
        WheelGuard.install(QApplication.instance())     # the wheel scrolls forms, never a box it passes
        self.settings = settings or open_settings()
        self.state = state or AppState(choice=self._saved_choice())
        self.setWindowTitle(TITLE)
        self.setObjectName("main_window")
        self.resize(1200, 780)
        self._error_boxes: list[QMessageBox] = []
        self.tour = None                 # the Start here tour, made when first shown
        self._patch_failures_followed = False   # the Intervene tab's refusals reach Step by step

        self.model_bar = ModelBar(self.state, self)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.model_bar)
        # the inspected model, apart from the corpus model: its own row
        self.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
        self.inspect_bar = InspectBar(self.state, self)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.inspect_bar)
        self.state.set_inspect_choice(self._saved_inspect_choice())

        self.tabs = QTabWidget()
        self.tabs.setObjectName("tabs")
        self.tabs.setDocumentMode(True)
        self.service = CorpusService(self.state, self)
        self.search_panel = SearchPanel(self.state)
        self.corpus_panel = CorpusPanel(self.state, self.service)
        self.tabs.addTab(self.search_panel, "Search")
        self.tabs.addTab(self.corpus_panel, "Corpus")
        # the inspector and training panels, each in a scrolling tab, and the Map: built when
        # first shown or asked for (app/gui/shell/panel_tabs.py), so the window shows without pyqtgraph
        self.optional_panels = LazyPanels(OPTIONAL_PANELS, self._build_panel)
        self._map = LazyPanels(MAP_PANEL, self._build_panel)
        self._panel_tabs = {}
        for title in OPTIONAL_PANELS:
            # the training lab fits the window (its settings scroll on their own, its plots take
            # the height left); in a scrolling tab its plots' natural heights made the page taller
            # than the window, the newest part of a curve and Start below the fold
            name = panel_object_name(title)
            fits = title in ("Train", "Intervene", "Causal", "Features")
            self._panel_tabs[title] = plain_holder(f"{name}_tab") if fits else scroll_holder(f"{name}_scroll")
            self.tabs.addTab(self._panel_tabs[title], title)
        # ---- corpus map: the Map tab follows the search and feeds it back ----
        self._panel_tabs["Map"] = plain_holder("map_tab")
        self.tabs.addTab(self._panel_tabs["Map"], "Map")
        self._last_search = None       # the latest search shown, for a Map built after it
        self.search_panel.results_shown.connect(self._on_results)
        # ---- end corpus map ----
        self.tabs.currentChanged.connect(self._build_current)
        self._prebuild = QTimer(self)
        self._prebuild.setSingleShot(True)
        self._prebuild.timeout.connect(self._prebuild_next)
        self.setCentralWidget(self.tabs)

        self._build_status_bar()
        build_menus(self)

        self.state.status.connect(lambda m: self.status_message.show_message(m, 12000))
        self.state.error.connect(self.show_error)
        self.state.backend_changed.connect(self._on_backend)
        self.state.choice_changed.connect(self._on_choice)
        self.state.inspect_choice_changed.connect(lambda _c: self._on_choice(self.state.choice))
        self.state.inspect_requested.connect(self._on_inspect)
        self.state.walkthrough_requested.connect(self._on_walkthrough)
        self.state.store_changed.connect(self._on_store)
        self.corpus_panel.count_changed.connect(
            lambda n: self.count_label.setText(f"  {n:,} sentences  "))
        self._on_choice(self.state.choice)
        self._on_backend(self.state.backend)
        self._restore()

    # ---- building ---------------------------------------------------------------------------
    def _build_status_bar(self):
        bar = self.statusBar()
        self.job_progress = JobProgress(self.state)
        self.count_label = QLabel()
        self.count_label.setObjectName("count_label")
        self.model_label = QLabel()
        self.device_label = QLabel()
        self.device_label.setObjectName("device_label")
        self.device_label.setToolTip("The device the model runs on")
        self.status_message = StatusMessage()
        bar.addWidget(self.status_message, 1)
        bar.addPermanentWidget(self.job_progress)
        bar.addPermanentWidget(self.count_label)
        bar.addPermanentWidget(self.model_label)
        bar.addPermanentWidget(self.device_label)

    # ---- Start here (app/gui/tour/guide.py) ---------------------------------------------------------------
    def show_tour(self):
        """Help → Start here: the tour from its first stop."""
        if self.tour is None:
            from app.gui.tour.guide import Tour
            self.tour = Tour(self, self.settings)
        self.tour.start()
        return self.tour

    def maybe_show_tour(self):
        """At start-up: the tour, unless its "Don't show this again" was ticked."""
        from app.gui.tour.guide import should_show_at_start
        return self.show_tour() if should_show_at_start(self.settings) else None

    # ---- panels built when needed (start-up) ------------------------------------------------------
    @property
    def map_panel(self):
        return self._map["Map"]

    def _open_patch(self, a: str, b: str, site: str) -> None:
        """A patching-sweep cell: that one patch, applied in the Intervene tab (the app's
        intervention), and walked in Step by step at the site's layer (and head)."""
        from core.intervene.spec import parse_site
        panel = self.optional_panels["Intervene"]
        panel.text_edit.setText(a)
        panel.editor.text_b.setText(b)
        panel.editor.sites.setText(site)
        walk = self.optional_panels["Step by step"]
        if not self._patch_failures_followed:     # once: a unique connection silently fails on a wrapped slot
            panel.failed.connect(walk.patch_failed)
            self._patch_failures_followed = True
        walk.follow_patch(a, parse_site(site)[0], applying=True)   # before apply: it may fail at once
        panel.apply()
        self.tabs.setCurrentWidget(self._panel_tabs["Step by step"])

    def _walk_cuts(self, text: str, cuts) -> None:
        """The Causal tab's Edge cuts: its sentence walked in Step by step with those edges cut."""
        self.optional_panels["Step by step"].follow_cuts(text, cuts)
        self.tabs.setCurrentWidget(self._panel_tabs["Step by step"])

    def _cut_edge(self, text: str, layer: int, head, query: int, key: int) -> None:
        """An Attention heatmap cell: that edge cut in the Causal tab (its Edge cuts page shows the effect)."""
        self.optional_panels["Causal"].add_cut(text, layer, head, query, key)
        where = f"{layer + 1}" if head is None else f"{layer + 1}.{head + 1}"
        self.state.status.emit(f"Attention edge {where}: token {query} → {key} cut: the Causal tab's Edge cuts "
                               "page shows what it changes (the link beside the heatmap opens it)")

    def _cuts_shown(self, page: str, result) -> None:
        """The Edge cuts page's cuts, crossed out on the Attention tab's heatmap of their sentence."""
        if page == "cuts" and self.optional_panels.built("Attention"):
            self.optional_panels["Attention"].mark_cuts(result.text, result.spec.cuts)

    def _show_edge_cuts(self) -> None:
        causal = self.optional_panels["Causal"]
        causal.pages.setCurrentWidget(causal.cuts_view)
        self.show_panel("Causal")

    def _build_panel(self, title: str):
        """Build the panel of tab ``title`` into its holder (LazyPanels calls this once)."""
        panel = {**OPTIONAL_PANELS, **MAP_PANEL}[title](self.state)
        if title in OPTIONAL_PANELS:
            panel.setObjectName(panel_object_name(title))
        put_in_holder(self._panel_tabs[title], panel)
        panel_state.restore(self.settings, title, panel)
        if title == "Causal":
            panel.patch_requested.connect(self._open_patch)
            panel.cuts_walk_requested.connect(self._walk_cuts)
            panel.shown.connect(self._cuts_shown)
        if title == "Attention":
            panel.edge_clicked.connect(lambda *edge: self._cut_edge(*edge))
            panel.show_cuts_requested.connect(self._show_edge_cuts)
        if title in MAP_PANEL:
            panel.search_requested.connect(self.search_for)
            if self._last_search is not None:
                panel.show_search(self._last_search)
        return panel

    def _panels_of(self, title: str):
        return self._map if title in MAP_PANEL else self.optional_panels

    def _build_current(self, index: int):
        title = self.tabs.tabText(index)
        if title in self._panel_tabs:
            self._panels_of(title)[title]

    def _prebuild_next(self):
        """Idle time after the model loaded: build one more panel, then yield to events; once
        all are built, load the model's transformers tokenizer in a worker."""
        for panels in (self.optional_panels, self._map):
            title = panels.next_unbuilt()
            if title is not None:
                panels[title]
                self._prebuild.start(0)
                return
        self._warm_tokenizer()

    def _warm_tokenizer(self):
        """Embedding runs on the kept tokenizer pipeline (core/encoder/tokenizer.py), so the start skipped
        importing transformers; Why, Attention, Step by step and Fill-mask need the transformers
        tokenizer: load it now, in the background, rather than on their first request (~1 s)."""
        tokens = getattr(self.state.backend, "model_tokenizer", None)
        if tokens is None or tokens.loaded:
            return
        self.state.run("tokenizer", lambda progress=None, cancel=None: tokens.hf,
                       label="Loading the tokenizer", show_progress=False, wants_progress=False,
                       on_error=lambda e: log.warning("loading the transformers tokenizer: %s", e))

    def _on_results(self, result):
        self._last_search = result
        if self._map.built("Map"):
            self.map_panel.show_search(result)

    def _on_walkthrough(self, text: str):
        # a panel built now missed this signal (it connects in its constructor): hand it over
        fresh = not self.optional_panels.built("Step by step")
        panel = self.optional_panels["Step by step"]
        if fresh:
            panel.request(text)
        self.show_panel("Step by step")

    # ---- state -> widgets ---------------------------------------------------------------------
    def _on_choice(self, choice: ModelChoice):
        inspected = self.state.inspect_choice
        self.model_label.setText(f"  Corpus: {_short(choice.model)} · {choice.pooling}"
                                 + (f" · Inspecting: {_short(inspected.model)}"
                                    + (" (transformers)" if inspected.backend == "hf" else "")
                                    if inspected else "") + "  ")
        self.model_label.setToolTip(f"Corpus model (search): {choice.describe()}\nInspected model "
                                    f"(Attention, Fill-mask): {inspected.describe() if inspected else 'the same'}")

    def _on_backend(self, backend):
        if backend is None:
            self.device_label.setText("  Device: loading …  ")
            return
        self._prebuild.start(PREBUILD_DELAY_MS)    # unbuilt panels, then the tokenizer
        self.device_label.setText(f"  Device: {getattr(backend, 'device_name', '?')} · "
                                  f"{getattr(backend, 'precision', '?')}  ")
        self.device_label.setToolTip("The device the model runs on, and the precision of its embeddings: "
                                     + str(getattr(backend, "precision_note", "")))
        for key, act in self.precision_actions.items():
            act.setChecked(key == self.state.choice.precision)

    def _on_store(self, store):
        loc = self.service.location if store is not None else None
        self.setWindowTitle(f"{TITLE} — {store_title(loc)}" if loc is not None else TITLE)

    def _on_inspect(self, text: str, compare_with: str):
        tab = self._panel_tabs.get("Attention")
        if tab is not None:
            fresh = not self.optional_panels.built("Attention")
            panel = self.optional_panels["Attention"]
            if fresh:   # built now: it missed this signal (it connects in its constructor)
                panel.request(text, compare_with)
            self.tabs.setCurrentWidget(tab)
        else:
            self.status_message.show_message("The attention inspector is not installed in this build", 12000)

    def show_error(self, message: str):
        log.warning("shown to the user: %s", message)
        box = QMessageBox(QMessageBox.Icon.Warning, TITLE, message, QMessageBox.StandardButton.Ok, self)
        box.setObjectName("error_box")
        box.setWindowModality(Qt.WindowModality.WindowModal)
        box.finished.connect(lambda *_: self._error_boxes.remove(box) if box in self._error_boxes else None)
        self._error_boxes.append(box)
        box.open()   # not exec(): never blocks the event loop (jobs keep reporting)

    def show_panel(self, title: str) -> bool:
        """Bring the tab called ``title`` (Search, Corpus, Attention, Fill-mask, Train) forward."""
        for i in range(self.tabs.count()):
            if self.tabs.tabText(i) == title:
                self.tabs.setCurrentIndex(i)
                return True
        return False

    def set_precision(self, precision: str) -> None:
        """Auto / fp32 / bf16 for embeddings. Vectors of either precision share a store (same
        model, cosine >= 0.9999), so this never asks to re-embed the corpus."""
        if precision != self.state.choice.precision:
            self.state.set_choice(self.state.choice.with_(precision=precision))

    def _on_undo_changed(self, n: int):
        self.undo_delete_action.setEnabled(n > 0)
        self.undo_delete_action.setText(f"&Undo delete ({n:,} sentence{'s' if n != 1 else ''})" if n
                                        else "&Undo delete")

    def delete_selected(self):
        if self.tabs.currentWidget() is self.corpus_panel:
            self.corpus_panel.delete_selected()

    def focus_search(self):
        self.tabs.setCurrentWidget(self.search_panel)
        self.search_panel.query.setFocus()
        self.search_panel.query.selectAll()

    def search_for(self, text: str):
        """Show the Search tab searching for ``text`` (the Map's "Search like this")."""
        self.focus_search()
        self.search_panel.query.setText(text)
        self.search_panel.search_now()

    def focus_add(self):
        self.tabs.setCurrentWidget(self.corpus_panel)
        self.corpus_panel.add_edit.setFocus()

    def open_corpus_dialog(self):
        folder = QFileDialog.getExistingDirectory(self, "Open a corpus folder", str(stores_dir()))
        if folder:
            self.service.open(folder, sample_if_new=False)

    def open_location_dialog(self):
        current = str(self.service.location) if self.service.location is not None else ""
        text, ok = QInputDialog.getText(
            self, "Open a corpus location",
            "A folder, milvus-lite:FOLDER (embedded Milvus Lite) or http(s)://HOST:PORT\n"
            "(a Milvus server; its token is read from $ENCODERSCOPE_MILVUS_TOKEN).\n"
            "A location without a corpus gets a new, empty one for the current model.",
            QLineEdit.EchoMode.Normal, current)
        if ok and text.strip():
            self.service.open(text.strip(), sample_if_new=False)

    def open_sample(self):
        self.service.open(stores_dir() / SAMPLE_STORE)

    def open_log_folder(self):
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir())))

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self, store_folder=None):
        """Load the model and open a store, both in workers: ``store_folder`` (any store
        location), else $ENCODERSCOPE_STORE, else the last one, else the bundled sample."""
        location = (store_folder or os.environ.get(LOCATION_ENV) or self.settings.value("store/folder")
                    or (stores_dir() / SAMPLE_STORE))
        self.service.start(location)

    def _saved_choice(self) -> ModelChoice:
        s = self.settings
        default = ModelChoice()
        return ModelChoice(model=str(s.value("model/name", default.model)),
                           backend=str(s.value("model/backend", default.backend)),
                           pooling=str(s.value("model/pooling", default.pooling)),
                           device=str(s.value("model/device", default.device)),
                           precision=str(s.value("model/precision", default.precision)))

    def _saved_inspect_choice(self) -> ModelChoice | None:
        """The inspected model saved by save_settings; None: the corpus model."""
        model = str(self.settings.value("inspect/model", "") or "")
        if not model:
            return None
        return self.state.choice.with_(model=model, backend=str(self.settings.value("inspect/backend", "scratch")))

    def _restore(self):
        geometry = self.settings.value("window/geometry")
        if isinstance(geometry, QByteArray) and not geometry.isEmpty():
            self.restoreGeometry(geometry)
        state = self.settings.value("window/state")
        if isinstance(state, QByteArray) and not state.isEmpty():
            self.restoreState(state)
        self.tabs.setCurrentIndex(min(as_int(self.settings.value("window/tab"), 0), self.tabs.count() - 1))
        self.search_panel.restore(self.settings)
        self.corpus_panel.restore(self.settings)

    def save_settings(self):
        s = self.settings
        s.setValue("window/geometry", self.saveGeometry())
        s.setValue("window/state", self.saveState())
        s.setValue("window/tab", self.tabs.currentIndex())
        c = self.state.choice
        s.setValue("model/name", c.model)
        s.setValue("model/backend", c.backend)
        s.setValue("model/pooling", c.pooling)
        s.setValue("model/device", c.device)
        s.setValue("model/precision", c.precision)
        inspected = self.state.inspect_choice
        s.setValue("inspect/model", inspected.model if inspected else "")
        s.setValue("inspect/backend", inspected.backend if inspected else "")
        if self.service.location is not None:
            s.setValue("store/folder", str(self.service.location))
        self.search_panel.save(s)
        self.corpus_panel.save(s)
        for panels in (self.optional_panels, self._map):
            for title in panels:
                if panels.built(title):     # an unbuilt panel keeps the state saved before
                    panel_state.save(s, title, panels[title])
        s.sync()

    def closeEvent(self, event):
        self.save_settings()
        self.statusBar().showMessage("Stopping background jobs …")
        self.state.shutdown()          # cancels jobs; committed rows stay committed
        self.service.close()
        log.info("window closed")
        super().closeEvent(event)


def panel_object_name(title: str) -> str:
    """"Step by step" -> "step_by_step_panel" (tests and screenshots find panels by it)."""
    return f"{title.lower().replace('-', '').replace(' ', '_')}_panel"


def _short(model: str) -> str:
    """A model's name for the status bar: a folder's last part."""
    return os.path.basename(model.rstrip("/\\")) or model


def store_title(loc) -> str:
    """A short name for the window title: the folder's name, or the collection on a server."""
    if loc.kind == "faiss":
        return loc.path.name
    if loc.kind == "lite":
        return f"{loc.path.name} (Milvus Lite)"
    return f"{loc.collection} on {loc.uri}"
