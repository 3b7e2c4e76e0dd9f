"""The Train form's "Watch" box: watch or not, the probe sentence, how often to probe, and the
probe set (an editable list, one sentence per line); and reading a run folder for "Open run…"."""
from __future__ import annotations

from PySide6 import QtWidgets


def default_probe_set_text() -> str:
    from core.train.watch import default_probe_set
    return "\n".join(default_probe_set())


def read_run_job(folder, progress=None, cancel=None):
    """Worker side of "Open run…": the run folder's events (metrics.jsonl, or an older run's history)."""
    from core.errors import InputError
    from core.train.run_folder import read_metrics
    events = read_metrics(folder)
    if not events:
        raise InputError(f"{folder} holds no training run (no metrics.jsonl or trainer_state.json)")
    return folder, events


class WatchSettings(QtWidgets.QGroupBox):
    """The TrainConfig fields of watching a run (watch, probe_sentence, probe_every, probe_set)."""

    def __init__(self, parent=None):
        super().__init__("Watch", parent)
        form = QtWidgets.QFormLayout(self)
        self.watch_on = QtWidgets.QCheckBox("Gradient flow and probes (under 10% of the time)")
        self.watch_on.setChecked(True)
        self.probe_sentence = QtWidgets.QLineEdit()
        self.probe_sentence.setPlaceholderText("a held-out sentence whose every word the tokenizer knows")
        self.probe_sentence.setToolTip("Its attention (every layer × head) is kept at each probe. Left empty: "
                                       "the first held-out sentence with no [UNK] token (the Heads page names it)")
        self.probe_every = QtWidgets.QSpinBox(minimum=0, maximum=1_000_000, value=0, singleStep=10)
        self.probe_every.setSpecialValueText("auto (~30 probes)")
        self.probe_set = QtWidgets.QPlainTextEdit(default_probe_set_text())
        self.probe_set.setToolTip("One sentence per line: their cosine matrix is kept at each probe "
                                  "(paraphrase pairs next to each other show them drawing together)")
        self.probe_set.setFixedHeight(90)
        form.addRow(self.watch_on)
        form.addRow("Probe sentence", self.probe_sentence)
        form.addRow("Probe every", self.probe_every)
        form.addRow("Probe set", self.probe_set)

    def settings(self) -> dict:
        """The TrainConfig fields; ValueError (worded for the form) for a probe set of one sentence."""
        from core.train.watch import check_probe_set
        lines = [line.strip() for line in self.probe_set.toPlainText().splitlines() if line.strip()]
        try:
            # the shipped default stays () in the config, as on the command line
            probe_set = () if lines == default_probe_set_text().splitlines() else tuple(check_probe_set(lines))
        except Exception as e:  # noqa: BLE001 - InputError, worded for the form
            raise ValueError(str(e)) from None
        return dict(watch=self.watch_on.isChecked(), probe_sentence=self.probe_sentence.text().strip(),
                    probe_every=self.probe_every.value(), probe_set=probe_set)
