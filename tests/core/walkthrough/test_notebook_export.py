"""The exported notebook (core/walkthrough/notebook_export.py): portable (a .npz beside it, no absolute
path), labelled, with a part structure and exercises; its explore mode recomputes every step
for a new sentence, layer or head (compared with a fresh `explain` run) and compares with the
stored run only where that still applies; and, in a fresh venv with only what its first cell
names, it runs and checks itself."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from core.walkthrough import steps as W
from core.walkthrough.notebook_cells import PARTS
from core.walkthrough.notebook_export import data_path, write_notebook

# The notebook's code cells, top to bottom, in a Python where torch, transformers and
# Encoderscope cannot be imported; then `AFTER` (a test's own lines) in the same namespace.
RUNNER = """
import sys
for name in ("torch", "transformers", "core", "app", "index", "encoderscope"):
    sys.modules[name] = None          # `import torch` now raises ImportError
import json
with open(sys.argv[1], encoding="utf-8") as f:
    nb = json.load(f)
code = "\\n\\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
exec(compile(code + "\\n\\n" + sys.argv[2], sys.argv[1], "exec"), {"__name__": "__main__"})
"""


def run_notebook(path: Path, after: str = "", python: str = sys.executable):
    return subprocess.run([python, "-c", RUNNER, str(path), after], check=False, capture_output=True,
                          text=True, timeout=600, cwd=str(path.parent))


def set_settings(path: Path, **values) -> None:
    """Edit the notebook's settings cell as a learner would (TEXT = ..., LAYER = ...)."""
    nb = nbformat.read(str(path), as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("# ---- change these"))
    for name, value in values.items():
        cell.source = re.sub(rf"^{name} = .*$", f"{name} = {value!r}", cell.source, flags=re.M)
    nbformat.write(nb, str(path))


DUMP = ("np.savez(DUMP, **{n: globals()[n] for n in EXPECTED})\n"
        "print('CHECKED', json.dumps(checked)); print('RECOMPUTED', json.dumps(recomputed))")


def dumped(path: Path, out: Path):
    """Run the notebook, saving every step's value: (process, values, checked, recomputed)."""
    result = run_notebook(path, f"DUMP = {str(out)!r}\n" + DUMP)
    assert result.returncode == 0, result.stderr[-3000:]
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines()
                 if line.startswith(("CHECKED", "RECOMPUTED")))
    return result, dict(np.load(out)), json.loads(lines["CHECKED"]), json.loads(lines["RECOMPUTED"])


@pytest.fixture(scope="module")
def tiny_backend(tiny_distilbert):
    from core.encoder.backends import get_backend
    return get_backend(str(tiny_distilbert), "scratch", device="cpu", precision="fp32")


@pytest.fixture
def exported(tmp_path, tiny_backend):
    walk = W.explain(tiny_backend, "the cat sat on the mat", layer=1, head=2, pooling="mean")
    return write_notebook(walk, tiny_backend, tmp_path / "out" / "walk.ipynb"), walk


