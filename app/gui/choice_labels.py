"""The words the app shows for the encoders a user chooses among: in the model bars, on the
Evaluate page and in the fixes its messages suggest (app/gui/fix_words.py)."""

import re
from pathlib import PurePath

# What the model bar shows for each of core.names.BACKENDS.
BACKEND_LABELS = {"scratch": "From-scratch encoder", "hf": "Hugging Face transformers"}


def model_label(name) -> str:
    """A model as people name it: a trained model's folder by its own name ("run-3"), never
    its absolute path (that goes in a tooltip: ``model_tooltip``)."""
    text = str(name or "")
    # a folder (absolute, relative, home or a Windows drive); "org/model" hub names stay whole
    if re.match(r"^([/~.]|[A-Za-z]:[\\/]|\\\\)", text):
        return PurePath(text.replace("\\", "/")).name or text
    return text


def model_tooltip(name) -> str:
    """The full name or path of a model, for a tooltip ('' when the label already says it all)."""
    text = str(name or "")
    return text if model_label(text) != text else ""
