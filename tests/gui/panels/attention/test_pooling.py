"""The app side of causal attention, clm and attention pooling (pytest-qt): the Train panel's
settings train what they say, and a checkpoint trained with attention pooling is embedded with
it when chosen in the corpus-model bar."""
from __future__ import annotations

import json

from tests.gui.panels.train.test_panel import TINY, panel  # noqa: F401  (the Train panel fixture)


def test_clm_in_the_train_panel_sets_the_causal_mask_and_trains_it(panel, qtbot, tmp_path):  # noqa: F811
    panel.objective.setCurrentIndex(panel.objective.findData("clm"))
    assert panel.attention.currentData() == "causal"
    cfg = panel.config()
    cfg.validate()
    assert (cfg.objective, cfg.attention, cfg.pooling) == ("clm", "causal", "mean")
    panel.attention.setCurrentIndex(panel.attention.findData("bidirectional"))   # refused, with the reason
    assert not panel.start() and "causal attention mask" in panel.stats.text()
    panel.attention.setCurrentIndex(panel.attention.findData("causal"))
    panel.overrides = dict(TINY, steps=10)
    assert panel.start()
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    meta = json.loads((tmp_path / "run" / "encoderscope.json").read_text())
    assert meta["config"]["attention"] == "causal" and meta["training"]["objective"] == "clm"


def test_attention_pooling_in_the_train_panel(panel, qtbot, tmp_path):  # noqa: F811
    panel.pooling.setCurrentIndex(panel.pooling.findData("attention"))
    assert not panel.start() and "contrastive objective" in panel.stats.text()   # mlm cannot train q
    panel.objective.setCurrentIndex(panel.objective.findData("simcse"))
    panel.overrides = dict(TINY, steps=6, dropout=0.1)
    assert panel.start()
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    from safetensors import safe_open
    with safe_open(str(tmp_path / "run" / "model.safetensors"), framework="pt") as f:
        assert "attention_pooling.query" in f.keys()


def test_choosing_an_attention_pooled_checkpoint_selects_its_pooling(qtbot, tmp_path):
    from transformers import AutoTokenizer

    from app.gui.shell.model_bar import ModelBar
    from app.gui.state import AppState
    from core.encoder.model import Encoder
    from core.encoder.sources import DEFAULT_MODEL, resolve
    from core.encoder.weights import save_checkpoint
    from tests.core.encoder.test_parts import small_config

    tok = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder))
    save_checkpoint(Encoder(small_config(vocab_size=len(tok), pooling="attention")), tok, tmp_path / "ap")
    state = AppState()
    bar = ModelBar(state)
    qtbot.addWidget(bar)
    assert state.choice.pooling == "mean"
    bar.set_weights(str(tmp_path / "ap"))
    bar.weights.activated.emit(bar.weights.currentIndex())
    assert state.choice.model == str(tmp_path / "ap") and state.choice.pooling == "attention"
    bar.set_weights("minilm")                       # no learned query there: back to mean
    bar.weights.activated.emit(bar.weights.currentIndex())
    assert state.choice.model == "minilm" and state.choice.pooling == "mean"
    bar.pooling.setCurrentIndex(bar.pooling.findData("max"))    # a chosen pooling stays otherwise
    bar.pooling.activated.emit(bar.pooling.currentIndex())
    from tests.support.tiny_models import make_tiny_distilbert
    bar.set_weights(str(make_tiny_distilbert(tmp_path / "db")))      # a transformers folder
    bar.weights.activated.emit(bar.weights.currentIndex())
    assert state.choice.pooling == "max"
    state.shutdown(10_000)


def test_attention_pooling_is_offered_only_for_a_model_with_a_query(qtbot):
    from types import SimpleNamespace

    from app.gui.shell.model_bar import ModelBar
    from app.gui.state import AppState
    state = AppState()
    bar = ModelBar(state)
    qtbot.addWidget(bar)
    item = bar.pooling.model().item(bar.pooling.findData("attention"))
    state.backend_changed.emit(SimpleNamespace(pooling_query=None))
    assert not item.isEnabled() and "no learned query" in item.toolTip()
    state.backend_changed.emit(SimpleNamespace(pooling_query=object()))
    assert item.isEnabled()
    state.shutdown(10_000)
