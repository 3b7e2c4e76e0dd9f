"""Saving what the attention panel shows: the view as PNG, the matrix as CSV, and every head as
one long CSV or a compressed .npz (those two in a worker, with progress and Cancel).

``AttentionExport`` is a part of ``app.gui.panels.attention.panel.AttentionPanel`` (it reads the panel's
inspection, view and signals ``exported`` / ``export_failed``); it lives here so the panel reads
on its own.
"""
from __future__ import annotations

from pathlib import Path

from core import attention as A

from app.gui.widgets.save_dialog import ask_save_path

EXPORT_JOB_KEY = "attention.export"


def pair_text(text: str, compare_with: str) -> str:
    """Two sentences as one input, the way BERT-style encoders read pairs: a [SEP] between."""
    text, compare_with = text.strip(), (compare_with or "").strip()
    return f"{text} [SEP] {compare_with}" if compare_with else text


class AttentionExport:
    """Export actions of the AttentionPanel (mixed into it)."""

    def _ask_path(self, caption: str, suggested: str, filt: str) -> Path | None:
        return ask_save_path(self, caption, suggested, filt)

    def _stem(self) -> str:
        if self.mode == "head":
            return f"attention_L{self.layer + 1}_H{self.head + 1}"
        return f"attention_L{self.layer + 1}_{self.mode}"

    def export_png(self, path=None) -> Path | None:
        if self.inspection is None:
            return None
        stem = self._stem() if self.stack.currentIndex() == 0 else "attention_all_heads"
        path = path or self._ask_path("Save the view as PNG", stem + ".png", "PNG image (*.png)")
        if path is None:
            return None
        view = self.heatmap if self.stack.currentIndex() == 0 else self.grid
        ok = view.save_png(path)
        self._saved(path, ok)
        return Path(path) if ok else None

    def export_csv(self, path=None) -> Path | None:
        if self.inspection is None:
            return None
        path = path or self._ask_path("Save the matrix as CSV", self._stem() + ".csv", "CSV (*.csv)")
        if path is None:
            return None
        return self._write(lambda: A.write_matrix_csv(path, self.matrix, self.labels), path)

    def export_all_csv(self, path=None):
        """All heads as one long CSV (1.2 million lines at 6x12 heads, 128 tokens): written in a
        worker, with progress and Cancel; ``exported``/``export_failed`` tell when it is done.
        Returns the Job (None when nothing was started)."""
        if self.inspection is None:
            return None
        path = path or self._ask_path("Save all heads as CSV", "attention_all_heads.csv", "CSV (*.csv)")
        if path is None:
            return None
        return self._export_job(A.write_all_heads_csv, path, self.inspection.attentions,
                                list(self.inspection.tokens), label="Exporting all heads as CSV")

    def export_npz(self, path=None):
        """All heads as a compressed .npz, written in a worker (see ``export_all_csv``)."""
        if self.inspection is None:
            return None
        path = path or self._ask_path("Save all heads as NPZ", "attention_all_heads.npz", "NumPy (*.npz)")
        if path is None:
            return None
        backend = self.state.inspect_backend
        extra = {"text": pair_text(*(self._last_request or ("", "")))}
        if backend is not None:
            extra["model"] = str(getattr(backend, "model_name", ""))
        return self._export_job(_npz_fn, path, self.inspection.attentions, list(self.inspection.tokens),
                                label="Exporting all heads as NPZ", wants_progress=False, **extra)

    def _export_job(self, fn, path, *args, label: str, wants_progress: bool = True, **kwargs):
        if self.state.jobs.is_running(EXPORT_JOB_KEY):
            self._saved(path, False, "another export is still being written; try again when it is done")
            return None
        return self.state.run(EXPORT_JOB_KEY, fn, Path(path), *args, label=label,
                              wants_progress=wants_progress, show_progress=True,
                              on_result=lambda out: self._saved(out, True),
                              on_error=lambda msg, p=path: self._saved(p, False, msg),
                              on_cancelled=lambda p=path: self._export_cancelled(p), **kwargs)

    def _export_cancelled(self, path) -> None:
        self.state.status.emit(f"Export cancelled: {path} was not written")
        self.export_failed.emit(str(path), "cancelled")

    def _write(self, fn, path) -> Path | None:
        try:
            out = fn()
        except OSError as e:
            self._saved(path, False, str(e))
            return None
        self._saved(out, True)
        return Path(out)

    def _saved(self, path, ok: bool, why: str = "") -> None:
        if ok:
            self.state.status.emit(f"Saved {path}")
            self.exported.emit(Path(path))
        else:
            self.state.error.emit(f"Could not save {path}{': ' + why if why else ''}")
            self.export_failed.emit(str(path), why)


def _npz_fn(path, attentions, tokens, **extra):
    """Worker side of the NPZ export."""
    return A.write_npz(path, attentions, tokens, **extra)


def _npz_fn(path, attentions, tokens, **extra):
    """Worker side of the NPZ export."""
    return A.write_npz(path, attentions, tokens, **extra)
