"""A walkthrough as a Jupyter notebook a teacher can hand out.

Two files: ``walk.ipynb`` and, beside it, ``walk.npz`` (NumPy's own format, compressed) with
the model's weights, its tokenizer (tokenizer.json's text) and the numbers Encoderscope
computed for every step. The notebook names no absolute path and imports neither torch nor
Encoderscope: it needs ``pip install numpy tokenizers`` (its first cell says so; matplotlib is
optional, for a plot per step). It recomputes every step in plain NumPy (the functions are
copied in from core/walkthrough/numpy_ref.py) and checks each against the stored run. Its settings cell is
an "explore" mode: change the sentence, layer, head or pooling and run all cells again;
everything is recomputed from the stored weights, and each step is compared with the stored run
only when nothing it depends on was changed (the notebook says which).
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path

import numpy as np

from core.errors import EncoderscopeError, InputError
from core.files import cache_file
from core.files.atomic import atomic_write_with
from core.walkthrough import numpy_ref
from core.walkthrough.notebook_cells import (
    CHOOSE,
    DONE,
    EXERCISES,
    IMPORTS,
    LAST_PART_ALTERNATIVE,
    LOAD,
    PARTS,
    SHOW,
    depends,
    step_code,
)

# numpy_ref's functions the notebook needs, copied in as they are (the teaching code), in two cells:
# the small formulas, then attention, the block and the pooling built from them.
FUNCTIONS = (("sinusoidal_positions", "layer_norm_stats", "layer_norm", "gelu", "linear", "softmax",
              "split_heads", "merge_heads", "attention_scores", "mask_scores", "causal_mask", "attention_keep"),
             ("self_attention_steps", "self_attention", "block_steps", "block", "patch_rows", "patch_arguments",
              "patch_output", "pool", "attention_pool_weights", "l2_normalize"))
CONFIG_FIELDS = ("dim", "n_layers", "n_heads", "hidden_dim", "activation", "positions", "type_vocab_size",
                 "norm", "layer_norm_eps", "attention")
# the encoder and attention pooling's learned query; no MLM head
WEIGHT_PREFIXES = ("embeddings.", "transformer.", "final_layer_norm.", "attention_pooling.")


def data_path(notebook: Path) -> Path:
    """The data file beside the notebook: walk.ipynb -> walk.npz."""
    return notebook.with_suffix(".npz")


def requirements(has_tokenizer: bool) -> list[str]:
    """What `pip install` needs for the notebook to run (matplotlib is optional)."""
    return ["numpy", "tokenizers"] if has_tokenizer else ["numpy"]


def _tokenizer_json(backend) -> str | None:
    """The tokenizer as tokenizer.json text (the `tokenizers` pipeline Encoderscope runs), or None."""
    fast = getattr(backend.tokenizer, "backend_tokenizer", None)
    try:
        spec = json.loads(fast.to_str()) if fast is not None else None
    except Exception:   # noqa: BLE001  (a tokenizer that cannot be written: the stored ids are used)
        return None
    if spec is None:
        return None
    # padding and truncation are whatever the last caller set; the notebook sets its own
    spec["padding"], spec["truncation"] = None, None
    return json.dumps(spec, ensure_ascii=False)


def notebook_data(walk, ref) -> dict[str, np.ndarray]:
    """What the .npz holds: w/<weight> float32, e/<step> float32 (the run to compare with), and
    the tokenizer as UTF-8 bytes."""
    arrays = {f"w/{k}": t.detach().cpu().numpy().astype("<f4")
              for k, t in ref.encoder.state_dict().items()
              if k.startswith(WEIGHT_PREFIXES) and t.is_floating_point()}
    arrays.update({f"e/{s.name}": np.asarray(s.values, dtype="<f4") for s in walk.steps})
    tok = _tokenizer_json(ref)
    if tok is not None:
        arrays["tokenizer_json"] = np.frombuffer(tok.encode("utf-8"), dtype=np.uint8)
    return arrays


def _parts(walk) -> list[tuple[str, str, str, list]]:
    """(part key, title, introduction, its steps) in the order the encoder computes them."""
    starts = {first: (title, intro) for first, title, intro in PARTS}
    names = [s.name for s in walk.steps]
    if "final_layernorm" not in names:
        starts[LAST_PART_ALTERNATIVE] = starts.pop("final_layernorm")
    out = []
    for s in walk.steps:
        if s.name in starts:
            title, intro = starts[s.name]
            out.append((title.split(" ·")[0], title, intro, []))
        out[-1][3].append(s)
    return out


def build_notebook(walk, backend, data_name: str = "walk.npz", has_tokenizer: bool = True):
    """-> an nbformat v4 notebook that recomputes and checks every step of ``walk`` from the
    data file ``data_name`` (a name relative to the notebook's folder)."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from core.walkthrough.steps import reference_backend
    ref, _ = reference_backend(backend)
    cfg = {k: getattr(ref.config, k) for k in CONFIG_FIELDS}
    has_types = walk.token_type_ids is not None
    pair = walk.pair
    needs = " ".join(requirements(has_tokenizer))
    stored = {"text": walk.text, "pair": pair, "layer": walk.layer + 1, "head": walk.head + 1,
              "pooling": walk.pooling, "ids": list(walk.ids), "types": walk.token_type_ids,
              "tokens": list(walk.tokens)}
    cells = [new_markdown_cell(
        f"# Inside the encoder, step by step\n\n"
        f"**Needs:** `pip install {needs}` — and `pip install matplotlib` for a plot per step "
        "(optional). No PyTorch, no Encoderscope. Keep "
        f"`{data_name}` (the model's weights and Encoderscope's numbers) beside this notebook.")]
    cells.append(new_markdown_cell(
        f"Model **{_model_name(walk.model)}**, sentence {_quote(walk.text)}"
        + (f" paired with {_quote(pair)}" if pair else "") + ".\n\n"
        "This notebook recomputes every step of the encoder with plain NumPy, from the model's own "
        "weights, and checks each result against the numbers Encoderscope computed. Encoderscope in "
        f"turn checked each of them against its PyTorch encoder: the largest difference was "
        f"{walk.worst_diff:.1e}.\n\n"
        f"We open up layer {walk.layer + 1} and attention head {walk.head + 1} ({walk.norm}-norm "
        f"model, {walk.pooling} pooling); the other layers run in one call each.\n\n"
        "**Explore:** change the sentence, layer, head or pooling in the next cell and run all "
        "cells again (*Run → Run All Cells*). Everything is recomputed from the stored weights; a "
        "step is still compared with Encoderscope's run only when nothing it depends on changed, "
        "and the notebook says so for each one."
        + ("" if has_tokenizer else "\n\n*This model came without a tokenizer the notebook can "
           "use: only the stored sentence can be read (change the layer, head or pooling).*")))
    if walk.truncated:
        cells.append(new_markdown_cell(f"**Note:** the text was cut to the model's maximum of "
                                       f"{walk.max_length} tokens ({walk.truncated} tokens dropped)."))
    cells.append(new_code_cell(
        "# ---- change these, then run all cells again ----\n"
        f"TEXT = {walk.text!r}\n"
        f"PAIR = {pair!r}   # a second sentence read as a pair ([CLS] TEXT [SEP] PAIR [SEP]), or None\n"
        f"LAYER = {walk.layer + 1}   # 1 to {cfg['n_layers']}\n"
        f"HEAD = {walk.head + 1}   # 1 to {cfg['n_heads']}\n"
        f"POOLING = {walk.pooling!r}   # 'mean', 'cls', 'max' (or 'attention' for a model trained with it)\n"
        f"DATA = {data_name!r}   # beside this notebook"))
    cells.append(new_markdown_cell("## Setup\n\nThe step functions (from Encoderscope's "
                                   "`core/walkthrough/numpy_ref.py`, copied here so the notebook stands alone):"))
    cells.append(new_code_cell(IMPORTS))
    for group in FUNCTIONS:
        cells.append(new_code_cell("\n\n".join(inspect.getsource(getattr(numpy_ref, f)).rstrip() for f in group)))
    cells.append(new_markdown_cell(
        "The model's settings and Encoderscope's run (what the checks compare with); then the "
        "weights, as float64 for exact sums, and the tokenizer, read from the data file."))
    cells.append(new_code_cell(
        f"cfg = SimpleNamespace(**{cfg!r})\n"
        f"MAX_LENGTH = {walk.max_length}\n"
        f"STORED = json.loads({json.dumps(stored, ensure_ascii=False)!r})\n"
        f"DEPENDS = {({s.name: depends(s.name) for s in walk.steps})!r}\n\n" + LOAD))
    cells.append(new_markdown_cell("Read the sentence, and see what can still be compared:"))
    cells.append(new_code_cell(CHOOSE))
    cells.append(new_markdown_cell("How each step is shown: its matrix with a token on every row "
                                   "(and on every column where the columns are tokens too), a plot, "
                                   "and the comparison with Encoderscope's number."))
    cells.append(new_code_cell(SHOW))
    number = 0
    for key, title, intro, steps in _parts(walk):
        cells.append(new_markdown_cell(f"## {title}\n\n{intro}"))
        for s in steps:
            number += 1
            cells.append(new_markdown_cell(
                f"### {number}. {s.title}\n\n{s.description}\n\n"
                f"**Formula:** `{s.formula}`  \n**Shapes:** {s.shape_text}  \n"
                f"**Encoderscope's check against its PyTorch encoder:** max |Δ| = {s.max_abs_diff:.1e}"))
            cells.append(new_code_cell(step_code(s.name, walk.norm, cfg["positions"], has_types)))
        text, code = EXERCISES[key]
        cells.append(new_markdown_cell(text))
        cells.append(new_code_cell(code))
    cells.append(new_markdown_cell("## Done"))
    cells.append(new_code_cell(DONE))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.validate(nb)
    return nb


def check_target(backend, path) -> Path:
    """Fail before any work when the notebook could not be written: a wrong suffix."""
    path = Path(path)
    if path.suffix != ".ipynb":
        raise InputError(f"the notebook file should end in .ipynb, not {path.name!r}")
    return path


def write_notebook(walk, backend, path) -> Path:
    """Write ``path`` (.ipynb) and its data file beside it (.npz); -> the notebook's path."""
    import nbformat

    from core.walkthrough.steps import reference_backend
    if getattr(walk, "patched_from", None) is not None:
        raise InputError("a walk patched from sentence B cannot be written as a notebook yet: the notebook "
                         "recomputes one sentence on its own; clear the patch (Intervene tab) and export again")
    path = check_target(backend, path)
    ref, _ = reference_backend(backend)
    arrays = notebook_data(walk, ref)
    data = data_path(path)
    nb = build_notebook(walk, backend, data.name, has_tokenizer="tokenizer_json" in arrays)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # an interrupted write never leaves a half file; a killed one's temporary (or the fixed-name
        # .partial an earlier version left) is removed by the next export of the same file
        cache_file.remove_stale_temps(data)
        legacy = data.with_name(data.name + ".partial")
        if legacy.is_file() and not legacy.is_symlink():
            legacy.unlink()

        def fill(tmp):
            with open(tmp, "wb") as f:
                np.savez_compressed(f, **arrays)
        atomic_write_with(data, fill, durable=False)
        nbformat.write(nb, str(path))
    except OSError as e:
        raise EncoderscopeError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def _model_name(model: str) -> str:
    """A model folder's name without where it lies on this machine (the notebook travels)."""
    return Path(model.rstrip("/\\")).name or model


def _quote(text: str) -> str:
    short = text if len(text) <= 300 else text[:300] + "…"
    return "“" + short.replace("\n", " ") + "”"
