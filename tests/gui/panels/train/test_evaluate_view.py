"""The Evaluate page (app/gui/panels/train/evaluate_view.py) and the Corpus model bar's
"Evaluate…" (pytest-qt): the numbers shown equal scipy's on cosines the test embeds itself and
a whitening computed here; a run folder is evaluated with its own model; a bad file or a cancel
keeps the last results."""
from __future__ import annotations

import numpy as np
import pytest

from core import assets

scipy_stats = pytest.importorskip("scipy.stats")

PAIRS = [("A cat is sleeping on the sofa.", "A cat naps on the couch.", 5),
         ("The bus was late this morning.", "This morning the bus was delayed.", 5),
         ("He baked bread.", "He baked a cake.", 3),
         ("The team won the final.", "The team lost the semi-final.", 2),
         ("It will rain tomorrow.", "The stock market fell.", 0),
         ("Jupiter is a giant planet.", "Saturn has rings.", 1),
         ("She plays the violin.", "She is a violinist.", 4),
         ("The soup is too salty.", "The train leaves at nine.", 0)]


def unit(x):
    x = np.asarray(x, np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.fixture
def pairs_file(tmp_path):
    path = tmp_path / "pairs.tsv"
    path.write_text("a\tb\tscore\n" + "".join(f"{a}\t{b}\t{s}\n" for a, b, s in PAIRS), encoding="utf-8")
    return path


@pytest.fixture
def corpus_file(tmp_path):
    lines = assets.sample_corpus().read_text(encoding="utf-8").splitlines()[:60]
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


@pytest.fixture
def state(monkeypatch, tmp_path):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    from app.gui.state import AppState, ModelChoice
    s = AppState(ModelChoice(model="minilm", device="cpu"))
    yield s
    s.shutdown(30_000)


@pytest.fixture
def view(qtbot, state):
    from app.gui.panels.train.evaluate_view import EvaluateView
    v = EvaluateView(state)
    qtbot.addWidget(v)
    v.show()
    return v


def run_and_wait(qtbot, view, timeout=120_000):
    with qtbot.waitSignal(view.evaluated, timeout=timeout):
        assert view.start()
    qtbot.waitUntil(lambda: view.job is None, timeout=10_000)


def test_corpus_model_scores_before_and_after_whitening_equal_independent_computations(
        qtbot, view, minilm, pairs_file, corpus_file):
    corpus_path, corpus = corpus_file
    view.pairs.setText(str(pairs_file))
    view.whiten.setChecked(True)
    view.corpus.setText(str(corpus_path))
    view.dims.setValue(16)
    run_and_wait(qtbot, view)
    a, b = unit(minilm.embed([p[0] for p in PAIRS])), unit(minilm.embed([p[1] for p in PAIRS]))
    gold = [p[2] for p in PAIRS]
    cos = np.sum(a * b, axis=1)
    assert view.value("spearman") == pytest.approx(scipy_stats.spearmanr(cos, gold).statistic, abs=1e-4)
    assert view.value("pearson") == pytest.approx(scipy_stats.pearsonr(cos, gold).statistic, abs=1e-4)
    # whitening from an eigen-decomposition of the corpus vectors' covariance
    c = np.asarray(minilm.embed(corpus), np.float64)
    vals, vecs = np.linalg.eigh(np.cov(c, rowvar=False, bias=True))
    top = np.argsort(vals)[::-1][:16]
    w, mu = vecs[:, top] / np.sqrt(vals[top]), c.mean(0)
    wa, wb = unit((a - mu) @ w), unit((b - mu) @ w)
    white_cos = np.sum(unit(wa) * unit(wb), axis=1)
    assert view.value("spearman", whitened=True) == pytest.approx(
        scipy_stats.spearmanr(white_cos, gold).statistic, abs=1e-4)
    assert view.value("anisotropy", whitened=True) < view.value("anisotropy")
    assert "16 of 384 dimensions" in view.message.text() and "60 sentences" in view.message.text()


def test_a_run_folder_is_evaluated_with_its_own_model(qtbot, view, pairs_file, tmp_path):
    from core.encoder.backends import get_backend
    from core.paths import models_dir
    from tests.support.tiny_models import make_tiny_checkpoint
    folder = make_tiny_checkpoint(models_dir() / "run")       # a run trained in the app: offered
    view.model_source.setCurrentIndex(view.model_source.findData("folder"))
    view.folder._before_popup()
    view.folder.setCurrentIndex(view.folder.findText(str(folder)))
    assert view.folder.currentText() == str(folder)
    view.pairs.setText(str(pairs_file))
    run_and_wait(qtbot, view)
    tiny = get_backend(str(folder), "scratch", device="cpu")
    cos = np.sum(unit(tiny.embed([p[0] for p in PAIRS])) * unit(tiny.embed([p[1] for p in PAIRS])), axis=1)
    assert view.value("spearman") == pytest.approx(scipy_stats.spearmanr(cos, [p[2] for p in PAIRS]).statistic,
                                                   abs=1e-4)
    assert view.value("spearman", whitened=True) is None


def test_a_bad_file_and_a_cancel_keep_the_last_results(qtbot, view, pairs_file, tmp_path):
    view.pairs.setText(str(pairs_file))
    run_and_wait(qtbot, view)
    shown = view.value("spearman")
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\tscore\nx y\tz w\tlots\nu\tv\t1\n", encoding="utf-8")
    view.pairs.setText(str(bad))
    with qtbot.waitSignal(view.failed, timeout=60_000) as failed:
        assert view.start()
    assert "line 2: the score 'lots' is not a number" in failed.args[0]
    assert "previous ones" in view.message.text() and view.value("spearman") == shown
    qtbot.waitUntil(lambda: view.job is None and view.run_button.isEnabled(), timeout=10_000)
    view.pairs.setText(str(assets.eval_pairs()))
    with qtbot.waitSignal(view.failed, timeout=60_000) as failed:
        assert view.start()
        view.cancel()
    assert failed.args[0] == "Evaluation cancelled" and view.value("spearman") == shown
    qtbot.waitUntil(lambda: view.job is None and view.run_button.isEnabled(), timeout=10_000)


def test_the_model_bar_evaluates_the_corpus_model(qtbot, state, pairs_file, minilm):
    from app.gui.shell.model_bar import ModelBar
    bar = ModelBar(state)
    qtbot.addWidget(bar)
    dialog = bar.open_evaluate(str(pairs_file))
    view = dialog.view
    qtbot.waitUntil(lambda: view.report is not None, timeout=120_000)
    assert dialog.isVisible() and view.model_arguments()[0] == "minilm"
    cos = np.sum(unit(minilm.embed([p[0] for p in PAIRS])) * unit(minilm.embed([p[1] for p in PAIRS])), axis=1)
    assert view.value("spearman") == pytest.approx(scipy_stats.spearmanr(cos, [p[2] for p in PAIRS]).statistic,
                                                   abs=1e-4)
    qtbot.waitUntil(lambda: view.job is None, timeout=10_000)
    from app.gui.panels.train.evaluate_view import EvaluateView
    lab_page = EvaluateView(state)               # the lab's page while the dialog's job runs
    qtbot.addWidget(lab_page)
    assert bar.open_evaluate() is dialog          # one dialog, reused
    assert view.job is not None and not lab_page.start() and "already running" in lab_page.message.text()
    qtbot.waitUntil(lambda: view.job is None, timeout=60_000)
    dialog.close()
