"""Entry point: ``encoderscope-gui`` / ``encoderscope gui [--store STORE]`` / ``python -m app.gui.shell.main``."""
from __future__ import annotations

import argparse
import sys
import threading


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
    from app.gui.shell.main_window import MainWindow

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    path = setup_logging()
    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "encoderscope", *argv])
    app.setOrganizationName("Encoderscope")
    app.setApplicationName("Encoderscope")
    log.info("starting Encoderscope GUI (log: %s)", path)
    window = MainWindow()
    stop = quit_on_sigterm(app)
    window.show()
    window.start(args.store)
    window.maybe_show_tour()
    try:
        return app.exec()
    finally:
        stop()


def quit_on_sigterm(app):
    """SIGTERM (kill, a logout, a shutdown) closes the app as Quit does: every window's close
    runs (jobs cancelled, committed rows kept, locks released) and the app exits 0.

    The signal is written to a socket (signal.set_wakeup_fd) that the event loop watches, so
    the closing runs between Qt events, never inside whatever Qt callback was running; the
    Python handler itself does nothing. Returns the function that puts things back."""
    import signal
    import socket

    from PySide6.QtCore import QSocketNotifier

    from app.gui.logs import log
    from core.files.platform_os import stop_signals
    if threading.current_thread() is not threading.main_thread() or len(stop_signals()) < 2:
        return lambda: None          # no SIGTERM here (Windows): closing the window is Quit
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)
    previous_fd = signal.set_wakeup_fd(writer.fileno())
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: None)
    notifier = QSocketNotifier(reader.fileno(), QSocketNotifier.Type.Read)

    def on_signal():
        try:
            got = reader.recv(64)
        except OSError:
            return
        if signal.SIGTERM in got:
            log.info("SIGTERM: closing as on Quit")
            app.closeAllWindows()
            app.quit()

    notifier.activated.connect(on_signal)

    def restore():
        notifier.setEnabled(False)
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGTERM, previous)
        reader.close()
        writer.close()

    return restore


if __name__ == "__main__":
    sys.exit(main())
