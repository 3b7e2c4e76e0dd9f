"""Errors meant for people: the message says what went wrong and what to do instead.

The CLI prints them without a traceback; the app shows them in a message box.
"""


class EncoderscopeError(Exception):
    """Base class: anything the user can fix or needs to know, worded for them.

    `fix`, where the way out is a setting the user changes, says which as data ({"kind": ...}:
    "encoding", "column", "train_mlm", "whiten_again", "settings" (settings_fix), "train" (a
    model trained with these settings), "resume" (continue the run in "out"), "reembed"; see
    app/cli/remedies.py and app/gui/wording.py): the message stays free of command-line flags
    and menu names, and each front end words the fix its way."""

    def __init__(self, *args, fix: dict | None = None):
        super().__init__(*args)
        self.fix = fix


def settings_fix(**settings) -> dict:
    """The fix "change these settings": settings_fix(precision="fp32", lr=None) (None: the
    setting itself, no one value)."""
    return {"kind": "settings", "settings": settings}


class ModelUnavailable(EncoderscopeError):
    """The model cannot be loaded here (missing folder, wrong files, hub unreachable, ...)."""


class DeviceUnavailable(EncoderscopeError, RuntimeError):
    """The device or precision asked for does not exist here (no CUDA GPU, no MPS, no bf16, ...)."""


class InputError(EncoderscopeError, ValueError):
    """Bad input text or arguments: empty text, no [MASK], unknown target, ..."""


class Cancelled(EncoderscopeError):
    """A long job stopped because its cancel flag was set."""


class NoMLMHead(EncoderscopeError):
    """Fill-mask was asked of a model that has no masked-LM head."""


class Terminated(KeyboardInterrupt):
    """SIGTERM: a command stops as Ctrl-C stops it (keeping what it committed, saying so)."""
