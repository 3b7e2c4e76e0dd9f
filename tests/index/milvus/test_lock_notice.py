"""A writer waiting for another writer's lock on a Milvus server tells its user whom it waits
for and for how long: a `note:` line on the command line's stderr, repeated while it waits,
and the app's progress text. The lock is a real one on the session's server, held by a live
holder that renews it."""
from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid

import pytest

from index.opening import open_store
from tests.support.paths import ROOT as ROOT_PATH
from tests.support.paths import child_env
from tests.support.store_backends import FakeBackend

pytest.importorskip("pymilvus")

D = 16
ROOT = str(ROOT_PATH)  # a str: it goes into subprocess environments
# The real command line (app.cli.main) with the waiter's notices due sooner than a person needs.
WAITER = """
import sys
from index.milvus import lease
lease.NOTICE_AFTER, lease.SAY_EVERY = 0.3, 1.0
from app.cli import main
sys.exit(main(sys.argv[1:]))
"""


@contextlib.contextmanager
def held_store(server):
    """A store of three sentences and its writer lock, held (and renewed) here as
    `encoderscope ingest` until `release()` or the end of the block."""
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
        try:
            yield loc, name, held
        finally:
            held.release()


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_the_command_line_says_whom_it_waits_for_and_for_how_long(milvus_server, monkeypatch):
    with held_store(milvus_server) as (loc, name, held):
        p = subprocess.Popen([sys.executable, "-c", WAITER, "remove", "2", "--store", loc],
                             cwd=ROOT, env=child_env(), text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        lines = []
        try:
            while sum(line.startswith("note: waiting") for line in lines) < 3:
                line = p.stderr.readline()          # live, while the lock is held
                assert line, "".join(lines)
                lines.append(line)
            held.release()
            t = time.monotonic()
            _out, rest = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
    from index.milvus.lease import LEASE
    assert time.monotonic() - t < LEASE         # taken once given back, not at the lease's end
    err = "".join(lines) + rest
    assert p.returncode == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note: waiting for")]
    assert len(notes) >= 2, err                 # said again while the wait goes on
    who = f"`encoderscope ingest`, process {os.getpid()} on {socket.gethostname()} has held it for"
    for line in notes:
        assert f"the writer lock of {name}" in line and who in line
        assert "waited " in line and "giving up after 600 s" in line
    waited = [int(line.split("waited ")[1].split(" s")[0]) for line in notes]
    assert waited == sorted(waited) and waited[-1] > waited[0]
    assert f"note: took the writer lock of {name} after waiting" in err
    assert "taking over" not in err                        # the holder was alive
    assert "WARNING" not in err and "Traceback" not in err
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
    state = State()
    bar = JobProgress(state)
    qtbot.addWidget(bar)
    runner = JobRunner()
    with held_store(milvus_server) as (loc, name, held):
        def remove(progress, cancel):
            with open_store(loc) as s:
                return s.remove([3])
        job = runner.start("remove", remove, label="Removing sentences")
        state.job_started.emit(job)
        qtbot.waitUntil(lambda: "waiting for the writer lock" in bar.label.text(), timeout=20_000)
        text = bar.label.text()
        assert name in text and f"process {os.getpid()} on {socket.gethostname()}" in text
        assert "`encoderscope ingest`" in text and "has held it for" in text
        assert job.running
    qtbot.waitUntil(lambda: not job.running, timeout=10_000)   # given back: taken at once
    assert job.state == "done" and job.value == [3]
    runner.shutdown()
