"""The main window's menus: File (open, import, paste, log folder, quit), Edit (find, add,
delete, undo delete), Model (re-embed, cancel, precision), View (one entry per tab) and Help
(the tour, About)."""
from __future__ import annotations

from PySide6.QtGui import QAction, QActionGroup, QKeySequence

from app.gui.shell.about import show_about

PRECISION_MENU = [
    ("auto", "&Auto (bf16 where the CPU/GPU has it natively)",
     "bf16 where it is native and the model's bf16 vectors keep cosine >= 0.9999 with fp32"),
    ("fp32", "&fp32", "Full precision: the reference numbers"),
    ("bf16", "&bf16", "Faster on CPUs with AVX512-BF16/AMX and on GPUs; slower where emulated"),
]


def add_action(window, menu, text, slot, shortcut=None, tip=""):
    act = QAction(text, window)
    if shortcut:
        act.setShortcut(QKeySequence(shortcut))
    if tip:
        act.setStatusTip(tip)
    act.triggered.connect(slot)
    menu.addAction(act)
    return act


def build_menus(window) -> None:
    """File, Edit, Model (precision), View and Help; the actions tests and the window use are
    its attributes (import_action, delete_action, undo_delete_action, precision_actions)."""
    mb = window.menuBar()
    file_menu = mb.addMenu("&File")
    add_action(window, file_menu, "&Open corpus folder…", window.open_corpus_dialog, "Ctrl+Shift+O",
               "Open a corpus folder; an empty folder becomes a new, empty corpus")
    add_action(window, file_menu, "Open corpus &location…", window.open_location_dialog, "Ctrl+L",
               "Open a folder, an embedded Milvus Lite store or a Milvus server by address")
    add_action(window, file_menu, "Open the &sample corpus", window.open_sample)
    file_menu.addSeparator()
    window.import_action = add_action(window, file_menu, "&Import sentences…", window.corpus_panel.import_dialog,
                                      QKeySequence.StandardKey.Open, "Import a .txt, .csv or .jsonl file")
    add_action(window, file_menu, "&Paste sentences", window.corpus_panel.paste_lines, "Ctrl+Shift+V",
               "Add every line on the clipboard")
    file_menu.addSeparator()
    add_action(window, file_menu, "Open &log folder", window.open_log_folder)
    file_menu.addSeparator()
    add_action(window, file_menu, "&Quit", window.close, "Ctrl+Q")

    edit_menu = mb.addMenu("&Edit")
    add_action(window, edit_menu, "&Find in search", window.focus_search, QKeySequence.StandardKey.Find)
    add_action(window, edit_menu, "&Add a sentence", window.focus_add, "Ctrl+N")
    window.delete_action = add_action(window, edit_menu, "&Delete selected sentences", window.delete_selected,
                                      QKeySequence.StandardKey.Delete)
    window.undo_delete_action = add_action(
        window, edit_menu, "&Undo delete", window.service.undo_delete, QKeySequence.StandardKey.Undo,
        "Add the sentences of the last delete back (embedded again with the corpus model)")
    window.delete_action.setEnabled(False)
    window.undo_delete_action.setEnabled(False)
    window.corpus_panel.selection_changed.connect(lambda n: window.delete_action.setEnabled(n > 0))
    window.service.undo_changed.connect(window._on_undo_changed)

    model_menu = mb.addMenu("&Model")
    add_action(window, model_menu, "&Re-embed the corpus with the current model", window.corpus_panel.reembed,
               "Ctrl+R")
    add_action(window, model_menu, "&Cancel the running job", window.job_progress.cancel_current, "Esc")
    model_menu.addSeparator()
    precision_menu = model_menu.addMenu("&Precision")
    group = QActionGroup(window)
    window.precision_actions = {}
    for key, text, tip in PRECISION_MENU:
        act = add_action(window, precision_menu, text, lambda _=False, k=key: window.set_precision(k), tip=tip)
        act.setCheckable(True)
        act.setChecked(key == window.state.choice.precision)
        group.addAction(act)
        window.precision_actions[key] = act

    view_menu = mb.addMenu("&View")
    for i in range(window.tabs.count()):     # Ctrl+1 … Ctrl+9, then Ctrl+0 for the tenth
        add_action(window, view_menu, window.tabs.tabText(i), lambda _=False, i=i: window.tabs.setCurrentIndex(i),
                   f"Ctrl+{(i + 1) % 10}" if i < 10 else None)

    help_menu = mb.addMenu("&Help")
    add_action(window, help_menu, "&Start here (a five-minute tour)", window.show_tour, tip="Which tab first, and a "
               "path through Search, Attention, Step by step, Why and Fill-mask")
    add_action(window, help_menu, "&About Encoderscope", lambda: show_about(window, window.state), "F1")