def test_structure_portable_labelled_with_exercises(exported, tiny_distilbert, tmp_path):
    path, walk = exported
    data = data_path(path)
    assert data.name == "walk.npz" and data.is_file()
    raw = path.read_text(encoding="utf-8")
    for absolute in (str(tmp_path), str(tiny_distilbert), str(Path.home()), "/tmp/"):
        assert absolute not in raw
    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    # compact: no cell carries data (the values live in the .npz)
    assert max(len(c.source) for c in nb.cells) < 8_000 and len(raw) < 150_000
    first = nb.cells[0].source
    assert "pip install numpy tokenizers" in first and "matplotlib" in first and "optional" in first
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    for forbidden in ("import torch", "from torch", "from core", "import core", "transformers", "base64"):
        assert forbidden not in code
    assert "DATA = 'walk.npz'" in code
    # each step: a markdown cell, then a code cell that shows it with its token labels
    shows = re.findall(r"^show\('(\w+)', \1(, cols=tokens)?\)$", code, flags=re.M)
    assert [name for name, _ in shows] == [s.name for s in walk.steps]
    assert {name for name, cols in shows if cols} == {"scores", "masked_scores", "weights"}
    # five parts, each followed by its exercise (a markdown task + a code cell to fill in)
    titles = [c.source.splitlines()[0] for c in nb.cells
              if c.cell_type == "markdown" and c.source.startswith("## Part")]
    assert titles == [f"## {title}" for _, title, _ in PARTS]
    exercises = [i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and c.source.startswith("**Exercise")]
    assert len(exercises) == 5 and all(nb.cells[i + 1].source.startswith("# Exercise") for i in exercises)
    # the data file: float32 weights, the stored run, the tokenizer
    with np.load(data) as z:
        names = set(z.files)
        assert "tokenizer_json" in names
        assert {f"e/{s.name}" for s in walk.steps} <= names
        for s in walk.steps:
            np.testing.assert_allclose(z[f"e/{s.name}"], s.values, rtol=1e-6, atol=1e-7)
        assert z["w/embeddings.word_embeddings.weight"].dtype == np.float32


def test_runs_from_another_folder_with_every_matrix_labelled(exported, tmp_path):
    path, walk = exported
    moved = tmp_path / "handed-out"
    moved.mkdir()
    for f in (path, data_path(path)):
        shutil.copy(f, moved / f.name)
    shutil.rmtree(path.parent)                       # nothing left where it was written
    result = run_notebook(moved / "walk.ipynb")
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert f"all {len(walk.steps)} steps equal the numbers Encoderscope computed" in out
    assert "matplotlib is not installed: the plots are skipped" in out or "Figure" not in out
    # every printed matrix: a header line of labels, then one line per token starting with it
    for s in walk.steps:
        block = out.split(f"{s.name}: shape ", 1)[1].splitlines()[1:]
        rows = ["mean pooled"] if s.values.ndim == 1 else walk.tokens
        for line, token in zip(block[1:], rows):
            assert line.lstrip().startswith(token), (s.name, line)
        if s.name == "weights":
            assert block[0].split() == walk.tokens


def test_explore_a_new_layer_and_head_recomputes_and_compares_only_what_applies(exported, tiny_backend, tmp_path):
    path, walk = exported
    set_settings(path, LAYER=2, HEAD=4)
    result, values, checked, recomputed = dumped(path, tmp_path / "values.npz")
    fresh = W.explain(tiny_backend, "the cat sat on the mat", layer=1, head=3, pooling="mean")
    for s in fresh.steps:
        np.testing.assert_allclose(values[s.name], s.values, rtol=1e-9, atol=1e-9, err_msg=s.name)
    assert set(recomputed) == {"q", "k", "v", "scores", "masked_scores", "weights", "head_output"}
    assert set(checked) == {s.name for s in walk.steps} - set(recomputed)
    assert "only the steps that do not depend on the head you changed" in result.stdout
    assert "(not compared with Encoderscope: it depends on the head you changed)" in result.stdout


def test_explore_a_new_sentence_and_pooling(exported, tiny_backend, tmp_path):
    path, walk = exported
    set_settings(path, TEXT="a dog ran in the park", LAYER=1, POOLING="max")
    result, values, checked, recomputed = dumped(path, tmp_path / "values.npz")
    fresh = W.explain(tiny_backend, "a dog ran in the park", layer=0, head=2, pooling="max")
    for s in fresh.steps:
        np.testing.assert_allclose(values[s.name], s.values, rtol=1e-9, atol=1e-9, err_msg=s.name)
    assert checked == [] and recomputed == [s.name for s in walk.steps]
    assert "recomputed for your settings, not compared" in result.stdout
    # the whole-encoder helper of exercise 5 is the model's sentence vector
    vec = run_notebook(path, "print('VEC', json.dumps(sentence_vector('a red house', pooling='cls').tolist()))")
    assert vec.returncode == 0, vec.stderr[-2000:]
    got = json.loads(vec.stdout.split("VEC ", 1)[1].splitlines()[0])
    np.testing.assert_allclose(got, tiny_backend.embed(["a red house"], pooling="cls")[0], atol=1e-5)


