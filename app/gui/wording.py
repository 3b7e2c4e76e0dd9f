"""How the app words things: the encoders a user chooses among (in the model bars, on the Evaluate
page) and the way out of an error. Core and the stores say what fixes an error as data
(EncoderscopeError.fix, see core/errors.py); the command line words it as options
(app/cli/remedies.py), the app as the controls and menus that apply it."""
from __future__ import annotations

import re
from pathlib import PurePath

# What the model bar shows for each of core.names.BACKENDS.
BACKEND_LABELS = {"scratch": "From-scratch encoder", "hf": "Hugging Face transformers"}

# A setting's control: where the app shows it.
SETTING_LABELS = {
    "backend": "Encoder", "precision": "Model → Precision", "device": "Device",
    "lr": "Train: Learning rate", "attention": "Train: Attention", "objective": "Train: Objective",
    "pooling": "Pooling", "out": "Train: Output", "init": "Train: Start from",
    "dropout": "Train: dropout", "metric": "the metric", "columns": "the file's header row",
    "resume": "Train: Resume…", "overwrite": "Train: overwrite", "store": "File → Open corpus location…",
}
VALUE_LABELS = {"backend": BACKEND_LABELS,
                "objective": {"mlm": "Masked-LM", "simcse": "Contrastive", "clm": "Next token"}}


# Twin of app.cli.remedies._fix_worded, alike: the same fix kinds (core.errors)
#   worded for the app (its tabs and menus) where the CLI words them as commands to type.
def gui_fix(fix: dict | None) -> str:
    """The words appended to an error's message in the app ("" when it carries no fix)."""
    kind = (fix or {}).get("kind")
    if kind == "settings":
        return f" ({_settings(fix['settings'])})"
    if kind == "train":
        return f": train one on the Train tab ({_settings(fix['settings'])})"
    if kind == "train_mlm":
        return f": train one on the Train tab (Start from: {fix['init']}, Objective: Masked-LM)"
    if kind == "resume":
        return " with Resume… on the Train tab"
    if kind == "reembed":
        return " (Model → Re-embed the corpus with the current model)"
    if kind == "store_elsewhere":
        return (f" (File → Open corpus location…: a folder such as {fix['folder']}, or a Milvus "
                f"server such as {fix['server']})")
    return ""     # whiten_again: the message says it; the app makes no whitened stores


def _settings(settings: dict) -> str:
    """{"backend": "hf", "lr": None} -> "Encoder: Hugging Face transformers; Train: Learning rate"."""
    return "; ".join(SETTING_LABELS.get(name, name)
                     + (f": {VALUE_LABELS.get(name, {}).get(value, value)}" if value is not None else "")
                     for name, value in settings.items())


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
