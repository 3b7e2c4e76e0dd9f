"""Spearman on a scored pairs file during training (`train --eval-pairs`): each evaluation ranks the
graded pairs by the model's cosines, and the last one equals `encoderscope eval --pairs` on the
checkpoint saved at that step."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.support.train_corpus import tiny_config, write_corpus


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from core.assets import eval_pairs, sample_corpus
    from core.train.trainer import Trainer

    root = tmp_path_factory.mktemp("evalpairs")
    # the sample corpus: the scored pairs' words are in its vocabulary, so their cosines are not ties of [UNK]s
    cfg = tiny_config(sample_corpus(), root / "run", steps=20, eval_every=10, watch=False, max_length=48,
                      eval_pairs=str(eval_pairs()))
    events = []
    Trainer(cfg).run(progress=events.append)
    return cfg, [e for e in events if e["kind"] == "eval"]


def test_each_evaluation_has_the_spearman_of_the_scored_pairs(trained):
    _, evals = trained
    assert [e["step"] for e in evals] == [0, 10, 20]
    for e in evals:
        assert -1 <= e["spearman"] <= 1 and -1 <= e["pearson"] <= 1
    assert evals[0]["spearman"] != evals[-1]["spearman"]      # it follows the training


def test_the_last_spearman_is_what_eval_gives_the_saved_model(trained, run):
    from core.assets import eval_pairs

    cfg, evals = trained
    out = json.loads(run("eval", "--pairs", str(eval_pairs()), "--model", cfg.out, "--precision", "fp32",
                         "--json").stdout)
    assert out["n"] == 94
    assert np.isclose(evals[-1]["spearman"], out["spearman"], atol=1e-6)
    assert np.isclose(evals[-1]["pearson"], out["pearson"], atol=1e-6)


def test_train_reads_eval_pairs_from_the_command_line(tmp_path, run):
    corpus = write_corpus(tmp_path / "c.txt", n=120)
    bad = tmp_path / "bad.tsv"
    bad.write_text("a\tb\nx\ty\n", encoding="utf-8")
    r = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "o"), "--steps", "2", "--dim", "16",
            "--heads", "2", "--ffn", "32", "--layers", "1", "--eval-pairs", str(bad), "--no-progress", check=False)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and last.startswith("error:") and "bad.tsv" in last and "no score column" in last
    assert "--columns" not in last and "Traceback" not in r.stderr      # train has no --columns to suggest
