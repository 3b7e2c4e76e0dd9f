"""`encoderscope explain` as a black box, and the notebook it writes executed for real.

The notebook's code cells run in a fresh Python where importing torch, transformers or
Encoderscope fails: it has to stand on NumPy and tokenizers alone (tests/core/walkthrough/test_notebook_export.py
has the rest: its data file, explore mode, a fresh venv).
"""
import json
import subprocess
import sys

import nbformat
import numpy as np
import pytest

from core.walkthrough.steps import POST_ORDER, PRE_ORDER
from tests.support.tiny_models import make_tiny_checkpoint

# Runs a notebook's code cells top to bottom with the forbidden packages made unimportable.
RUNNER = """
import sys
for name in ("torch", "transformers", "core", "app", "index", "encoderscope"):
    sys.modules[name] = None          # `import torch` now raises ImportError
import nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
code = "\\n\\n".join(c.source for c in nb.cells if c.cell_type == "code")
exec(compile(code, sys.argv[1], "exec"), {"__name__": "__main__"})
"""


def run_notebook(path):
    return subprocess.run([sys.executable, "-c", RUNNER, str(path)], check=False, capture_output=True,
                          text=True, timeout=600, cwd=str(path.parent))


def code_of(path) -> str:
    nb = nbformat.read(str(path), as_version=4)
    return "\n".join(c.source for c in nb.cells if c.cell_type == "code")


def test_explain_json_shape(run):
    p = run("explain", "The cat sat on the mat.", "--layer", "2", "--head", "3", "--json")
    d = json.loads(p.stdout)
    assert {"model", "tokens", "ids", "layer", "head", "steps"} <= set(d)
    assert (d["model"], d["layer"], d["head"]) == ("minilm", 2, 3)
    assert d["tokens"][0] == "[CLS]" and len(d["ids"]) == len(d["tokens"])
    assert [s["name"] for s in d["steps"]] == list(POST_ORDER)
    T = len(d["tokens"])
    for s in d["steps"]:
        assert {"name", "shape", "values", "formula", "max_abs_diff"} <= set(s)
        assert list(np.array(s["values"]).shape) == s["shape"]
        assert s["max_abs_diff"] <= 1e-5, s["name"]
    by_name = {s["name"]: s for s in d["steps"]}
    assert by_name["weights"]["shape"] == [T, T]
    assert by_name["q"]["shape"] == [T, 32]
    np.testing.assert_allclose(np.array(by_name["weights"]["values"]).sum(axis=1), 1.0, atol=1e-5)
    # the sentence vector is `embed`'s
    vec = json.loads(run("embed", "The cat sat on the mat.", "--json").stdout)["vectors"][0]
    np.testing.assert_allclose(by_name["normalized"]["values"], vec, atol=1e-6)


def test_explain_text_summary_and_truncation_note(tiny_distilbert, run):
    p = run("explain", "the cat sat on the mat " * 40, "--model", str(tiny_distilbert), "--pooling", "max")
    out = p.stdout
    for name in POST_ORDER:
        if name != "token_type_embeddings":
            assert name in out
    assert "max |Δ|" in out and "Q = X·W_Q + b_Q" in out
    assert "cut to the model's maximum of 128 tokens (114 tokens dropped)" in out
    assert "every step equals the model's" in out


def test_explain_pair_and_prenorm(tmp_path, run):
    folder = make_tiny_checkpoint(tmp_path / "pre")
    d = json.loads(run("explain", "the dog ran", "--pair", "a cat sat", "--model", str(folder),
                       "--layer", "3", "--head", "4", "--json").stdout)
    assert [s["name"] for s in d["steps"]] == list(PRE_ORDER)
    assert d["token_type_ids"][-1] == 1 and (d["layer"], d["head"]) == (3, 4)


@pytest.mark.parametrize("args, message", [
    (["--layer", "7"], "error: layer 7 does not exist: this model has 6 layers (choose 1 to 6)"),
    (["--layer", "0"], "error: layer 0 does not exist"),
    (["--head", "13"], "error: head 13 does not exist: this model has 12 heads per layer (choose 1 to 12)"),
])
def test_out_of_range_is_one_error_line(args, message, run):
    p = run("explain", "A cat.", *args, check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message)


def test_notebook_for_a_random_model_runs(tmp_path, run):
    """The weights travel in the .npz beside the notebook: a random model needs no folder."""
    out = tmp_path / "x.ipynb"
    run("explain", "A cat.", "--model", "random:dim=32,layers=2,heads=4,ffn=64", "--notebook", str(out))
    assert (tmp_path / "x.npz").is_file()
    result = run_notebook(out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "steps equal the numbers Encoderscope computed" in result.stdout


@pytest.mark.parametrize("kind", ["minilm", "distilbert", "prenorm"])
def test_notebook_runs_and_checks_itself(kind, tmp_path, tiny_distilbert, run):
    model = {"minilm": "minilm", "distilbert": str(tiny_distilbert),
             "prenorm": str(make_tiny_checkpoint(tmp_path / "pre"))}[kind]
    out = tmp_path / "walk.ipynb"
    extra = ["--pair", "a dog ran"] if kind != "distilbert" else []
    p = run("explain", "The cat sat on the mat.", "--model", model, "--layer", "2", "--head", "2",
            "--pooling", "cls", "--notebook", str(out), *extra)
    assert "wrote" in p.stdout
    nbformat.validate(nbformat.read(str(out), as_version=4))
    code = code_of(out)
    for forbidden in ("import torch", "from torch", "import encoderscope", "from core", "import core",
                      "transformers"):
        assert forbidden not in code
    result = run_notebook(out)
    assert result.returncode == 0, result.stderr[-3000:]
    steps = len(PRE_ORDER if kind == "prenorm" else POST_ORDER) - (kind == "distilbert")
    assert f"all {steps} steps equal the numbers Encoderscope computed" in result.stdout


def test_notebook_reads_legacy_bert_names(tmp_path, run):
    """LayerNorm.gamma/beta (TF-converted BERTs): the exported weights carry the encoder's names."""
    from tests.support.tiny_models import make_tiny_bert
    folder = make_tiny_bert(tmp_path / "bert", legacy_layer_norm_names=True)
    out = tmp_path / "walk.ipynb"
    run("explain", "the cat sat", "--pair", "a dog", "--model", str(folder), "--layer", "2",
        "--notebook", str(out))
    result = run_notebook(out)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "all 24 steps equal" in result.stdout


def test_notebook_of_a_pytorch_bin_folder_runs(tmp_path, run):
    """The notebook reads the weights from its .npz, whatever file the model folder had."""
    from tests.support.tiny_models import make_tiny_bert
    folder = make_tiny_bert(tmp_path / "bert", weights_file="pytorch_model.bin")
    out = tmp_path / "x.ipynb"
    run("explain", "the cat sat", "--model", str(folder), "--notebook", str(out))
    result = run_notebook(out)
    assert result.returncode == 0, result.stderr[-3000:]


def test_notebook_name_must_end_in_ipynb(tmp_path, run):
    p = run("explain", "A cat.", "--notebook", str(tmp_path / "walk.txt"), check=False)
    assert p.returncode == 2 and p.stderr.startswith("error: the notebook file should end in .ipynb")
