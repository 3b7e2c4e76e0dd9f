"""Status-bar widget: the running job's label, a progress bar and a Cancel button."""
from __future__ import annotations

from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QPushButton, QWidget

from app.gui.workers import Job


class JobProgress(QWidget):
    def __init__(self, state, parent=None):
        super().__init__(parent)
        self.state = state
        self._jobs: list[Job] = []
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setFixedWidth(180)
        self.bar.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop the running job (what was already saved is kept)")
        self.cancel_button.clicked.connect(self.cancel_current)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.label)
        lay.addWidget(self.bar)
        lay.addWidget(self.cancel_button)
        state.job_started.connect(self._on_started)
        self.setVisible(False)

    @property
    def current(self) -> Job | None:
        return self._jobs[-1] if self._jobs else None

    def cancel_current(self) -> None:
        if self.current is not None:
            self.current.cancel()
            self.label.setText(f"{self.current.label}: cancelling …")

    def _on_started(self, job: Job) -> None:
        if not getattr(job, "show_progress", True):
            return
        self._jobs.append(job)
        job.progress.connect(lambda *_a, j=job: self._refresh(j))
        job.finished.connect(lambda j=job: self._on_finished(j))
        self._refresh(job)

    def _on_finished(self, job: Job) -> None:
        if job in self._jobs:
            self._jobs.remove(job)
        if self.current is not None:
            self._refresh(self.current)
        else:
            self.setVisible(False)

    def _refresh(self, job: Job) -> None:
        if job is not self.current:
            return
        self.setVisible(True)
        text = job.message or job.label
        if job.is_cancelled:
            text = f"{job.label}: cancelling …"
        self.label.setText(text)
        if job.total > 0:
            self.bar.setRange(0, job.total)
            self.bar.setValue(min(job.done, job.total))
            self.bar.setFormat(f"{job.done:,} / {job.total:,}")
        else:
            self.bar.setRange(0, 0)   # busy indicator
        self.cancel_button.setEnabled(not job.is_cancelled)
