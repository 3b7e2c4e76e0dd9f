"""The app's log file: ``platformdirs.user_log_dir("encoderscope")/encoderscope.log``.

Worker errors that are not EncoderscopeError land here with their full traceback; the user
sees a one-line message that points at this file. ``ENCODERSCOPE_LOG_DIR`` (or
``ENCODERSCOPE_DATA_DIR``, used by the tests) moves it.
"""
from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path

import platformdirs

LOGGER_NAME = "encoderscope"
log = logging.getLogger(LOGGER_NAME)
_configured_path: Path | None = None


def log_dir() -> Path:
    if os.environ.get("ENCODERSCOPE_LOG_DIR"):
        return Path(os.environ["ENCODERSCOPE_LOG_DIR"])
    if os.environ.get("ENCODERSCOPE_DATA_DIR"):
        return Path(os.environ["ENCODERSCOPE_DATA_DIR"]) / "logs"
    return Path(platformdirs.user_log_dir("encoderscope", appauthor=False))


def log_file() -> Path:
    return log_dir() / "encoderscope.log"


def setup_logging(level: int = logging.INFO) -> Path:
    """Attach a rotating file handler once per log path; returns the path."""
    global _configured_path
    path = log_file()
    if _configured_path == path:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    for h in list(log.handlers):
        if getattr(h, "_encoderscope", False):
            log.removeHandler(h)
            h.close()
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=2_000_000, backupCount=2, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s [%(threadName)s] %(message)s"))
    handler._encoderscope = True
    log.addHandler(handler)
    log.setLevel(level)
    _configured_path = path
    return path