def test_a_wrong_stored_value_stops_the_notebook_at_that_step(exported):
    path, _ = exported
    data = data_path(path)
    with np.load(data) as z:
        arrays = dict(z)
    arrays["e/ffn_output"] = arrays["e/ffn_output"].copy()
    arrays["e/ffn_output"][0, 0] += 1e-3
    np.savez_compressed(data, **arrays)
    result = run_notebook(path)
    assert result.returncode != 0 and "AssertionError" in result.stderr
    assert "ffn_output: shape" in result.stdout and "all " not in result.stdout.splitlines()[-1]


def test_without_a_tokenizer_the_stored_sentence_still_runs(exported):
    path, walk = exported
    data = data_path(path)
    with np.load(data) as z:
        arrays = {k: z[k] for k in z.files if k != "tokenizer_json"}
    np.savez_compressed(data, **arrays)
    result = run_notebook(path)
    assert result.returncode == 0, result.stderr[-3000:]
    set_settings(path, TEXT="something else")
    result = run_notebook(path)
    assert result.returncode != 0
    assert "this notebook can only read the sentence Encoderscope stored" in result.stderr


def _named_requirements(path: Path) -> list[str]:
    first = nbformat.read(str(path), as_version=4).cells[0].source
    return re.search(r"`pip install ([^`]+)`", first).group(1).split()


@pytest.mark.slow
def test_runs_in_a_fresh_venv_with_only_what_its_first_cell_names(exported, tmp_path):
    """python -m venv, `pip install` exactly the packages the first cell names, run the cells."""
    path, walk = exported
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    needs = _named_requirements(path)
    assert needs == ["numpy", "tokenizers"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run([python, "-m", "pip", "install", "--quiet", *needs], check=True, timeout=600, env=env)
    listed = subprocess.run([python, "-m", "pip", "list", "--format=json"], check=True, capture_output=True,
                            text=True, env=env).stdout
    installed = {p["name"].lower() for p in json.loads(listed)}
    assert not installed & {"torch", "matplotlib", "safetensors", "transformers", "encoderscope"}
    result = subprocess.run([python, "-c", RUNNER, str(path), ""], capture_output=True, text=True, timeout=600,
                            cwd=str(path.parent), env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"all {len(walk.steps)} steps equal the numbers Encoderscope computed" in result.stdout


def test_an_interrupted_export_leaves_no_partial_file_and_the_next_one_clears_a_killed_ones(tiny_backend, tmp_path,
                                                                                         monkeypatch):
    import errno

    from core.errors import EncoderscopeError
    backend = tiny_backend
    walk = W.explain(backend, "the cat sat on the mat", layer=1, head=2, pooling="mean")
    target = tmp_path / "nb" / "walk.ipynb"
    data = data_path(target)
    data.parent.mkdir(parents=True)
    killed = [data.with_name(data.name + ".partial"), data.parent / f".{data.name}.0123456789ab.tmp"]
    for p in killed:                          # what kill -9 in the middle of a write left
        p.write_bytes(b"PK half")
        os.utime(p, (1, 1))
    mine = data.parent / "mine.partial"
    mine.write_text("a user's file")
    write_notebook(walk, backend, target)
    assert data.is_file() and not any(p.exists() for p in killed) and mine.exists()

    def full(f, **arrays):
        f.write(b"PK partial")
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(np, "savez_compressed", full)
    before = data.read_bytes()
    with pytest.raises(EncoderscopeError, match="No space left"):
        write_notebook(walk, backend, target)
    assert data.read_bytes() == before                        # the last good data file kept
    assert sorted(p.name for p in data.parent.iterdir()) == sorted([data.name, target.name, mine.name])
