"""The package as a user installs it: a wheel built from the tree, installed into a fresh venv
(not editable), runs from another folder and finds its sample corpus; dev tooling stays out."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

from tests.support.paths import ROOT

tomllib = pytest.importorskip("tomllib")   # Python 3.11+

SHIPPED = ("app", "core", "index", "assets", "pyproject.toml", "README.md", "LICENSE")


def declared_packages() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return config["tool"]["setuptools"]["packages"]


def test_the_package_list_names_every_package_and_the_assets():
    found = find_packages(str(ROOT), include=["app*", "core*", "index*"])
    assert sorted(declared_packages()) == sorted([*found, "encoderscope_assets"])


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the shipped part of the tree (the build writes build/ and
    egg-info next to the sources: not into the checkout)."""
    src = tmp_path_factory.mktemp("src")
    for name in SHIPPED:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "-w", str(out), str(src)], check=True, capture_output=True, timeout=300)
    (whl,) = out.glob("encoderscope-*.whl")
    return whl


def test_the_wheel_ships_the_sample_corpus_and_no_dev_tooling(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "encoderscope_assets/sample_corpus.txt" in names
    assert "encoderscope_assets/paraphrase_pairs.tsv" in names
    assert {"encoderscope_assets/eval_pairs.tsv", "encoderscope_assets/eval_queries.tsv"} <= set(names)
    assert not [n for n in names if n.startswith(("tools/", "tests/", "bench/")) or "screenshots" in n]


def test_the_installed_wheel_searches_the_sample_corpus_from_another_folder(wheel, tmp_path):
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=120)
    python = fresh / "bin" / "python"
    # The dependencies (torch, faiss, the packaged model ...) come from this environment's
    # site-packages, added as a plain path: its .pth files (the editable install of the
    # checkout among them) are not run, so `app`, `core` and `index` can only come from the wheel.
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(ENCODERSCOPE_DATA_DIR=str(tmp_path / "data"), HF_HUB_OFFLINE="1")

    def run(*argv):
        r = subprocess.run([str(fresh / "bin" / "encoderscope"), *argv], cwd=elsewhere, env=env,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr
        return r.stdout

    where = subprocess.run([str(python), "-c", "import app, core.assets; print(app.__file__); "
                            "print(core.assets.sample_corpus())"], cwd=elsewhere, env=env,
                           check=True, capture_output=True, text=True).stdout.split()
    assert all(Path(p).is_relative_to(site) for p in where), where   # the wheel's, not the checkout's
    run("ingest", "--sample-corpus", "--store", str(tmp_path / "store"), "--quiet")
    import json
    hits = json.loads(run("search", "the biggest planet has dozens of moons", "--store", str(tmp_path / "store"),
                          "-k", "3", "--json"))["results"]
    sample = Path(where[1]).read_text(encoding="utf-8").splitlines()
    assert len(hits) == 3 and all(h["text"] in sample for h in hits)
    assert "Jupiter" in hits[0]["text"]
