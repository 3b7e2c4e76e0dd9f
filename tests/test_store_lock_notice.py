"""A writer waiting for another writer's lock on a Milvus server tells its user whom it waits
for and for how long: a `note:` line on the command line's stderr, repeated while it waits,
and the app's progress text. The lock is a real one on the session's server, held by a live
holder that renews it."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import uuid

import pytest

from index.locations import open_store
from tests.test_store_support import FakeBackend

pytest.importorskip("pymilvus")

D = 16
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The real command line (app.cli.main) with the waiter's notices due sooner than a person needs.
WAITER = """
import sys
from index.milvus import lease
lease.NOTICE_AFTER, lease.SAY_EVERY = 0.3, 1.0
from app.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _held_store(server):
    """A store of three sentences and its writer lock, held here as `encoderscope ingest`."""
    from index.milvus import lease
    b = FakeBackend(dim=D)
    name = "t" + uuid.uuid4().hex[:12]
    loc = f"{server.uri}?collection={name}"
    with open_store(loc, create=True, fingerprint=b.fingerprint(), index="flat") as s:
        s.add_texts(["one", "two", "three"], b)
        real, lease.command_of = lease.command_of, lambda pid: "ingest"
        try:
            held = lease.ServerWriterLock(s._client, s._call, name, server.uri).acquire()
        finally:
            lease.command_of = real
    return loc, name, held


def test_the_command_line_says_whom_it_waits_for_and_for_how_long(milvus_server, monkeypatch):
    loc, name, held = _held_store(milvus_server)
    threading.Timer(4.0, held.release).start()
    p = subprocess.run([sys.executable, "-c", WAITER, "remove", "2", "--store", loc],
                       cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    notes = [line for line in p.stderr.splitlines() if line.startswith("note: waiting for")]
    assert len(notes) >= 2, p.stderr                 # said again while the wait goes on
    who = f"`encoderscope ingest`, process {os.getpid()} on {socket.gethostname()} has held it for"
    for line in notes:
        assert f"the writer lock of {name}" in line and who in line
        assert "waited " in line and "giving up after 600 s" in line
    waited = [int(line.split("waited ")[1].split(" s")[0]) for line in notes]
    assert waited == sorted(waited) and waited[-1] > waited[0]
    assert f"note: took the writer lock of {name} after waiting" in p.stderr
    assert "WARNING" not in p.stderr and "Traceback" not in p.stderr
    with open_store(loc, writable=False) as s:
        assert sorted(r["text"] for r in s.iter()) == ["one", "three"]


def test_the_app_shows_the_wait_in_its_progress_text(milvus_server, monkeypatch, qtbot):
    from PySide6.QtCore import QObject, Signal

    from app.gui.widgets.job_progress import JobProgress
    from app.gui.workers import JobRunner
    from index.milvus import lease

    class State(QObject):
        job_started = Signal(object)

    monkeypatch.setattr(lease, "NOTICE_AFTER", 0.2)
    monkeypatch.setattr(lease, "SAY_EVERY", 0.5)
    loc, name, held = _held_store(milvus_server)
    state = State()
    bar = JobProgress(state)
    qtbot.addWidget(bar)
    runner = JobRunner()

    def remove(progress, cancel):
        with open_store(loc) as s:
            return s.remove([3])
    job = runner.start("remove", remove, label="Removing sentences")
    state.job_started.emit(job)
    try:
        qtbot.waitUntil(lambda: "waiting for the writer lock" in bar.label.text(), timeout=20_000)
        text = bar.label.text()
        assert name in text and f"process {os.getpid()} on {socket.gethostname()}" in text
        assert "`encoderscope ingest`" in text and "has held it for" in text
        assert job.running
    finally:
        held.release()
    qtbot.waitUntil(lambda: not job.running, timeout=30_000)
    assert job.state == "done" and job.value == [3]
    runner.shutdown()
