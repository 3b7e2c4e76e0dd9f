"""Start-up (issue 14): the window is built without torch, transformers or pyqtgraph; the panels
that need them are built when first shown or asked for, and still get what was sent to them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import ROOT, child_env

pytest.importorskip("PySide6", reason="starts the desktop app, which needs PySide6")

BUILD_WINDOW = """
import json, sys
from PySide6.QtWidgets import QApplication
from app.gui.shell.main_window import MainWindow
app = QApplication([])
w = MainWindow()
w.show()
app.processEvents()
heavy = ("torch", "transformers", "pyqtgraph", "app.gui.panels.attention.panel", "app.gui.panels.train.panel",
         "app.gui.panels.map.panel")
before = {m: m in sys.modules for m in heavy}
tabs = [w.tabs.tabText(i) for i in range(w.tabs.count())]
attention = type(w.optional_panels["Attention"]).__name__
print(json.dumps({"before": before, "tabs": tabs, "attention": attention,
                  "pyqtgraph_after": "pyqtgraph" in sys.modules}))
"""


def test_window_is_built_without_torch_transformers_or_pyqtgraph(tmp_path):
    env = child_env(QT_QPA_PLATFORM="offscreen", ENCODERSCOPE_DATA_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", BUILD_WINDOW], capture_output=True, text=True, env=env,
                       timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["before"] == {m: False for m in got["before"]}
    # every tab is there from the start; asking for a panel builds it (and imports pyqtgraph)
    assert got["tabs"] == ["Search", "Corpus", "Attention", "Step by step", "Fill-mask", "Intervene", "Causal",
                       "Features", "Train", "Map"]
    assert got["attention"] == "AttentionPanel"
    assert got["pyqtgraph_after"]


def test_panels_are_built_when_their_tab_is_shown(qtbot, make_window):
    w = make_window(start=False)
    assert not any(w.optional_panels.built(t) for t in w.optional_panels)
    assert "Train" in w.optional_panels and len(w.optional_panels) == 7   # neither builds
    assert not w.optional_panels.built("Train")
    w.show_panel("Train")
    assert w.optional_panels.built("Train")
    panel = w.optional_panels["Train"]
    assert w.findChild(type(panel), "train_panel") is panel
    assert not w.optional_panels.built("Fill-mask")


def test_a_sentence_sent_to_an_unbuilt_panel_arrives(qtbot, make_window):
    w = make_window(start=False)
    w.state.request_inspect("the cat sat", "a dog ran")
    attention = w.optional_panels["Attention"]
    assert w.tabs.currentWidget().widget() is attention
    assert attention.text_edit.text() == "the cat sat"
    assert attention.pair_edit.text() == "a dog ran"
    w.state.request_walkthrough("the storm is coming")
    walk = w.optional_panels["Step by step"]
    assert w.tabs.currentWidget().widget() is walk
    assert walk.text_edit.text() == "the storm is coming"


def test_a_map_built_after_a_search_shows_that_search(qtbot, make_window, sample_store_template):
    w = make_window(sample_store_template)
    w._prebuild.stop()       # no idle-time building in this test
    w.search_panel.query.setText("a storm is coming")
    w.search_panel.search_now()
    qtbot.waitUntil(lambda: w._last_search is not None, timeout=60_000)
    assert not w._map.built("Map")
    assert w.map_panel._last_search is w._last_search


def test_the_transformers_tokenizer_loads_in_the_background_after_the_panels(
        qtbot, make_window, sample_store_template, monkeypatch):
    """A start that embeds with the kept tokenizer pipeline has no transformers tokenizer yet;
    once the idle-time panel building is done it is loaded in a worker (the Attention panel's
    first inspection loads it too, but that panel may show another model), so a first Why or
    Fill-mask request does not wait for it."""
    import core.encoder.backends as cb
    from core.encoder.sources import resolve
    from core.encoder.tokenizer import ModelTokenizer
    ModelTokenizer(resolve("minilm").folder, 512)       # from here on the pipeline is kept
    monkeypatch.setattr(cb, "_cache", {})                # a new model object, as in a new process
    monkeypatch.setattr("app.gui.shell.main_window.PREBUILD_DELAY_MS", 600_000)   # idle time on demand below
    w = make_window(sample_store_template)
    tokens = w.state.backend.model_tokenizer
    assert not tokens.loaded, "the model should have loaded without the transformers tokenizer"
    built = []
    monkeypatch.setattr(w, "_warm_tokenizer", lambda real=w._warm_tokenizer: (built.append(
        all(w.optional_panels.built(t) for t in w.optional_panels) and w._map.built("Map")), real()))
    w._prebuild.start(0)
    qtbot.waitUntil(lambda: bool(built), timeout=120_000)
    assert built == [True], "the tokenizer is loaded once every panel is built"
    qtbot.waitUntil(lambda: tokens.loaded and not w.state.jobs.busy, timeout=120_000)
    assert len(w.state.backend.tokenizer) == len(tokens)


def test_the_tokenizer_warm_up_loads_it_without_any_panel(qtbot, make_window, sample_store_template, monkeypatch):
    import core.encoder.backends as cb
    from core.encoder.sources import resolve
    from core.encoder.tokenizer import ModelTokenizer
    ModelTokenizer(resolve("minilm").folder, 512)
    monkeypatch.setattr(cb, "_cache", {})
    monkeypatch.setattr("app.gui.shell.main_window.PREBUILD_DELAY_MS", 600_000)
    w = make_window(sample_store_template)
    tokens = w.state.backend.model_tokenizer
    assert not tokens.loaded
    w._warm_tokenizer()
    qtbot.waitUntil(lambda: tokens.loaded and not w.state.jobs.busy, timeout=120_000)
    assert not w.optional_panels.built("Attention") and not w.optional_panels.built("Fill-mask")
    w._warm_tokenizer()                     # loaded: nothing to start
    assert not w.state.jobs.busy
