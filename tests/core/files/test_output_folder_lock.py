"""One writer per output folder: a second `train` or `experiment` into a folder a running one
writes is refused with one line naming the first (pid, host, start time), and the first run's
metrics and checkpoint stay its own."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from tests.cli.test_train import TINY
from tests.support.paths import ROOT
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import one_error
from tests.support.train_corpus import write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("lockcorpus") / "gen.txt", n=300)


def _first_training(corpus, out):
    """`encoderscope train` into `out`, really training (its first checkpoint written)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "train", "--corpus", str(corpus), "--out", str(out),
         "--steps", "100000", "--log-every", "5", "--eval-every", "100000",
         "--checkpoint-every", "5", "--no-progress", *TINY],
        cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    line = ""
    while time.time() < deadline and "checkpoint at step" not in line:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            break
    assert "checkpoint at step" in line, line
    return proc


def test_a_second_train_into_a_folder_being_trained_is_refused(corpus, tmp_path, capsys):
    out = tmp_path / "run"
    first = _first_training(corpus, out)
    try:
        code, _, err = cli(capsys, "train", "--corpus", corpus, "--out", out, "--steps", "3",
                           "--overwrite", "--no-progress", *TINY)
        msg = one_error(code, err)
        assert f"process {first.pid} on {socket.gethostname()}" in msg, msg
        assert "`encoderscope train`" in msg and "choose another output folder (--out)" in msg
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=60)
    steps = [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()
             if x.strip() and json.loads(x).get("kind") == "step"]
    assert steps == sorted(set(steps)), "two runs' step events are mixed in one metrics.jsonl"
    # the folder is free again once the first has ended
    code, _, err = cli(capsys, "train", "--corpus", corpus, "--out", out, "--steps", "2",
                       "--overwrite", "--no-progress", *TINY)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]     # no lock file left beside


def test_a_second_experiment_into_the_same_folder_is_refused(corpus, tmp_path, capsys):
    lab = tmp_path / "lab"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from core.files.folder_lock import OutputFolderLock; "
         "OutputFolderLock(sys.argv[1], 'experiment').acquire(); print('held', flush=True); "
         "time.sleep(60)", str(lab)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = cli(capsys, "experiment", "norm", "--corpus", corpus, "--out", lab,
                           "--steps", "2", "--overwrite")
        msg = one_error(code, err)
        assert f"`encoderscope experiment`, process {holder.pid}" in msg, msg
        assert not lab.exists() or not any(lab.iterdir())
    finally:
        holder.kill()
        holder.wait()


def test_the_folder_lock_never_writes_through_a_link(tmp_path):
    from core.files.folder_lock import FolderBusy, OutputFolderLock, lock_path
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep\n")
    lock_path(tmp_path / "run").symlink_to(victim)
    with pytest.raises(FolderBusy):
        OutputFolderLock(tmp_path / "run").acquire()
    assert victim.read_bytes() == b"keep\n"


def test_one_lock_implementation_for_output_folders_and_stores(tmp_path):
    """core's ExclusiveFile is the lock of both: held, it refuses a second holder with the
    first one's record; given back, its record is emptied and the next holder takes it."""
    from core.files.folder_lock import ExclusiveFile, LockBusy, NotRegularFile, OutputFolderLock
    from index.store.durability import WriterLock
    from index.store.errors import StoreError, StoreLocked
    path = tmp_path / "lock"
    first = ExclusiveFile(path)
    first.acquire(b"first holder")
    with pytest.raises(LockBusy) as e:
        ExclusiveFile(path).acquire(b"second")
    assert e.value.record == b"first holder" and path.read_bytes() == b"first holder"
    first.release()
    assert path.read_bytes() == b"" and not first.held
    store = WriterLock(tmp_path).acquire()            # the store's lock: the same file, format
    assert isinstance(store._file, ExclusiveFile) and path.read_text() == f"{os.getpid()}\n"
    with pytest.raises(StoreLocked, match=f"process {os.getpid()}") as e:
        WriterLock(tmp_path).acquire()
    assert e.value.pid == os.getpid()
    store.release()
    assert path.read_bytes() == b""
    folder = OutputFolderLock(tmp_path / "run", "train")
    assert isinstance(folder._file, ExclusiveFile)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile):
        ExclusiveFile(tmp_path / "fifo").acquire(b"x")
    (tmp_path / "s").mkdir()
    os.mkfifo(tmp_path / "s" / "lock")
    with pytest.raises(StoreError, match="is not a regular file; remove it"):
        WriterLock(tmp_path / "s").acquire()
