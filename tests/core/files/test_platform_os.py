"""Portable by construction: outside core/files/platform_os.py no module of app/, core/ or index/ imports
a POSIX-only module or calls what Windows lacks or does differently (read from the source, so it
runs in `make test`; tests/project/test_no_posix_modules.py runs the CLI without them). And the command
line stops on Ctrl-C alone where the OS sends no SIGTERM (sys.platform simulated)."""
from __future__ import annotations

import ast
import signal
import sys

import pytest

from tests.support.paths import ROOT

POSIX_ONLY = {"fcntl", "resource", "pwd", "grp", "termios", "posix", "pty", "tty", "syslog"}
# os functions that are missing on Windows, or (os.kill) do something else there
OS_CALLS = {"kill", "pread", "pwrite", "statvfs", "getuid", "geteuid", "fork", "setsid", "killpg",
            "getpgid", "mkfifo", "getloadavg", "sched_getaffinity", "fchmod", "fchown", "chown",
            "uname", "nice"}
HOME = "core/files/platform_os.py"


def _sources():
    for package in ("app", "core", "index"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel != HOME:
                yield rel, ast.parse(path.read_text(encoding="utf-8"), rel)


def test_no_posix_only_import_and_no_windows_missing_call_outside_the_platform_module():
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [f"{rel}:{node.lineno} import {a.name}" for a in node.names
                          if a.name.split(".")[0] in POSIX_ONLY]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in POSIX_ONLY:
                found.append(f"{rel}:{node.lineno} from {node.module}")
            elif (isinstance(node, ast.Attribute) and node.attr in OS_CALLS
                  and isinstance(node.value, ast.Name) and node.value.id == "os"):
                found.append(f"{rel}:{node.lineno} os.{node.attr}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and node.value.startswith("/proc/"):
                found.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not found, "belongs in core/files/platform_os.py (with a fallback): " + "; ".join(found)


def test_the_platform_module_imports_fcntl_only_inside_functions():
    tree = ast.parse((ROOT / HOME).read_text(encoding="utf-8"))
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top for a in n.names} | {n.module for n in top if isinstance(n, ast.ImportFrom)}
    assert not names & POSIX_ONLY


def test_where_no_sigterm_comes_the_cli_handles_ctrl_c_alone(monkeypatch, capsys):
    from app.cli import main
    from core.files import platform_os
    monkeypatch.setattr(sys, "platform", "win32")
    assert platform_os.stop_signals() == (signal.SIGINT,)
    monkeypatch.setattr(sys, "platform", "linux")     # libraries branch on it: Windows for ours alone
    monkeypatch.setattr(platform_os, "windows", lambda: True)
    installed = []
    real = signal.signal
    monkeypatch.setattr(signal, "signal", lambda sig, handler: installed.append(sig) or real(sig, handler))
    assert main(["models"]) == 0
    assert signal.SIGTERM not in installed
    monkeypatch.setattr(platform_os, "windows", lambda: False)
    assert main(["models"]) == 0
    assert signal.SIGTERM in installed               # where the OS sends it, it saves as Ctrl-C does


@pytest.mark.skipif(sys.platform != "linux", reason="reads the handle's mode through Linux's /proc")
def test_a_crash_safe_write_flushes_through_a_handle_windows_accepts(tmp_path, monkeypatch):
    """Windows' fsync (FlushFileBuffers) fails on a read-only handle: the file is flushed through
    one that may write there, and stays read-only on POSIX (a read-only handle suffices)."""
    import fcntl
    import os

    from core.files import platform_os
    from core.files.atomic import atomic_write
    modes = []
    real = os.fsync

    def fsync(fd):
        if os.path.isfile(os.readlink(f"/proc/self/fd/{fd}")):
            modes.append(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE)
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(platform_os, "windows", lambda: True)
    atomic_write(tmp_path / "f", b"x\n")
    monkeypatch.setattr(platform_os, "windows", lambda: False)
    atomic_write(tmp_path / "f", b"y\n")
    assert modes == [os.O_RDWR, os.O_RDONLY] and (tmp_path / "f").read_bytes() == b"y\n"


def test_without_proc_each_reading_falls_back(tmp_path, monkeypatch):
    """macOS and Windows have no /proc: the CPU's name comes from platform, a process's command
    line is unknown (the lock's holder is named by its pid), the umask is read by setting it back."""
    import os

    from core.files import platform_os
    from index.store.durability import describe_holder
    real_path = platform_os.Path
    monkeypatch.setattr(platform_os, "Path",
                        lambda p: real_path(tmp_path / "no-proc" / str(p).lstrip("/")) if str(p).startswith("/proc")
                        else real_path(p))
    assert platform_os.cpu_name()
    assert platform_os.process_argv(os.getpid()) is None
    mask = os.umask(0o027)
    try:
        assert platform_os.current_umask() == 0o027 and os.umask(0o027) == 0o027
    finally:
        os.umask(mask)
    assert describe_holder(os.getpid()) == f"process {os.getpid()}: try again when it has finished"
    assert platform_os.path_of_fd(10_000) is None


def test_every_file_name_is_one_windows_and_macos_can_hold():
    """Their file systems ignore case and Windows forbids some characters and names: no two
    files of the project differ by case alone, and none has such a name."""
    import re
    import shutil
    import subprocess
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\n")
    names = [n for n in names if n]
    assert len({n.lower() for n in names}) == len(names)
    bad = [n for n in names if re.search(r'[<>:"|?*\\]', n) or any(
        re.fullmatch(r"(con|prn|aux|nul|com\d|lpt\d)(\..*)?", part, re.I) or part.endswith((" ", "."))
        for part in n.split("/"))]
    assert not bad
