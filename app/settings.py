"""Where the app keeps things: QSettings (organisation "Encoderscope") and the user-data folder.

``ENCODERSCOPE_DATA_DIR`` moves everything (stores, settings.ini, logs) into one folder; the
tests and the benchmark use it so they never touch the real user folders.
"""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs
from PySide6.QtCore import QSettings

ORGANISATION = "Encoderscope"
APPLICATION = "Encoderscope"
DATA_ENV = "ENCODERSCOPE_DATA_DIR"


def data_dir() -> Path:
    env = os.environ.get(DATA_ENV)
    path = Path(env) if env else Path(platformdirs.user_data_dir("encoderscope", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def stores_dir() -> Path:
    path = data_dir() / "stores"
    path.mkdir(parents=True, exist_ok=True)
    return path


def open_settings() -> QSettings:
    """The app's QSettings; an ini file inside ENCODERSCOPE_DATA_DIR when that is set."""
    if os.environ.get(DATA_ENV):
        return QSettings(str(data_dir() / "settings.ini"), QSettings.Format.IniFormat)
    return QSettings(ORGANISATION, APPLICATION)


def as_bool(value, default=False) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def as_int(value, default=0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default
