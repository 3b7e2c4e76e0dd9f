"""Where Encoderscope keeps user data: the platform's user-data folder (platformdirs), or the
folder named by ENCODERSCOPE_DATA_DIR (tests and benchmarks use it to stay out of the real one)."""
from __future__ import annotations

import os
from pathlib import Path

import platformdirs

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


def models_dir() -> Path:
    """Checkpoints trained in the app land here and are listed with the known models."""
    path = data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path
