"""Drive the main window through each panel and save PNGs under docs/screenshots/.

    make screenshots        # xvfb-run -a .venv/bin/python -m tools.screenshots.window (QT_QPA_PLATFORM=xcb)

Runs on a fresh temporary data folder, so the first-launch indexing of the sample corpus is
captured too. Needs a display (a real one or Xvfb); offscreen works but renders no window frame.
"""
from __future__ import annotations

import csv
import os
import sys
import tempfile
from pathlib import Path

from tools.screenshots.common import SIZE, save, spin, type_text


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="encoderscope-shots-"))
    os.environ["ENCODERSCOPE_DATA_DIR"] = str(tmp / "data")

    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.gui.shell.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    app.setOrganizationName("Encoderscope")
    app.setApplicationName("Encoderscope")
    w = MainWindow()
    w.resize(*SIZE)
    w.show()
    w.start()
    state = w.state

    # 1. first launch: the sample corpus is being indexed, with a progress bar and Cancel
    spin(app, until=lambda: w.job_progress.isVisible() and w.job_progress.bar.value() > 150, timeout=120)
    save(w, "first-launch")
    spin(app, until=lambda: state.store is not None and not state.jobs.busy, timeout=300)

    # 2. search as you type
    w.show_panel("Search")
    query = "the biggest planet has dozens and dozens of moons"
    type_text(app, w.search_panel.query, query)
    spin(app, until=lambda: w.search_panel.last_result is not None
          and w.search_panel.last_result.query == query, timeout=30)
    spin(app, 0.3)
    save(w, "search")

    # 2b. why is this a hit: the Why view from a result (tools/screenshots/why.py)
    from tools.screenshots.why import shoot_why
    shoot_why(app, w)

    # 3. the corpus table, filtered
    w.show_panel("Corpus")
    w.corpus_panel.filter_edit.setText("coffee")
    spin(app, 0.5)
    w.corpus_panel.table.selectRow(0)
    spin(app, 0.2)
    save(w, "corpus")
    w.corpus_panel.filter_edit.clear()
    spin(app, 0.3)

    # 4. importing a CSV: pick the column
    sample_csv = tmp / "reviews.csv"
    with open(sample_csv, "w", newline="", encoding="utf-8") as f:
        wr = csv.writer(f)
        wr.writerow(["id", "stars", "review"])
        for i, text in enumerate(["The hotel room had a wonderful view of the harbour.",
                                  "Our flight was delayed for six hours without any explanation.",
                                  "The museum guide explained every painting with real passion.",
                                  "Breakfast was cold and the coffee tasted burnt."], 1):
            wr.writerow([i, 5 - i, text])
    dialog = w.corpus_panel.import_file(sample_csv)
    dialog.combo.setCurrentText("review")
    spin(app, 0.4)
    save(dialog, "import-column")
    dialog.accept()
    spin(app, until=lambda: not state.jobs.busy, timeout=60)

    # 5. switching pooling offers to re-embed
    bar = w.model_bar
    bar.pooling.setCurrentIndex(bar.pooling.findData("cls"))
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    spin(app, until=lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
          and w.corpus_panel._reembed_box.isVisible(), timeout=30)
    spin(app, 0.3)
    save(w.corpus_panel._reembed_box, "reembed-prompt")
    w.corpus_panel.reembed_yes.click()
    spin(app, until=lambda: w.job_progress.isVisible() and w.job_progress.bar.value() > 100, timeout=60)
    save(w, "reembed-progress")
    spin(app, until=lambda: not state.jobs.busy, timeout=300)

    # 6. a model that is not available offline: the core's message, no traceback
    bar.weights.setCurrentText("distilbert-base-uncased")
    bar.encoder.setCurrentIndex(bar.encoder.findData("hf"))
    bar._apply()
    spin(app, until=lambda: any(b.isVisible() for b in w.findChildren(QMessageBox, "error_box")), timeout=60)
    spin(app, 0.3)
    box = [b for b in w.findChildren(QMessageBox, "error_box") if b.isVisible()][-1]
    save(box, "model-unavailable")
    box.accept()
    spin(app, until=lambda: state.backend is not None and not state.jobs.busy, timeout=60)

    # 7. About
    from app.gui.shell.about import show_about
    about = show_about(w, state)
    spin(app, 0.3)
    save(about, "about")
    about.accept()

    # 8. the other panels, as they are in this build (the attention inspector gets a hit)
    w.show_panel("Search")
    spin(app, until=lambda: not state.jobs.busy, timeout=30)
    if w.search_panel.results.hits:
        w.search_panel.inspect_row(0)
    for title in list(w.optional_panels):
        w.show_panel(title)
        spin(app, 1.0)
        spin(app, until=lambda: not state.jobs.busy, timeout=60)
        spin(app, 0.5)
        save(w, "tab-" + title.lower().replace(" ", "-"))

    # 9. inspecting another model than the corpus's: the "Inspect with" bar. A masked-LM
    # checkpoint when there is one (ENCODERSCOPE_MLM_MODEL, as in `make screenshots`), else minilm
    # under transformers: the corpus, and search, keep their model either way.
    mlm = os.environ.get("ENCODERSCOPE_MLM_MODEL", "")
    inspected = state.choice.with_(model=mlm, backend="scratch") if mlm and Path(mlm).is_dir() \
        else state.choice.with_(backend="hf")
    state.set_inspect_choice(inspected)
    spin(app, until=lambda: state.inspect_backend is not None and not state.jobs.busy, timeout=120)
    w.show_panel("Fill-mask" if mlm and "Fill-mask" in w.optional_panels else "Attention")
    spin(app, 1.0)
    spin(app, until=lambda: not state.jobs.busy, timeout=60)
    spin(app, 0.5)
    save(w, "inspect-with")
    # 10. the corpus map: clusters, the query's star, its hits ringed, a lasso selection
    from tools.screenshots.map import shoot_map
    shoot_map(app, w)

    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
