"""Saving what the attention panel shows: the view as PNG, the matrix as CSV, and every head as
one long CSV or a compressed .npz (those two in a worker, with progress and Cancel).

The panel (app.gui.panels.attention.panel.AttentionPanel) owns an ``AttentionExporter`` and
tells it, through one function, what it shows now (an ``ExportSource``); the exporter reports
each outcome through one callback, ``saved(path, ok, why)``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.gui.widgets.save_dialog import ask_save_path
from core.inspect import attention_maps as A

EXPORT_JOB_KEY = "attention.export"


def pair_text(text: str, compare_with: str) -> str:
    """Two sentences as one input, the way BERT-style encoders read pairs: a [SEP] between."""
    text, compare_with = text.strip(), (compare_with or "").strip()
    return f"{text} [SEP] {compare_with}" if compare_with else text


@dataclass
class ExportSource:
    """What the attention panel shows at the moment of an export."""

    attentions: np.ndarray     # (L, H, T, T): every head of the inspection
    tokens: list[str]          # the T token labels
    matrix: np.ndarray         # the one matrix on screen (after hiding tokens)
    labels: list[str]          # its row/column labels
    stem: str                  # a file name for the matrix, without suffix
    view: object               # the widget on screen (one head or the grid): has save_png(path)
    view_stem: str             # a file name for that view, without suffix
    text: str                  # the input as the model read it
    model: str                 # the inspected model's name ("" if unknown)


class AttentionExporter:
    def __init__(self, state, dialog_parent, source: Callable[[], ExportSource | None],
                 saved: Callable[[object, bool, str], None]):
        self.state = state                    # AppState: runs the worker jobs, shows status
        self.dialog_parent = dialog_parent    # the widget file dialogs open over
        self.source = source                  # what is shown now, or None before any inspection
        self.saved = saved                    # (path, ok, why): every outcome, once

    def _target(self, path, caption: str, suggested, filt: str):
        """(what is shown, the path to write: `path`, or asked with `suggested(source)` offered),
        or None when nothing is shown or the dialog was cancelled."""
        src = self.source()
        if src is None:
            return None
        path = path or ask_save_path(self.dialog_parent, caption, suggested(src), filt)
        return None if path is None else (src, path)

    def png(self, path=None) -> Path | None:
        target = self._target(path, "Save the view as PNG", lambda s: s.view_stem + ".png", "PNG image (*.png)")
        if target is None:
            return None
        src, path = target
        ok = src.view.save_png(path)
        self.saved(path, ok, "")
        return Path(path) if ok else None

    def csv(self, path=None) -> Path | None:
        target = self._target(path, "Save the matrix as CSV", lambda s: s.stem + ".csv", "CSV (*.csv)")
        if target is None:
            return None
        src, path = target
        try:
            out = A.write_matrix_csv(path, src.matrix, src.labels)
        except OSError as e:
            self.saved(path, False, str(e))
            return None
        self.saved(out, True, "")
        return Path(out)

    def all_csv(self, path=None):
        """All heads as one long CSV (1.2 million lines at 6x12 heads, 128 tokens): written in a
        worker, with progress and Cancel. Returns the Job (None when nothing was started)."""
        target = self._target(path, "Save all heads as CSV", lambda _s: "attention_all_heads.csv", "CSV (*.csv)")
        if target is None:
            return None
        src, path = target
        return self._job(A.write_all_heads_csv, path, src.attentions, src.tokens,
                         label="Exporting all heads as CSV")

    def npz(self, path=None):
        """All heads as a compressed .npz, written in a worker (see ``all_csv``)."""
        target = self._target(path, "Save all heads as NPZ", lambda _s: "attention_all_heads.npz", "NumPy (*.npz)")
        if target is None:
            return None
        src, path = target
        extra = {"text": src.text} | ({"model": src.model} if src.model else {})
        return self._job(_npz_fn, path, src.attentions, src.tokens, label="Exporting all heads as NPZ",
                         wants_progress=False, **extra)

    def _job(self, fn, path, *args, label: str, wants_progress: bool = True, **kwargs):
        if self.state.jobs.is_running(EXPORT_JOB_KEY):
            self.saved(path, False, "another export is still being written; try again when it is done")
            return None
        return self.state.run(EXPORT_JOB_KEY, fn, Path(path), *args, label=label,
                              wants_progress=wants_progress, show_progress=True,
                              on_result=lambda out: self.saved(out, True, ""),
                              on_error=lambda msg, p=path: self.saved(p, False, msg),
                              on_cancelled=lambda p=path: self._cancelled(p), **kwargs)

    def _cancelled(self, path) -> None:
        self.state.status.emit(f"Export cancelled: {path} was not written")
        self.saved(path, False, "cancelled")


def _npz_fn(path, attentions, tokens, **extra):
    """Worker side of the NPZ export."""
    return A.write_npz(path, attentions, tokens, **extra)
