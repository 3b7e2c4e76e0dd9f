"""The CLI's core commands (embed, inspect, fill-mask, models): once through the real
`encoderscope` console script in a subprocess, the rest in this process (same parser, same
handlers, no new Python + torch start per test)."""
import json
import os
import subprocess

import numpy as np
import pytest

from tests.support.tiny_models import cli_command


def run_script(*args, check=True):
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    p = subprocess.run([*cli_command(), *args], capture_output=True, text=True, env=env, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_embed_json_matches_the_api(tmp_path):
    """The defaults: the device `auto` (or $ENCODERSCOPE_DEVICE) picks here is the one reported,
    and the vectors equal the API's on that device (the precision is pinned by conftest)."""
    from core.device import describe_device, pick_device
    from core.encoder.backends import get_backend
    f = tmp_path / "texts.txt"
    f.write_text("A third one from a file.\n\n   \nAnd a fourth.\n", encoding="utf-8")
    out = json.loads(run_script("embed", "The cat sat.", "Dogs bark.", "--file", str(f), "--json").stdout)
    assert out["model"] == "minilm" and out["backend"] == "scratch" and out["dim"] == 384
    assert out["device"] == describe_device(pick_device())
    assert out["precision"] == "fp32"
    v = np.array(out["vectors"])
    assert v.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    ref = get_backend("minilm").embed(["The cat sat.", "Dogs bark.", "A third one from a file.", "And a fourth."])
    np.testing.assert_allclose(v, ref, atol=1e-5)


def test_embed_hf_backend_and_pooling(run):
    a = np.array(json.loads(run("embed", "hello there", "--pooling", "cls", "--json").stdout)["vectors"])
    p = run("embed", "hello there", "--pooling", "cls", "--backend", "hf", "--json")
    b = json.loads(p.stdout)
    assert b["backend"] == "hf"
    assert "Loading weights" not in p.stderr      # no per-tensor progress bar for a local folder
    np.testing.assert_allclose(a, np.array(b["vectors"]), atol=1e-5)


def test_inspect_json(run):
    out = json.loads(run("inspect", "The cat sat.", "--json").stdout)
    assert out["tokens"] == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"]
    att = np.array(out["attentions"])
    assert att.shape == (6, 12, 6, 6)
    np.testing.assert_allclose(att.sum(-1), 1, atol=1e-4)


def test_fill_mask_json(run, tiny_distilbert):
    out = json.loads(run("fill-mask", "the [MASK] sat on the [MASK] .", "--model", str(tiny_distilbert),
                         "--top-k", "3", "--per-layer", "--json").stdout)
    assert len(out["masks"]) == 2 and len(out["masks"][0]["predictions"]) == 3
    assert {"token", "score"} <= set(out["masks"][0]["predictions"][0])
    assert out["joint"]["text"] and 0 < out["joint"]["score"] <= 1
    assert len(out["per_layer"]) == 2
    t = json.loads(run("fill-mask", "the [MASK] sat .", "--model", str(tiny_distilbert), "--targets", "cat,dogs",
                       "--json").stdout)
    assert {p["token"] for p in t["masks"][0]["predictions"]} == {"cat", "dogs"}


def test_models_json(run):
    rows = {r["name"]: r for r in json.loads(run("models", "--json").stdout)["models"]}
    assert rows["minilm"] == {**rows["minilm"], "source": "packaged", "available": True, "dim": 384,
                              "layers": 6, "heads": 12, "mlm_head": False}
    assert rows["distilbert-base-uncased"]["available"] is False


@pytest.mark.parametrize("args,message", [
    (["embed", "--model", "distilbert-base-uncased", "hi"], "minilm"),
    (["embed", "--model", "/no/such/folder", "hi"], "does not exist"),
    (["embed", "   "], "empty"),
    (["fill-mask", "the [MASK] sat"], "no masked-LM head"),
    (["embed"], "no text given"),
    (["fill-mask", "the [MASK] sat", "--model", "distilbert-base-uncased"], "not in the Hugging Face cache"),
    (["embed", "hi", "--batch-size", "0"], "batch size"),
])
def test_errors_are_messages_not_tracebacks(run, args, message):
    p = run(*args, check=False)
    assert p.returncode == 2
    assert p.stderr.startswith("error: ") and message in p.stderr
    assert "Traceback" not in p.stderr


def test_fill_mask_json_shape(run, tiny_distilbert):
    """The documented shape: masks[{position, predictions[{token, score}]}], joint{text, score}, per_layer."""
    out = json.loads(run("fill-mask", "the [MASK] sat on the mat .", "--model", str(tiny_distilbert),
                         "--backend", "hf", "--top-k", "2", "--json").stdout)
    assert {"masks", "joint", "per_layer"} <= set(out) and out["per_layer"] == []
    (mask,) = out["masks"]
    assert mask["position"] == 2                      # [CLS] the [MASK]
    assert [type(p["token"]) for p in mask["predictions"]] == [str, str]
    assert [type(p["score"]) for p in mask["predictions"]] == [float, float]
    assert mask["predictions"][0]["score"] >= mask["predictions"][1]["score"]
    assert out["joint"]["text"] == f"the {mask['predictions'][0]['token']} sat on the mat ."   # the user's text, filled
    assert out["joint"]["score"] == pytest.approx(mask["predictions"][0]["score"])


def test_wrong_model_folders_are_messages(run, tmp_path, tiny_distilbert):
    import shutil
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("hello")
    no_tok = tmp_path / "no_tok"
    no_tok.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_distilbert / name, no_tok / name)
    for folder, message in ((junk, "lacks config.json"), (no_tok, "no tokenizer files")):
        p = run("fill-mask", "the [MASK] sat", "--model", str(folder), check=False)
        assert p.returncode == 2 and p.stderr.startswith("error: ") and message in p.stderr, p.stderr
