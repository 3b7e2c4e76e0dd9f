"""Entry point: ``encoderscope-gui`` / ``encoderscope gui`` / ``python -m app.main``."""
from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from PySide6.QtWidgets import QApplication

    from .logs import log, setup_logging
    from .main_window import MainWindow

    path = setup_logging()
    argv = list(sys.argv if argv is None else argv)
    app = QApplication.instance() or QApplication(argv)
    app.setOrganizationName("Encoderscope")
    app.setApplicationName("Encoderscope")
    log.info("starting Encoderscope GUI (log: %s)", path)
    window = MainWindow()
    window.show()
    window.start()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
