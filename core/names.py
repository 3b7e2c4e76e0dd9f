"""The names a user chooses among: backends and poolings.

No torch here: the app and the CLI build their menus and flags from these at start-up.
"""
from __future__ import annotations

BACKENDS = ("scratch", "hf")          # our from-scratch encoder; Hugging Face transformers
POOLINGS = ("mean", "cls", "max")     # token vectors -> one sentence vector (core/pooling.py)
