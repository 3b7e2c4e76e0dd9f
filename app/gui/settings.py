"""Where the app keeps things: QSettings (organisation "Encoderscope") and the user-data folder.

``ENCODERSCOPE_DATA_DIR`` moves everything (stores, settings.ini, logs) into one folder; the
tests and the benchmark use it so they never touch the real user folders.
"""
from __future__ import annotations

import os

from PySide6.QtCore import QSettings

from core.paths import DATA_ENV, data_dir, models_dir, stores_dir  # noqa: F401  (re-exported)

ORGANISATION = "Encoderscope"
APPLICATION = "Encoderscope"


def open_settings() -> QSettings:
    """The app's QSettings; an ini file inside ENCODERSCOPE_DATA_DIR when that is set."""
    if os.environ.get(DATA_ENV):
        return QSettings(str(data_dir() / "settings.ini"), QSettings.Format.IniFormat)
    return QSettings(ORGANISATION, APPLICATION)


def as_int(value, default=0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
