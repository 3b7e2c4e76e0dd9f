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
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "screenshots"
SIZE = (1280, 800)


def _spin(app, seconds=0.0, until=None, timeout=300.0):
    t0 = time.perf_counter()
    while True:
        app.processEvents()
        if until is not None and until():
            return True
        if until is None and time.perf_counter() - t0 >= seconds:
            return True
        if time.perf_counter() - t0 > timeout:
            print(f"  (timed out after {timeout:.0f}s)", file=sys.stderr)
            return False
        time.sleep(0.01)


def _save(widget, name):
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.png"
    widget.grab().save(str(path))
    print(f"saved {path.relative_to(ROOT)} ({widget.width()}x{widget.height()})")
    return path


def _type(app, edit, text, delay=0.02):
    from PySide6.QtTest import QTest
    edit.setFocus()
    edit.clear()
    for ch in text:
        QTest.keyClicks(edit, ch)
        _spin(app, delay)


def sample_window(prefix: str = "encoderscope-shots-"):
    """(app, window): the main window on a fresh data folder, started and idle (the sample
    corpus indexed): what a stand-alone shot script starts from."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ENCODERSCOPE_DATA_DIR"] = str(tmp / "data")
    from PySide6.QtWidgets import QApplication

    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    w = MainWindow()
    w.resize(*SIZE)
    w.show()
    w.start()
    _spin(app, until=lambda: w.state.store is not None and not w.state.jobs.busy, timeout=600)
    return app, w


def main() -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix="encoderscope-shots-"))
    os.environ["ENCODERSCOPE_DATA_DIR"] = str(tmp / "data")

    from PySide6.QtWidgets import QApplication, QMessageBox

    from app.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    app.setOrganizationName("Encoderscope")
    app.setApplicationName("Encoderscope")
    w = MainWindow()
    w.resize(*SIZE)
    w.show()
    w.start()
    state = w.state

    # 1. first launch: the sample corpus is being indexed, with a progress bar and Cancel
    _spin(app, until=lambda: w.job_progress.isVisible() and w.job_progress.bar.value() > 150, timeout=120)
    _save(w, "first-launch")
    _spin(app, until=lambda: state.store is not None and not state.jobs.busy, timeout=300)

    # 2. search as you type
    w.show_panel("Search")
    query = "the biggest planet has dozens and dozens of moons"
    _type(app, w.search_panel.query, query)
    _spin(app, until=lambda: w.search_panel.last_result is not None
          and w.search_panel.last_result.query == query, timeout=30)
    _spin(app, 0.3)
    _save(w, "search")

    # 2b. why is this a hit: the Why view from a result (tools/screenshots/why.py)
    from tools.screenshots.why import shoot_why
    shoot_why(app, w)

    # 3. the corpus table, filtered
    w.show_panel("Corpus")
    w.corpus_panel.filter_edit.setText("coffee")
    _spin(app, 0.5)
    w.corpus_panel.table.selectRow(0)
    _spin(app, 0.2)
    _save(w, "corpus")
    w.corpus_panel.filter_edit.clear()
    _spin(app, 0.3)

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
    _spin(app, 0.4)
    _save(dialog, "import-column")
    dialog.accept()
    _spin(app, until=lambda: not state.jobs.busy, timeout=60)

    # 5. switching pooling offers to re-embed
    bar = w.model_bar
    bar.pooling.setCurrentIndex(bar.pooling.findData("cls"))
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    _spin(app, until=lambda: getattr(w.corpus_panel, "_reembed_box", None) is not None
          and w.corpus_panel._reembed_box.isVisible(), timeout=30)
    _spin(app, 0.3)
    _save(w.corpus_panel._reembed_box, "reembed-prompt")
    w.corpus_panel.reembed_yes.click()
    _spin(app, until=lambda: w.job_progress.isVisible() and w.job_progress.bar.value() > 100, timeout=60)
    _save(w, "reembed-progress")
    _spin(app, until=lambda: not state.jobs.busy, timeout=300)

    # 6. a model that is not available offline: the core's message, no traceback
    bar.weights.setCurrentText("distilbert-base-uncased")
    bar.encoder.setCurrentIndex(bar.encoder.findData("hf"))
    bar._apply()
    _spin(app, until=lambda: any(b.isVisible() for b in w.findChildren(QMessageBox, "error_box")), timeout=60)
    _spin(app, 0.3)
    box = [b for b in w.findChildren(QMessageBox, "error_box") if b.isVisible()][-1]
    _save(box, "model-unavailable")
    box.accept()
    _spin(app, until=lambda: state.backend is not None and not state.jobs.busy, timeout=60)

    # 7. About
    from app.gui.about import show_about
    about = show_about(w, state)
    _spin(app, 0.3)
    _save(about, "about")
    about.accept()

    # 8. the other panels, as they are in this build (the attention inspector gets a hit)
    w.show_panel("Search")
    _spin(app, until=lambda: not state.jobs.busy, timeout=30)
    if w.search_panel.results.hits:
        w.search_panel.inspect_row(0)
    for title in list(w.optional_panels):
        w.show_panel(title)
        _spin(app, 1.0)
        _spin(app, until=lambda: not state.jobs.busy, timeout=60)
        _spin(app, 0.5)
        _save(w, "tab-" + title.lower().replace(" ", "-"))

    # 9. (issue 17) inspecting another model than the corpus's: the "Inspect with" bar. A masked-LM
    # checkpoint when there is one (ENCODERSCOPE_MLM_MODEL, as in `make screenshots`), else minilm
    # under transformers: the corpus, and search, keep their model either way.
    mlm = os.environ.get("ENCODERSCOPE_MLM_MODEL", "")
    inspected = state.choice.with_(model=mlm, backend="scratch") if mlm and Path(mlm).is_dir() \
        else state.choice.with_(backend="hf")
    state.set_inspect_choice(inspected)
    _spin(app, until=lambda: state.inspect_backend is not None and not state.jobs.busy, timeout=120)
    w.show_panel("Fill-mask" if mlm and "Fill-mask" in w.optional_panels else "Attention")
    _spin(app, 1.0)
    _spin(app, until=lambda: not state.jobs.busy, timeout=60)
    _spin(app, 0.5)
    _save(w, "inspect-with")
    # 10. the corpus map: clusters, the query's star, its hits ringed, a lasso selection
    from tools.screenshots.map import shoot_map
    shoot_map(app, w)

    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
