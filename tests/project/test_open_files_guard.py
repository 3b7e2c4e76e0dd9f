"""The guard of tests/support/open_files_guard.py catches what Windows refuses (a rename onto, or a
delete of, a file this process holds open or mapped) and lets the rest through."""
from __future__ import annotations

import mmap
import os

import pytest

from tests.support.open_files_guard import watch

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"),
                                reason="the guard reads Linux's /proc (elsewhere it sees nothing)")


def test_a_replace_onto_an_open_file_and_a_delete_of_one_are_caught(tmp_path):
    target, new = tmp_path / "target", tmp_path / "new"
    target.write_bytes(b"old")
    new.write_bytes(b"new")
    with watch() as found:
        with open(target, "rb"):
            os.replace(new, target)
        assert found == [("replace", str(target.resolve()))]
        found.clear()
        other = tmp_path / "other"
        other.write_bytes(b"x")
        with open(other, "rb"):
            other.unlink()
        assert found == [("unlink", str(other.resolve()))]


def test_a_mapped_file_counts_as_open_and_closed_files_pass(tmp_path):
    mapped, free = tmp_path / "mapped", tmp_path / "free"
    mapped.write_bytes(b"x" * 4096)
    free.write_bytes(b"y")
    with watch() as found:
        with open(mapped, "rb") as f:
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        os.unlink(mapped)                    # the handle is closed, the mapping is not
        view.close()
        (tmp_path / "new").write_bytes(b"z")
        os.replace(tmp_path / "new", free)   # nothing holds `free`: allowed
        os.unlink(free)
    assert found == [("unlink", str(mapped.resolve()))]


def test_a_folder_holding_an_open_file_cannot_be_renamed(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("{}\n", encoding="utf-8")
    with watch() as found:
        with open(folder / "metrics.jsonl", "a", encoding="utf-8"):
            folder.rename(tmp_path / "old")
        (tmp_path / "old").rename(folder)              # closed again: allowed
    assert found == [("rename", str((folder / "metrics.jsonl").resolve()))]


def test_every_guarded_test_module_exists():
    """A test file moved or renamed would silently drop out of the guard."""
    from tests.conftest import GUARDED
    from tests.support.paths import ROOT
    missing = [name for name in GUARDED if not (ROOT / (name.replace(".", "/") + ".py")).is_file()]
    assert not missing


def test_only_flocks_holder_may_delete_its_held_lock_file(tmp_path, monkeypatch):
    """The one exception: flock's kind (never run on Windows) deletes the lock file it holds.
    Under Windows' kind that delete is caught, and so is any other delete of an open file:
    one merely open, or held by a shared flock, beside the exclusive one."""
    import fcntl

    from core.files import platform_os

    def delete_while(kind, how):
        monkeypatch.setenv(platform_os.LOCK_ENV, kind)
        path = tmp_path / f"{kind}-{how}"
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        try:
            if how != "open":
                fcntl.flock(fd, fcntl.LOCK_EX if how == "exclusive" else fcntl.LOCK_SH)
            with watch() as found:
                os.unlink(path)
            return found
        finally:
            os.close(fd)

    assert delete_while("posix", "exclusive") == []
    for kind, how in (("windows", "exclusive"), ("posix", "open"), ("posix", "shared")):
        assert [op for op, _ in delete_while(kind, how)] == ["unlink"], (kind, how)
