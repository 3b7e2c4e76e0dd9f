"""The causal commands as a user runs them: `importance --gradient` prints core's I_h beside the
measured drop, and `patch`'s modes refuse what they cannot do in one `error:` line."""
from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.mark.slow
def test_importance_gradient_prints_michels_numbers_beside_the_drop(run, data_dir, tiny_distilbert):
    from core.encoder.backends import get_backend
    from core.intervene.head_gradient import agreement, head_gradient_importance
    out = json.loads(run("importance", "--metric", "spearman", "--gradient", "--model", str(tiny_distilbert),
                         "--json").stdout)
    backend = get_backend(str(tiny_distilbert), "scratch", device="cpu")
    want = head_gradient_importance(backend, "spearman")
    g = out["gradient_importance"]
    L, H = want.shape
    got = np.array([[g["heads"][f"{l + 1}.{h + 1}"] for h in range(H)] for l in range(L)])
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(g["values"], want, atol=1e-8)          # the same, rounded to 8 decimals
    drop = np.array([[out["heads"][f"{l + 1}.{h + 1}"] for h in range(H)] for l in range(L)])
    assert g["spearman_with_drop"] == pytest.approx(agreement(want, drop), abs=1e-6)
    text = run("importance", "--metric", "spearman", "--gradient", "--model", str(tiny_distilbert)).stdout
    assert "gradient head importance (Michel et al." in text and "Spearman of I_h" in text


def test_the_modes_of_patch_refuse_in_one_line(run, tiny_distilbert):
    model = ("--model", str(tiny_distilbert))
    bad = run("patch", "the cat sat", "--site", "L1.H1", *model, check=False)
    assert bad.returncode == 2 and "from sentence B" in bad.stderr
    bad = run("patch", "the cat sat", "a dog ran in the park", "--trace", "cat", *model, check=False)
    assert bad.returncode == 2 and "give one of the same length" in bad.stderr
    bad = run("patch", "the cat sat", "--sweep", "resid", *model, check=False)
    assert bad.returncode == 2 and "patches from sentence B" in bad.stderr
    bad = run("importance", "--metric", "recall", "--gradient", *model, "--no-cache", check=False)
    assert bad.returncode == 2 and "recall has no loss" in bad.stderr


@pytest.mark.parametrize("kind", ["resid", "heads"])
def test_a_sweep_of_a_sentence_against_itself_says_there_is_no_way_to_b(run, data_dir, kind):
    # minilm's fp32 cosine of a sentence with itself reads 0.99999996 for some sentences: a
    # grid of 0.000 there, where --site says there is no way to B
    for text in ("A quick brown fox jumps over the lazy dog near the river bank.",
                 "search engines rank documents by relevance to a query"):
        bad = run("patch", text, text, "--sweep", kind, "--model", "minilm", check=False)
        assert bad.returncode == 2 and "no way to B" in bad.stderr, bad.stdout
