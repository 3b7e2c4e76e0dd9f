"""The store's and the output folder's lock through the Windows implementation
(core.files.platform_os.WindowsLock, forced by $ENCODERSCOPE_FILE_LOCK=windows; on Linux its msvcrt
byte lock is an open-file-description lock with the same semantics): the store contract and
trust tests run a second time with it (two writers, kill -9 during ingest, a symlinked lock
refused, a foreign folder kept), and it is shown to be that lock, not flock, that holds."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from core.files import platform_os
from tests.core.files import test_output_folder_lock as folder_lock_tests
from tests.index.faiss import test_durability as durability
from tests.index.store import test_contract as contract
from tests.index.store import test_contract_trust as trust
from tests.index.store import test_files as store_files
from tests.index.store.test_files import made, model  # noqa: F401  (fixtures of the link test)
from tests.support.paths import ROOT, child_env
from tests.support.store_contract import milvus_available
from tests.support.train_corpus import write_corpus

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="Windows' byte lock is simulated with "
                                "Linux's OFD locks; on Windows the other lock tests run it for real")
KINDS = ["faiss", pytest.param("milvus", marks=pytest.mark.skipif(not milvus_available(),
                                                                   reason="needs the [milvus] extra"))]


@pytest.fixture(autouse=True)
def windows_lock(monkeypatch):
    """Every lock of this test, and of the processes it starts, is the Windows implementation."""
    monkeypatch.setenv(platform_os.LOCK_ENV, "windows")
    assert platform_os.file_lock().name == "windows"


@pytest.mark.parametrize("kind", KINDS)
def test_a_second_writer_is_refused(kind, tmp_path):
    trust.test_a_second_writer_on_a_folder_is_refused_while_one_writes(kind, tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_a_foreign_folder_is_kept(tmp_path, kind):
    trust.test_a_foreign_folder_is_kept_intact(tmp_path, kind)


def test_kill9_during_ingest_keeps_finished_ingests(tmp_path):
    durability.test_kill9_during_ingest_keeps_finished_ingests(tmp_path)


@pytest.mark.parametrize("kind", KINDS)
def test_the_store_contract_holds(kind, tmp_path, opened):
    contract.test_remove_count_iterate_get(tmp_path / "a", kind, opened)
    contract.test_cancel_keeps_committed_batches(tmp_path / "b", kind, opened)


def test_a_symlinked_lock_is_refused_and_its_target_kept(tmp_path, model, made, capsys):  # noqa: F811
    for sub in "abc":
        (tmp_path / sub).mkdir()
    store_files.test_the_lock_is_opened_without_following_a_link_planted_after_the_check(tmp_path / "a")
    store_files.test_a_link_in_place_of_a_store_file_is_refused_and_its_target_kept(
        tmp_path / "b", model, made, capsys, "lock")
    folder_lock_tests.test_the_folder_lock_never_writes_through_a_link(tmp_path / "c")


def test_one_lock_for_output_folders_and_stores(tmp_path):
    folder_lock_tests.test_one_lock_implementation_for_output_folders_and_stores(tmp_path)


def test_a_second_experiment_is_refused(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "gen.txt", n=300)
    folder_lock_tests.test_a_second_experiment_into_the_same_folder_is_refused(corpus, tmp_path, capsys)


def _holder(path: Path) -> subprocess.Popen:
    """Another process holding the lock on `path` (the Windows implementation: inherited env)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from core.files.folder_lock import ExclusiveFile; "
         "f = ExclusiveFile(sys.argv[1]); f.acquire(b'holder record'); print(f._lock.name, flush=True); "
         "time.sleep(60)", str(path)], cwd=ROOT, env=child_env(),
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "windows"
    return proc


def test_it_is_the_byte_lock_that_holds_not_flock_and_a_kill_frees_it(tmp_path, monkeypatch):
    from core.files.folder_lock import ExclusiveFile, LockBusy
    path = tmp_path / "lock"
    proc = _holder(path)
    try:
        with pytest.raises(LockBusy) as e:
            ExclusiveFile(path).acquire(b"second")
        assert e.value.record == b"holder record"       # the record stays readable while held
        monkeypatch.setenv(platform_os.LOCK_ENV, "posix")
        flock = ExclusiveFile(path)                      # flock does not see the byte lock:
        flock.acquire(b"flock")                          # what refused above was that lock
        flock.release()
        monkeypatch.setenv(platform_os.LOCK_ENV, "windows")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    mine = ExclusiveFile(path)
    mine.acquire(b"mine")                                # a killed holder frees it at once
    assert path.read_bytes() == b"mine"
    mine.release()


def test_the_byte_lock_lies_past_any_record():
    """Windows locks are mandatory: a locked byte cannot be read, so the record must lie before."""
    assert platform_os.RANGE_START > 64 * 1024


def test_without_o_nofollow_a_link_planted_after_the_check_is_caught(tmp_path, monkeypatch):
    """Windows' open follows links: the fstat after the open must match the lstat, or ELOOP,
    and nothing is written (the victim keeps its bytes)."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me\n")
    path = tmp_path / "lock"
    real_open = os.open

    def plant_then_open(p, flags, mode=0o777):
        if p == str(path) and not os.path.lexists(path):
            path.symlink_to(victim)
        return real_open(p, flags, mode)

    monkeypatch.setattr(os, "open", plant_then_open)
    with pytest.raises(OSError) as e:
        platform_os.open_nofollow(path, os.O_RDWR | os.O_CREAT)
    assert e.value.errno == errno.ELOOP and victim.read_bytes() == b"keep me\n"
    monkeypatch.setattr(os, "open", real_open)
    with pytest.raises(OSError) as e:                     # a link already there: refused at once
        platform_os.open_nofollow(path, os.O_RDWR | os.O_CREAT)
    assert e.value.errno == errno.ELOOP


def test_on_windows_the_lock_kind_and_the_stop_signals(monkeypatch):
    monkeypatch.delenv(platform_os.LOCK_ENV)
    assert platform_os.lock_kind() == ("windows" if sys.platform == "win32" else "posix")
    monkeypatch.setattr(sys, "platform", "win32")
    assert platform_os.lock_kind() == "windows"
    assert platform_os.stop_signals() == (signal.SIGINT,)   # Windows never delivers SIGTERM


def test_pid_alive_never_signals_a_process(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert platform_os.pid_alive(proc.pid) and platform_os.pid_alive(os.getpid())
    finally:
        proc.kill()
        proc.wait()
    assert not platform_os.pid_alive(proc.pid)
