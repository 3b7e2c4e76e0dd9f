"""`ingest` into a store folder this user may not look inside is one `error:` line, as `search`
on the same folder is, never a PermissionError traceback. Run as a real other user when the tests
run as root (a forked child drops to `nobody`), and with the refusal simulated everywhere."""
from __future__ import annotations

import io
import os
import shutil
import sys
import tempfile

import pytest

from tests.support.tiny_models import one_error, run_cli

MODEL = "random:dim=32,layers=1,heads=2,ffn=64,seed=1"
SAYS = "permission denied; ask its owner for read access, or open a copy you can read"


@pytest.fixture()
def locked(capsys):
    """A store in a folder only root may enter (0700), beside a text file anyone may read."""
    base = tempfile.mkdtemp(prefix="unreadable-", dir="/tmp")
    os.chmod(base, 0o755)
    lines = os.path.join(base, "a.txt")
    with open(lines, "w", encoding="utf-8") as f:
        f.write("the cat sat on the mat\nthe dog ran in the park\n")
    os.chmod(lines, 0o644)
    store = os.path.join(base, "s")
    code, _, err = run_cli(["ingest", lines, "--store", store, "--model", MODEL, "--quiet"], capsys)
    assert code == 0, err
    os.chmod(store, 0o700)
    yield store, lines
    shutil.rmtree(base)


def _as_nobody(argv) -> tuple[int, str]:
    """`encoderscope ARGV` in a forked child that is the user `nobody`: (exit code, stderr)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        said = "no result"
        try:
            os.setgid(65534)
            os.setuid(65534)
            from app.cli import main
            sys.stderr = err = io.StringIO()
            sys.stdout = io.StringIO()
            try:
                code = main(argv)
            except BaseException as e:    # noqa: BLE001 - reported to the parent
                code = f"raised {type(e).__name__}: {e}"
            said = f"{code}\n{err.getvalue()}"
        finally:
            os.write(w, said.encode())
            os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, encoding="utf-8") as f:
        code, _, err = f.read().partition("\n")
    return int(code) if code.lstrip("-").isdigit() else code, err


def _argvs(store, lines):
    return [["ingest", lines, "--store", store, "--model", MODEL],
            ["ingest", lines, "--store", os.path.join(store, "inner"), "--model", MODEL],
            ["ingest", lines, "--store", store, "--model", MODEL, "--whiten"],
            ["ingest", lines, "--store", store, "--model", MODEL, "--rebuild"],
            ["search", "cat", "--store", store, "--model", MODEL]]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="dropping to another user needs root")
def test_ingest_into_a_folder_another_user_owns_is_one_line(locked):
    store, lines = locked
    from app.cli import main
    main(["search", "x", "--store", "/nonexistent-store", "--model", MODEL])   # imports done as root
    for argv in _argvs(store, lines):
        code, err = _as_nobody(argv)
        assert "Traceback" not in err and code == 2, (argv, code, err)
        line = one_error(code, err)
        assert line.startswith("error: cannot read the store folder /tmp/unreadable-"), line
        assert line.endswith(SAYS), line


def test_ingest_into_a_folder_it_may_not_list_is_one_line(locked, capsys, monkeypatch):
    store, lines = locked
    real = os.listdir

    def listdir(path="."):
        if str(path).startswith(store):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)
    monkeypatch.setattr(os, "listdir", listdir)
    for argv in _argvs(store, lines):
        code, _, err = run_cli(argv, capsys)
        line = one_error(code, err)
        assert line.startswith(f"error: cannot read the store folder {store}") and line.endswith(SAYS), line
