"""What the screenshot drivers share: the Qt application, waiting on events, saving a widget as
PNG, typing into a box, the main window on a fresh data folder, and the panel scripts' set-up."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]   # the repository
OUT = ROOT / "docs" / "screenshots"
SIZE = (1280, 800)


def spin(app, seconds=0.0, until=None, timeout=300.0):
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


def save(widget, name):
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"{name}.png"
    widget.grab().save(str(path))
    print(f"saved {path.relative_to(ROOT)} ({widget.width()}x{widget.height()})")
    return path


def type_text(app, edit, text, delay=0.02):
    from PySide6.QtTest import QTest
    edit.setFocus()
    edit.clear()
    for ch in text:
        QTest.keyClicks(edit, ch)
        spin(app, delay)


def sample_window(prefix: str = "encoderscope-shots-"):
    """(app, window): the main window on a fresh data folder, started and idle (the sample
    corpus indexed): what a stand-alone shot script starts from."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["ENCODERSCOPE_DATA_DIR"] = str(tmp / "data")
    from PySide6.QtWidgets import QApplication

    from app.gui.shell.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv)
    w = MainWindow()
    w.resize(*SIZE)
    w.show()
    w.start()
    spin(app, until=lambda: w.state.store is not None and not w.state.jobs.busy, timeout=600)
    return app, w


def shoot_sample_window(shoot) -> int:
    """A screenshot script's main: the window on the sample corpus, ``shoot(app, window)``, closed."""
    app, w = sample_window("encoderscope-shots-")
    shoot(app, w)
    w.close()
    return 0


def finish_panel_shots(state) -> int:
    """The end of a panel screenshot script: its jobs stopped (up to 5 s), the last events run."""
    state.shutdown(5000)
    qt_app().processEvents()
    return 0


def qt_app():
    from PySide6 import QtWidgets
    return QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])


def grab(widget, path: Path) -> Path:
    qt_app().processEvents()
    widget.grab().save(str(path))
    print(f"wrote {path}")
    return path


def panel_shots_setup(doc: str, argv=None, extra=None):
    """What the panel screenshot scripts share: (app, args, (width, height), minilm, state).
    args.out is the folder for the PNGs; ``extra(parser)`` adds a script's own options."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path, nargs="?", default=Path("docs/screenshots"))
    ap.add_argument("--size", default="1280x800")
    if extra is not None:
        extra(ap)
    args = ap.parse_args(argv)
    app = qt_app()
    from app.gui.state import AppState
    from core.encoder.backends import get_backend

    args.out.mkdir(parents=True, exist_ok=True)
    minilm = get_backend("minilm", backend="scratch")
    state = AppState()
    state.backend = minilm
    return app, args, tuple(int(v) for v in args.size.split("x")), minilm, state
