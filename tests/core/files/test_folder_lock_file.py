"""The output folder's lock file (`.<name>.writer`, beside the folder) is removed by its holder,
and removing it never lets two processes hold the lock at once, under both lock kinds (flock:
unlinked while held; Windows' byte lock: deleted after closing unless another handle has it
open, emulated on Linux): nothing is left beside a `train --out`; processes taking and giving
it back as fast as they can are never inside together; a holder that locked the file just
removed goes on to the new one; a kill -9'd holder's file is taken, then removed, by the next
run. Guarded (tests/conftest.py GUARDED): flock's delete of its held file is its one allowed
delete of an open file, Windows' kind deletes only closed files."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from core.files import platform_os
from tests.cli.test_train import TINY
from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import cli_clean as cli
from tests.support.train_corpus import write_corpus

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Windows' byte lock is simulated with "
                                "Linux's OFD locks (tests/index/store/test_portable_locks.py)")
KINDS = ["posix", "windows"]


@pytest.fixture(params=KINDS)
def kind(request, monkeypatch):
    """The lock kind of this test and of the processes it starts."""
    monkeypatch.setenv(platform_os.LOCK_ENV, request.param)
    assert platform_os.file_lock().name == request.param
    return request.param


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("lockfile-corpus") / "gen.txt", n=300)


def _train(capsys, corpus, out):
    code, _, err = cli(capsys, "train", "--corpus", corpus, "--out", out, "--steps", "2",
                       "--overwrite", "--no-progress", *TINY)
    assert code == 0, err


def test_train_leaves_nothing_beside_its_output_folder(kind, corpus, tmp_path, capsys):
    parent = tmp_path / "runs"
    _train(capsys, corpus, parent / "run")
    assert sorted(p.name for p in parent.iterdir()) == ["run"]
    _train(capsys, corpus, parent / "run")                 # a run into the same folder again
    assert sorted(p.name for p in parent.iterdir()) == ["run"]


def test_an_experiment_leaves_no_lock_file_beside_its_folder_or_its_runs(kind, corpus, tmp_path, capsys):
    """The experiment's lock (beside DIR) and each run's (beside DIR/<label>, inside DIR)."""
    lab = tmp_path / "lab"
    code, _, err = cli(capsys, "experiment", "norm", "--corpus", corpus, "--out", lab, "--steps", "2",
                       "--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64", "--threads", "1",
                       "--max-length", "24", "--max-sentences", "100", "--eval-every", "1000")
    assert code == 0, err
    assert [p.name for p in tmp_path.iterdir()] == ["lab"]
    runs = sorted(p.name for p in lab.iterdir())
    assert len(runs) >= 2 and not [name for name in runs if name.endswith(".writer")], runs


def test_contending_processes_are_never_inside_together(kind, tmp_path):
    """Three processes take and give back the lock 300 times each; each, inside, checks that
    nobody else is (an O_EXCL marker, a counter added to by read, pause, write)."""
    shared = tmp_path / "shared"
    shared.mkdir()
    lock = tmp_path / ".run.writer"
    env = child_env()
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.lock_contender", str(lock),
                               str(shared), "300"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = [json.loads(p.communicate(timeout=240)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    for r in results:
        assert (r["held"], r["overlaps"], r["gone_while_held"]) == (300, 0, 0), r
    assert (shared / "count").read_text() == "900"          # no addition lost to an overlap
    assert not lock.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["shared"]


def test_a_holder_that_locked_the_removed_file_goes_on_to_the_new_one(kind, tmp_path):
    """B opens the lock file; before B locks it, A takes the lock and gives it back (removing the
    file). flock: B locks the removed file, sees that the path no longer names it and takes
    the new one. Windows' kind: A's delete is refused while B's handle is open, so B takes the
    same file. Either way B holds the file at the path, and C is refused."""
    from core.files.folder_lock import ExclusiveFile, LockBusy
    path = tmp_path / ".run.writer"
    opens = []

    def open_then_let_a_run(p, flags, mode):
        fd = platform_os.open_nofollow(p, flags, mode)
        opens.append(p)
        if len(opens) == 1:
            a = ExclusiveFile(path, remove=True)
            a.acquire(b"A")
            a.release()
            assert path.exists() == (kind == "windows")    # flock: gone; Windows: kept for B
        return fd

    b = ExclusiveFile(path, open_then_let_a_run, remove=True)
    b.acquire(b"B")
    held = os.fstat(b._fd)
    assert (os.lstat(path).st_dev, os.lstat(path).st_ino) == (held.st_dev, held.st_ino)
    assert len(opens) == (1 if kind == "windows" else 2)    # flock: the removed file, then the new one
    with pytest.raises(LockBusy) as e:
        ExclusiveFile(path, remove=True).acquire(b"C")
    assert e.value.record == b"B"
    b.release()
    assert not path.exists()


def test_a_killed_holders_lock_is_taken_and_removed_by_the_next_run(kind, corpus, tmp_path, capsys):
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from core.files.folder_lock import OutputFolderLock; "
         "OutputFolderLock(sys.argv[1], 'train').acquire(); print('held', flush=True); time.sleep(60)",
         str(out)], cwd=ROOT, env=child_env(), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
    left = tmp_path / ".run.writer"
    assert json.loads(left.read_text())["pid"] == holder.pid   # left behind, naming the dead holder
    _train(capsys, corpus, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
