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


@pytest.fixture(scope="module")
def tiny_no_mlm(tmp_path_factory):
    from tests.support.tiny_models import make_tiny_bert
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_no_mlm"), mlm=False)


def test_an_empty_trace_says_what_trace_takes(run, tiny_distilbert):
    bad = run("patch", "the cat sat", "--trace", "", "--model", str(tiny_distilbert), check=False)
    assert bad.returncode == 2 and "--trace names the words to corrupt" in bad.stderr
    assert "--site" not in bad.stderr


def test_attribute_of_a_mask_without_an_mlm_head_names_to_and_to_works(run, tiny_no_mlm):
    model = ("--model", str(tiny_no_mlm))
    for text in ("the [MASK] sat", "the cat sat"):      # each piece of advice once, no loop between two
        bad = run("attribute", text, "--mask-token", "cat", *model, check=False)
        assert bad.returncode == 2 and "--to OTHER" in bad.stderr and "put [MASK]" not in bad.stderr
    ok = run("attribute", "the cat sat", "--to", "the dog sat", "--steps", "4", *model)
    assert "ig of cosine with 'the dog sat'" in ok.stdout


LONG = " ".join(["the"] * 140)        # past the tiny models' 128 positions


@pytest.mark.parametrize("argv", [
    ("patch", f"{LONG} cat sat", f"{LONG} dog sat", "--site", "L1.resid@cat"),
    ("patch", f"{LONG} cat sat", "--trace", "cat"),
    ("ablate", f"{LONG} cat sat", "--cut", "1:cat>the"),
])
def test_a_word_past_the_models_length_is_said_to_be_cut_off(run, tiny_distilbert, argv):
    bad = run(*argv, "--model", str(tiny_distilbert), check=False)
    assert bad.returncode == 2 and "occurs 0 times" in bad.stderr
    assert "cut to the first 128 tokens the model reads: a word past them is not there" in bad.stderr


def test_sweeps_traces_and_attributions_say_they_cut_a_long_text(run, tiny_distilbert):
    model = ("--model", str(tiny_distilbert))
    a, b = f"{LONG} cat sat", f"the cat sat {LONG}"
    for argv in (("patch", b, b.replace("cat", "dog"), "--sweep", "ffn"), ("patch", b, "--trace", "cat"),
                 ("attribute", b, "--to", a, "--steps", "4")):
        out = run(*argv, *model)
        assert "is longer than the 128 tokens" in out.stderr and "only its first 128 tokens were used" in out.stderr
    same = run("patch", a, a.replace("cat", "dog"), "--sweep", "ffn", *model, check=False)   # same first 128
    assert same.returncode == 2 and "the same tokens" in same.stderr and "longer than the 128" in same.stderr


def test_a_long_sweep_off_a_terminal_says_where_it_is(run, tiny_distilbert, monkeypatch):
    from app.cli import causal
    monkeypatch.setattr(causal, "OFF_TERMINAL_SECONDS", 0.0)
    out = run("patch", "the cat sat", "the dog sat", "--sweep", "resid", "--model", str(tiny_distilbert))
    assert "1/2 layers" in out.stderr.splitlines()          # stderr is captured: not a terminal
    quiet = run("patch", "the cat sat", "the dog sat", "--sweep", "resid", "--json", "--model", str(tiny_distilbert))
    assert "layers" not in quiet.stderr


def test_every_cut_example_is_quoted_and_the_help_says_why():
    # unquoted, `--cut 6.12:cat>cat` is `--cut 6.12:cat` with stdout redirected into a file `cat`
    import re

    from tests.support.paths import ROOT
    unquoted = []
    for path in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "app" / "cli" / "causal.py"]:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            unquoted += [f"{path.name}:{n}: {m}" for m in re.findall(r"--cut\s+([^\s'\"`]*>\S*)", line)]
    assert not unquoted, unquoted
    from app.cli import build_parser
    sub = next(a for a in build_parser()._actions if a.choices and "ablate" in a.choices)
    helped = sub.choices["ablate"].format_help()
    assert "'3:[MASK]>cat'" in " ".join(helped.split()) and "redirection" in helped


def test_a_mask_on_a_model_without_an_mlm_head_runs_the_vector_side(run, data_dir):
    model = ("--model", "minilm")
    cut = run("ablate", "the cat sat on the [MASK]", "--cut", "3:[MASK]>cat", *model)   # the help's example
    assert "cosine with the original" in cut.stdout and "no masked-LM head" in cut.stderr
    sweep = run("patch", "the [MASK] sat on the mat", "the dog sat on the mat", "--sweep", "ffn", *model)
    assert "fraction of the way to B" in sweep.stdout and "p(token) at the [MASK] needs" in sweep.stderr
    trace = run("patch", "the [MASK] sat on the mat", "--trace", "mat", "--samples", "2", *model)
    assert "share of the clean vector" in trace.stdout and "p(token) at the [MASK] needs" in trace.stderr
    for argv in (("patch", "the [MASK] sat", "the dog sat", "--sweep", "ffn"), ("patch", "the [MASK] sat", "--trace",
                 "sat"), ("ablate", "the [MASK] sat", "--heads", "1.1")):
        bad = run(*argv, "--mask-token", "cat", *model, check=False)      # p(WORD) asked for: refused, worded
        assert bad.returncode == 2 and "leave out --mask-token" in bad.stderr, bad.stderr
