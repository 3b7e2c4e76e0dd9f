"""`encoderscope ablate`, `patch` and `importance` on the command line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.encoder.backends import get_backend
from core.intervene.apply import intervene
from core.intervene.spec import Intervention
from tests.support.tiny_models import one_error, run_cli

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"


def test_ablate_json_gives_tokens_vectors_and_attentions(capsys):
    code, out, err = run_cli(["ablate", "the cat sat on the mat", "--heads", "1.2,2.4", "--ffn", "1",
                              "--model", RANDOM, "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    backend = get_backend(RANDOM, "scratch", device="cpu")
    assert d["tokens"] == ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "[SEP]"]
    before = backend.embed(["the cat sat on the mat"])[0]
    with intervene(backend, Intervention(heads={(0, 1), (1, 3)}, ffn_off={0})):
        after = backend.embed(["the cat sat on the mat"])[0]
        att = backend.inspect("the cat sat on the mat").attentions
    np.testing.assert_allclose(d["vector_before"], before, atol=1e-6)
    np.testing.assert_allclose(d["vector_after"], after, atol=1e-6)
    np.testing.assert_allclose(d["attentions_after"], att, atol=1e-6)
    assert d["intervention"] == "heads 1.2, 2.4 zeroed; FFN 1 off"


def test_ablate_fill_mask_with_a_chosen_token(capsys):
    code, out, err = run_cli(["ablate", "the cat sat on the [MASK].", "--no-positions", "--mask-token", "mat",
                              "--model", RANDOM], capsys)
    assert code == 0, err
    assert "p(mat) at the first mask:" in out and "positions off" in out


@pytest.mark.parametrize("argv, says", [
    (["ablate", "a text", "--heads", "9.1"], "head 9.1 does not exist: this model has layers 1-6"),
    (["ablate", "a text", "--heads", "3"], "LAYER.HEAD"),
    (["ablate", "a text"], "nothing to switch off"),
    # a [MASK] alone runs the vector side on minilm; p(WORD) is what needs an MLM head
    (["ablate", "the [MASK] sat", "--heads", "1.1", "--mask-token", "cat"], "no masked-LM head"),
    (["ablate", "a text", "--heads", "1.1", "--backend", "hf"], "--backend scratch"),
    (["patch", "the cat sat", "a dog ran in the park today", "--site", "L2.H1"], "no token-by-token alignment"),
    (["patch", "the cat sat", "the dog ran", "--site", "L2.att"], "L5.H3"),
])
def test_bad_input_is_one_error_line(capsys, argv, says):
    code, out, err = run_cli(argv, capsys)
    assert says in one_error(code, err)


def test_patch_whole_residual_gives_b(capsys):
    code, out, err = run_cli(["patch", "the cat sat on the mat", "the dog ran in the park", "--site", "L1.resid",
                              "--model", RANDOM, "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["cosine_patched_b"] == pytest.approx(1.0, abs=1e-6)
    assert d["moved_toward_b"] == pytest.approx(1.0, abs=1e-4)
    code, out, err = run_cli(["patch", "the cat sat on the mat", "the dog ran in the park", "--site", "L2.resid@cat",
                              "--model", RANDOM], capsys)
    assert code == 0, err
    assert "L2.resid@2: cat<-dog" in out


def test_importance_json(capsys):
    code, out, err = run_cli(["importance", "--metric", "spearman", "--model", RANDOM, "--json"], capsys)
    assert code == 0, err
    d = json.loads(out)
    assert set(d["heads"]) == {f"{l}.{h}" for l in (1, 2) for h in (1, 2, 3, 4)}
    assert d["top_heads"][0]["drop"] == max(d["heads"].values())


@pytest.mark.parametrize("argv, names", [
    (["ablate", "LONG", "--heads", "1.2"], ["the text"]),
    (["ablate", "LONG", "--heads", "1.2", "--json"], ["the text"]),
    (["patch", "LONG", "LONG", "--site", "L1.resid"], ["A", "B"]),
    (["patch", "LONG", "LONG", "--site", "L2.resid", "--json"], ["A", "B"]),
])
def test_a_text_longer_than_the_model_reads_is_noted_once(capsys, caplog, argv, names):
    """ablate and patch run a text several times: its truncation is one note per text, not one
    model warning per run (ablate said it twice, patch not at all in words of its own)."""
    long = " ".join(["word"] * 600)
    code, out, err = run_cli([long if a == "LONG" else a for a in argv] + ["--model", RANDOM], capsys)
    assert code == 0, err
    notes = [x for x in err.splitlines() if "longer than" in x]
    assert notes == [f"note: {n} is longer than the 512 tokens {RANDOM} reads: only its first 512 tokens "
                     "were used" for n in names], err
    assert not [r for r in caplog.records if "longer than" in r.getMessage()]
