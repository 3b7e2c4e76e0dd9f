"""The Train panel (pytest-qt): start a tiny run, watch the curve grow, cancel, resume, use it."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.train_corpus import write_corpus  # noqa: E402

TINY = dict(threads=1, precision="fp32", max_length=24, eval_every=20, eval_sentences=50, dropout=0.0,
            lr=3e-3, log_every=5)


@pytest.fixture
def panel(qtbot, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    from app.gui.panels.train.panel import TrainPanel
    from app.gui.state import AppState

    state = AppState()
    p = TrainPanel(state)
    qtbot.addWidget(p)
    p.show()
    p.set_corpus(write_corpus(tmp_path / "gen.txt", n=800))
    p.layers.setValue(1)
    p.dim.setValue(32)
    p.heads.setValue(2)
    p.ffn.setValue(64)
    p.batch.setValue(16)
    p.device.setCurrentIndex(p.device.findData("cpu"))
    p.out.setText(str(tmp_path / "run"))
    p.overrides = dict(TINY)
    yield p
    state.shutdown(30_000)


def test_defaults_make_a_valid_config(panel):
    panel.overrides = {}
    cfg = panel.config()
    cfg.validate()
    assert cfg.objective == "mlm" and cfg.init == "fresh" and cfg.tokenizer == "word" and cfg.heldout == 0.05
    panel.start_from.setCurrentIndex(2)                 # minilm: the architecture is minilm's
    assert not panel.arch_box.isEnabled() and panel.config().init == "minilm"
    panel.lr.setText("fast")
    assert not panel.start() and "learning rate" in panel.stats.text()


def test_a_relative_output_folder_goes_under_the_models_folder(panel, tmp_path, monkeypatch, qtbot):
    """Not under the process's working directory (a test run once left a trained model in the
    repository that way)."""
    from core.paths import models_dir
    monkeypatch.chdir(tmp_path)
    panel.out.setText("sat")
    assert panel.config().out == str(models_dir() / "sat")
    panel.out.setText("~/runs/x")
    assert panel.config().out == str(Path.home() / "runs" / "x")
    panel.out.setText("sat")
    panel.overrides = dict(TINY, steps=10)
    assert panel.start()
    assert panel.out.text() == str(models_dir() / "sat")
    qtbot.waitUntil(lambda: not panel.state.jobs.busy, timeout=60_000)
    assert (models_dir() / "sat" / "model.safetensors").is_file() and not (tmp_path / "sat").exists()


def test_current_store_is_offered_by_its_location(panel):
    """The open store is a corpus choice; a Milvus store is named by its location (a server
    has no folder), a FAISS store by its folder."""
    class Lite:
        folder, location = Path("/data/team"), "milvus-lite:/data/team"

    class Server:
        folder, location = None, "http://milvus.internal:19530"

    class Faiss:
        folder = Path("/data/mine")
    for store, expect in ((Lite(), "milvus-lite:/data/team"), (Server(), "http://milvus.internal:19530"),
                          (Faiss(), "/data/mine")):
        panel.state.store = store
        panel._refresh_corpora()
        assert panel.corpus.findData(expect) >= 0, expect


def test_start_curve_cancel_resume_and_use(panel, qtbot):
    state = panel.state
    panel.steps.setValue(100_000)                       # long enough that only Cancel ends it
    assert panel.start()
    assert panel.running and not panel.start_button.isEnabled() and panel.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: len(panel.train_points) >= 3 and len(panel.eval_points) >= 2, timeout=60_000)
    assert panel.train_curve.getData()[0] is not None and len(panel.train_curve.getData()[0]) >= 3
    assert "tokens/s" in panel.stats.text() and "ETA" in panel.stats.text()
    panel.cancel()
    qtbot.waitUntil(lambda: not panel.running, timeout=60_000)
    s = panel.summary
    assert s["cancelled"] and 0 < s["steps"] < 100_000
    out = Path(s["out"])
    assert (out / "model.safetensors").is_file() and panel.use_button.isEnabled()

    # Resume: the curve starts from the saved history and goes on.
    stopped_at = s["steps"]
    panel.steps.setValue(stopped_at + 20)
    with qtbot.waitSignal(panel.run_finished, timeout=60_000) as done:
        assert panel.resume(str(out))
    assert done.args[0]["steps"] == stopped_at + 20 and not done.args[0]["cancelled"]
    assert panel.train_points[0][0] <= 10 and panel.train_points[-1][0] == stopped_at + 20

    # "Use this model": the inspector switches to the trained folder (an MLM model: fill-mask
    # works); the corpus model, which search uses, stays.
    corpus_choice = state.choice
    assert panel.use_model()
    assert state.inspect_choice.model == str(out) and state.inspect_choice.backend == "scratch"
    assert state.choice == corpus_choice
    qtbot.waitUntil(lambda: state.inspect_backend is not None and not state.jobs.busy, timeout=60_000)
    assert state.inspect_backend.has_mlm and state.inspect_backend.dim == 32


def test_choosing_the_same_init_folder_twice_adds_it_once(panel, tmp_path):
    before = panel.start_from.count()
    panel.set_init_folder(tmp_path / "ck")
    panel.set_init_folder(tmp_path / "ck")
    assert panel.start_from.count() == before + 1
    assert tuple(panel.start_from.currentData()) == (str(tmp_path / "ck"), "word")
