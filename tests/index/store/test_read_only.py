"""A healthy store on read-only media (a read-only mount, `chattr +i`) is searchable, and writing
to it is one clear `error:` line.

The media are real: a read-only bind mount of the store's folder (`mount --bind` then
`mount -o remount,ro,bind`) and the immutable attribute (`chattr -R +i`), which stop root too.
Each case is skipped where the machine does not allow it (no CAP_SYS_ADMIN, a file system
without attributes).
"""
import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.store_contract import needs_milvus
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import make_tiny_bert

TEXTS = ["the cat sat on the mat", "the dog ran in the park", "a bird flew over the river"]


def _run(*cmd) -> bool:
    return subprocess.run(cmd, capture_output=True).returncode == 0


@contextlib.contextmanager
def read_only_mount(folder, tmp_path):
    view = tmp_path / "ro-view"
    view.mkdir()
    if not _run("mount", "--bind", str(folder), str(view)):
        pytest.skip("mount --bind is not allowed here")
    try:
        if not _run("mount", "-o", "remount,ro,bind", str(view)):
            pytest.skip("a read-only remount is not allowed here")
        yield view
    finally:
        _run("umount", str(view))


@contextlib.contextmanager
def immutable(folder, tmp_path):
    if not _run("chattr", "-R", "+i", str(folder)):
        _run("chattr", "-R", "-i", str(folder))
        pytest.skip("chattr +i is not possible here")
    try:
        yield folder
    finally:
        _run("chattr", "-R", "-i", str(folder))


def copies() -> set:
    return set(Path(tempfile.gettempdir()).glob("encoderscope-lite-readonly-*"))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("m") / "m")


@pytest.mark.parametrize("engine", ["faiss", pytest.param("lite", marks=needs_milvus)])
@pytest.mark.parametrize("media", [read_only_mount, immutable])
def test_a_cleanly_closed_store_on_read_only_media_is_searchable(tmp_path, model, capsys,
                                                                 engine, media):
    (tmp_path / "a.txt").write_text("\n".join(TEXTS) + "\n", encoding="utf-8")
    shared = tmp_path / "shared"
    shared.mkdir()
    code, _, err = cli(capsys, "ingest", tmp_path / "a.txt", "--model", model, "--store",
                       (f"milvus-lite:{shared / 's'}" if engine == "lite" else shared / "s"),
                       "--quiet")
    assert code == 0, err
    code, before, _ = cli(capsys, "search", TEXTS[1], "--store",
                          (f"milvus-lite:{shared / 's'}" if engine == "lite" else shared / "s"))
    copies_before = copies()
    with media(shared, tmp_path) as root:
        store = f"milvus-lite:{root / 's'}" if engine == "lite" else str(root / "s")
        code, out, err = cli(capsys, "search", TEXTS[1], "--store", store)
        assert code == 0 and out == before and out.split()[2:6] == TEXTS[1].split()[:4], err
        code, out, err = cli(capsys, "info", "--store", store)
        assert code == 0 and "sentences 3" in out, err
        if engine == "faiss":
            code, out, err = cli(capsys, "info", "--check", "--store", store)
            assert code == 0 and "check: ok: 3 sentences verified" in err
        for argv in (["ingest", tmp_path / "a.txt", "--quiet"], ["remove", "1"]):
            code, out, err = cli(capsys, *argv, "--store", store)
            line = [x for x in err.splitlines() if x.startswith("error: ")]
            assert code == 2 and len(line) == 1 and "intact" in line[0], err
            assert "damaged" not in line[0] and "backup" not in line[0]
    assert copies() == copies_before          # Lite's reading copies are removed on close


def test_a_store_not_closed_cleanly_on_read_only_media_says_so(tmp_path, model, capsys):
    """Its last commits are in the WAL, which only a writer can fold in: one line saying what
    to do, never 'damaged'."""
    from core.encoder.backends import get_backend
    from index.opening import open_store
    shared = tmp_path / "shared"
    s = open_store(shared / "s", writable=True, create=True,
                   fingerprint=get_backend(str(model)).fingerprint("mean"))
    s.add_texts(TEXTS, get_backend(str(model)))
    s.save()
    shutil.copytree(shared / "s", tmp_path / "copy")     # as if the writer had died here
    s.close()
    shutil.rmtree(shared / "s")
    shutil.copytree(tmp_path / "copy", shared / "s")
    assert (shared / "s" / "store.db-wal").stat().st_size > 0
    with read_only_mount(shared, tmp_path) as root:
        code, out, err = cli(capsys, "search", TEXTS[0], "--store", root / "s")
        assert code == 2 and "read-only media and was not closed cleanly" in err
        assert "damaged" not in err


@needs_milvus
def test_milvus_lite_on_a_full_disk_is_one_error_line_without_its_tracebacks(tmp_path, model,
                                                                            capsys):
    """A 3 MiB tmpfs filled by a Lite ingest: Milvus Lite's own logged tracebacks (one per
    failed flush) stay out of the output; the store's worded line is all."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if not _run("mount", "-t", "tmpfs", "-o", "size=3M", "tmpfs", str(disk)):
        pytest.skip("mounting a tmpfs is not allowed here")
    try:
        (tmp_path / "big.txt").write_text(
            "".join(f"the cat number {i} sat on the mat near tree {i * 7}\n" for i in range(20000)),
            encoding="utf-8")
        # a process of its own: the CLI's logging goes to its stderr, as a user sees it
        p = subprocess.run([sys.executable, "-m", "app.cli", "ingest", str(tmp_path / "big.txt"),
                            "--model", str(model), "--store", f"milvus-lite:{disk / 's'}",
                            "--quiet"], capture_output=True, text=True, timeout=600,
                           cwd=ROOT)
        code, err = p.returncode, p.stderr
        assert code == 2 and "No space left on device" in err, err
        assert [x for x in err.splitlines() if x.strip()] == \
            [x for x in err.splitlines() if x.startswith("error: ")], err
    finally:
        _run("umount", str(disk))
