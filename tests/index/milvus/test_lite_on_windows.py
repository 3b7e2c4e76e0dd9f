"""Milvus Lite ships for Linux and macOS only: on Windows (simulated here, sys.platform "win32")
a milvus-lite: location, or a folder that is a Lite store, is refused in one line naming the
platform and offering a FAISS folder or a Milvus server; the folder it offers works. The
`milvus` extra installs on Windows without milvus-lite (a marker in pyproject.toml)."""
from __future__ import annotations

import sys

import pytest

from tests.support.paths import ROOT
from tests.support.tiny_models import cli_clean as cli
from tests.support.tiny_models import one_error

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"


@pytest.fixture
def lines(tmp_path):
    path = tmp_path / "lines.txt"
    path.write_text("the cat sat on the mat\r\nthe dog ran in the park\r\n", encoding="utf-8")
    return path


def test_a_milvus_lite_location_on_windows_is_one_line_with_the_way_out(tmp_path, lines, capsys,
                                                                       monkeypatch):
    folder = tmp_path / "news"
    here = sys.platform
    monkeypatch.setattr(sys, "platform", "win32")
    code, _, err = cli(capsys, "ingest", lines, "--store", f"milvus-lite:{folder}", "--model", RANDOM, "--quiet")
    msg = one_error(code, err)
    assert "Milvus Lite does not run on Windows" in msg
    assert f"--store {folder} (a FAISS folder) or --store http://localhost:19530?collection=NAME" in msg
    assert not folder.exists()
    monkeypatch.setattr(sys, "platform", here)        # the way out it offers, taken (with this
    code, out, err = cli(capsys, "ingest", lines, "--store", folder, "--model", RANDOM, "--quiet")
    assert code == 0 and "added 2" in out, err        # machine's lock; Windows' is tested elsewhere)


def test_the_fix_is_data_and_a_lite_folder_made_elsewhere_is_refused_too(tmp_path, monkeypatch):
    from index.store.errors import LiteUnsupported
    from index.store.location import LITE_MANIFEST, parse_location
    lite = tmp_path / "copied"
    lite.mkdir()
    (lite / LITE_MANIFEST).write_text("{}", encoding="utf-8")   # a Lite store copied from Linux
    assert parse_location(lite).kind == "lite"
    monkeypatch.setattr(sys, "platform", "win32")
    with pytest.raises(LiteUnsupported) as e:
        parse_location(str(lite))
    assert e.value.fix == {"kind": "store_elsewhere", "folder": str(tmp_path / "copied-faiss"),
                           "server": "http://localhost:19530"}
    assert parse_location(str(tmp_path / "plain")).kind == "faiss"     # folders stay FAISS stores
    assert parse_location("http://localhost:19530").kind == "server"


def test_the_milvus_extra_does_not_require_milvus_lite_on_windows():
    tomllib = pytest.importorskip("tomllib")   # Python 3.11+
    from packaging.requirements import Requirement
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "optional-dependencies"]["milvus"]
    lite = [Requirement(r) for r in extra if Requirement(r).name == "milvus-lite"]
    assert len(lite) == 1
    assert not lite[0].marker.evaluate({"platform_system": "Windows"})
    assert lite[0].marker.evaluate({"platform_system": "Linux"})
    assert lite[0].marker.evaluate({"platform_system": "Darwin"})
