"""Entry point: ``encoderscope-gui`` / ``encoderscope gui [--store STORE]`` / ``python -m app.gui.main``."""
from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="encoderscope-gui", description="Encoderscope desktop app")
    ap.add_argument("--store", default=None, help="store to open: a folder, milvus-lite:FOLDER or "
                    "http(s)://HOST:PORT (default: $ENCODERSCOPE_STORE, else the last one, else the "
                    "bundled sample corpus)")
    args, _qt_args = ap.parse_known_args(argv)
    return args


def main(argv: list[str] | None = None) -> int:
    """Open the main window. ``argv`` excludes the program name (None: sys.argv[1:])."""
    from PySide6.QtWidgets import QApplication

    from app.gui.logs import log, setup_logging
    from app.gui.main_window import MainWindow

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    path = setup_logging()
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "encoderscope", *argv])
    app.setOrganizationName("Encoderscope")
    app.setApplicationName("Encoderscope")
    log.info("starting Encoderscope GUI (log: %s)", path)
    window = MainWindow()
    window.show()
    window.start(args.store)
    window.maybe_show_tour()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
