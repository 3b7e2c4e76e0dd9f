"""Panel state remembered across restarts: one small dict per panel, kept in QSettings as JSON.

A panel that wants its controls back (sentence, layer, head, mode, cluster count, ...) has two
methods: ``save_state() -> dict`` (plain JSON values) and ``restore_state(dict)`` (takes what it
knows, ignores the rest, never fails on an old or hand-edited value). The main window calls them
through this module, the one place that reads and writes the settings: when a panel is built it
gets its dict back; when the window closes every built panel's dict is written. A panel never
built in a session keeps the dict saved before (nothing overwrites it).
"""
from __future__ import annotations

import json

from app.gui.logs import log

PREFIX = "panels/"      # the QSettings group of the panels' dicts, one key per tab title


def _key(title: str) -> str:
    return PREFIX + title.lower().replace(" ", "_").replace("-", "")


def load(settings, title: str) -> dict:
    """The dict saved for panel ``title`` ({} when none, or when it cannot be read)."""
    raw = settings.value(_key(title))
    if not raw:
        return {}
    try:
        value = json.loads(str(raw))
    except ValueError:
        log.warning("ignored the unreadable saved state of the %s panel", title)
        return {}
    return value if isinstance(value, dict) else {}


def save(settings, title: str, panel) -> None:
    """Write panel ``title``'s save_state() (panels without one are skipped)."""
    state = getattr(panel, "save_state", None)
    if state is not None:
        settings.setValue(_key(title), json.dumps(state(), ensure_ascii=False))


def restore(settings, title: str, panel) -> None:
    """Give panel ``title`` its saved dict (panels without restore_state are skipped)."""
    restore_state = getattr(panel, "restore_state", None)
    saved = load(settings, title)
    if restore_state is not None and saved:
        try:
            restore_state(saved)
        except (TypeError, ValueError, KeyError) as e:   # an old or hand-edited value: keep the defaults
            log.warning("ignored the saved state of the %s panel: %s", title, e)


def text(saved: dict, key: str, default: str = "") -> str:
    value = saved.get(key, default)
    return value if isinstance(value, str) else default


def number(saved: dict, key: str, default: int | None = None) -> int | None:
    value = saved.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def set_spin(spin, value: int | None) -> None:
    """Set a spin box that may not have its final range yet (the model is still loading): its
    maximum grows to take the value; the model's real range clamps it later."""
    if value is None:
        return
    spin.setMaximum(max(spin.maximum(), value))
    spin.setValue(value)
