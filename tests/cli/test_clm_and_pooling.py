"""The command line of causal attention, clm and attention pooling: `train --objective clm`
(causal by default), `train --pooling attention`, embedding with a model's trained pooling by
default, and the one-line errors (whose suggested commands work)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tests.cli.test_train import TINY
from tests.support.train_corpus import write_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("cli") / "gen.txt", n=400)


def test_train_clm_is_causal_and_reports_next_token_loss(corpus, tmp_path, run):
    out = tmp_path / "clm"
    r = run("train", "--corpus", str(corpus), "--out", str(out), "--steps", "20", "--objective", "clm",
            "--device", "cpu", "--no-progress", "--eval-every", "10", *TINY)
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["objective"] == "clm" and summary["heldout_clm_loss"] is not None
    assert summary["heldout_mlm_loss"] is None
    assert "held-out next-token loss" in r.stderr
    meta = json.loads((out / "encoderscope.json").read_text())
    assert meta["config"]["attention"] == "causal"
    # the walkthrough of the result shows the causal triangle
    r = run("explain", "the cat eats fish", "--model", str(out), "--json")
    step = next(s for s in json.loads(r.stdout)["steps"] if s["name"] == "masked_scores")
    assert step["values"][0][1] is None and step["max_abs_diff"] <= 1e-5


def test_clm_with_bidirectional_attention_is_one_error(corpus, tmp_path, run):
    r = run("train", "--corpus", str(corpus), "--out", str(tmp_path / "x"), "--objective", "clm",
            "--attention", "bidirectional", "--no-progress", *TINY, check=False)
    assert r.returncode == 2 and r.stderr.count("error:") == 1 and "Traceback" not in r.stderr
    assert "needs a causal attention mask" in r.stderr and "--attention causal" in r.stderr


def test_attention_pooling_error_and_the_command_it_suggests(corpus, tmp_path, run):
    r = run("embed", "a cat", "--pooling", "attention", check=False)
    assert r.returncode == 2 and r.stderr.count("error:") == 1 and "Traceback" not in r.stderr
    assert "no learned query vector" in r.stderr
    assert "encoderscope train --objective simcse --pooling attention --corpus FILE --out DIR" in r.stderr
    out = tmp_path / "ap"
    run("train", "--objective", "simcse", "--pooling", "attention", "--corpus", str(corpus), "--out", str(out),
        "--steps", "10", "--dropout", "0.1", "--device", "cpu", "--no-progress", *TINY)
    # that model embeds with its attention pooling unless told otherwise, and says so
    default = json.loads(run("embed", "a cat", "the dog", "--model", str(out), "--json").stdout)
    assert default["pooling"] == "attention"
    asked = json.loads(run("embed", "a cat", "the dog", "--model", str(out), "--json",
                           "--pooling", "attention").stdout)
    np.testing.assert_allclose(default["vectors"], asked["vectors"], atol=1e-7)
    mean = json.loads(run("embed", "a cat", "--model", str(out), "--json", "--pooling", "mean").stdout)
    assert mean["pooling"] == "mean"
    # why splits the attention-pooled score exactly over token pairs
    why = json.loads(run("why", "a cat", "the dog", "--model", str(out), "--json").stdout)
    assert why["pooling"] == "attention"
    cos = float(np.dot(default["vectors"][0], default["vectors"][1]))
    assert why["score"] == pytest.approx(cos, abs=1e-5)
