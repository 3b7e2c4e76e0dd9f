"""A walkthrough as a Jupyter notebook a teacher can hand out.

The notebook loads the model's weights from its folder with safetensors + NumPy, tokenizes
the sentence with the `tokenizers` library (tokenizer.json), recomputes every step in plain
NumPy, prints each matrix and asserts it equals the value Encoderscope computed (stored in the
notebook). It imports neither torch nor Encoderscope: the step functions are copied in from
core/numpy_ref.py, and the BERT-to-DistilBERT weight names from core/weights.py.
"""
from __future__ import annotations

import base64
import inspect
from pathlib import Path

import numpy as np

from core import numpy_ref
from core.errors import EncoderscopeError, InputError
from core.weights import BERT_KEY_MAP, LEGACY_LAYER_NORM

# numpy_ref's functions the notebook needs, copied in as they are (the teaching code).
FUNCTIONS = ("sinusoidal_positions", "layer_norm_stats", "layer_norm", "gelu", "linear", "softmax",
             "split_heads", "merge_heads", "attention_scores", "mask_scores", "causal_mask",
             "attention_keep", "self_attention", "feed_forward", "block", "pool",
             "attention_pool_weights", "l2_normalize")
CONFIG_FIELDS = ("dim", "n_layers", "n_heads", "hidden_dim", "activation", "positions", "type_vocab_size",
                 "norm", "layer_norm_eps", "attention")


def step_code(name: str, norm: str, positions: str, has_types: bool) -> str:
    """The NumPy lines that compute one step in the notebook (the same maths as
    core.walkthrough.numpy_steps, written out for reading)."""
    pre = norm == "pre"
    x_att = "layernorm_1" if pre else "layer_input"
    later_layers = ("x = {src}\nfor i in range(LAYER + 1, cfg.n_layers):   # the layers after the chosen one\n"
                    "    x, _ = block(x, p, f'transformer.layer.{{i}}', cfg, seen)\n")
    code = {
        "token_embeddings": "token_embeddings = p['embeddings.word_embeddings.weight'][ids]",
        "position_embeddings": ("position_embeddings = sinusoidal_positions(T, cfg.dim)" if positions == "sinusoidal"
                                else "position_embeddings = p['embeddings.position_embeddings.weight'][:T]"),
        "token_type_embeddings": "token_type_embeddings = p['embeddings.token_type_embeddings.weight'][types]",
        "embeddings_sum": "embeddings_sum = token_embeddings + position_embeddings"
                          + (" + token_type_embeddings" if has_types else ""),
        "embeddings_layernorm": (
            "mean, var = layer_norm_stats(embeddings_sum)\n"
            "print('each token\\'s mean', mean[:, 0].round(4), '\\nand variance', var[:, 0].round(4))\n"
            "embeddings_layernorm = layer_norm(embeddings_sum, p['embeddings.LayerNorm.weight'],\n"
            "                                  p['embeddings.LayerNorm.bias'], cfg.layer_norm_eps)"),
        "layer_input": ("x = embeddings_layernorm\n"
                        "for i in range(LAYER):   # the layers before the chosen one, each in one call\n"
                        "    x, _ = block(x, p, f'transformer.layer.{i}', cfg, seen)\n"
                        "layer_input = x"),
        "q": f"Q_all = linear({x_att}, p, A + '.q_lin')   # all heads: T × D\nq = Q_all[:, COLS]",
        "k": f"K_all = linear({x_att}, p, A + '.k_lin')\nk = K_all[:, COLS]",
        "v": f"V_all = linear({x_att}, p, A + '.v_lin')\nv = V_all[:, COLS]",
        "scores": "scores = attention_scores(q, k)",
        "masked_scores": "masked_scores = mask_scores(scores, seen, fill=-np.inf)",
        "weights": "weights = softmax(masked_scores)\nprint('each row sums to', weights.sum(axis=1).round(6))",
        "head_output": "head_output = weights @ v",
        "heads_concat": ("heads = [split_heads(m, cfg.n_heads) for m in (Q_all, K_all, V_all)]   # H × T × Dh\n"
                         "all_weights = softmax(mask_scores(attention_scores(heads[0], heads[1]), seen))\n"
                         "heads_concat = merge_heads(all_weights @ heads[2])"),
        "attention_output": "attention_output = linear(heads_concat, p, A + '.out_lin')",
        "residual_1": "residual_1 = layer_input + attention_output",
        "layernorm_1": ("layernorm_1 = layer_norm(layer_input, *LN1)" if pre
                        else "layernorm_1 = layer_norm(residual_1, *LN1)"),
        "ffn_hidden": f"ffn_hidden = linear({'layernorm_2' if pre else 'layernorm_1'}, p, F + '.lin1')",
        "ffn_activation": "ffn_activation = gelu(ffn_hidden, approximate=cfg.activation == 'gelu_tanh')",
        "ffn_output": "ffn_output = linear(ffn_activation, p, F + '.lin2')",
        "residual_2": ("residual_2 = residual_1 + ffn_output" if pre
                       else "residual_2 = layernorm_1 + ffn_output"),
        "layernorm_2": ("layernorm_2 = layer_norm(residual_1, *LN2)" if pre
                        else "layernorm_2 = layer_norm(residual_2, *LN2)"),
        "final_layernorm": (later_layers.format(src="residual_2")
                            + "final_layernorm = layer_norm(x, p['final_layer_norm.weight'], "
                              "p['final_layer_norm.bias'], cfg.layer_norm_eps)"),
        "pooled": ("pooled = pool(final_layernorm, keep, POOLING, QUERY)" if pre
                   else later_layers.format(src="layernorm_2") + "pooled = pool(x, keep, POOLING, QUERY)"),
        "normalized": "normalized = l2_normalize(pooled)\nprint('length', np.linalg.norm(normalized))",
    }[name]
    return f"{code}\ncheck({name!r}, {name})"


def _stored(walk) -> str:
    """The walk's values as float32 base64 strings: what the notebook checks itself against."""
    lines = ["EXPECTED = {   # step -> (shape, float32 values as base64), from Encoderscope"]
    for s in walk.steps:
        data = base64.b64encode(np.ascontiguousarray(s.values, dtype="<f4").tobytes()).decode("ascii")
        lines.append(f"    {s.name!r}: ({tuple(s.values.shape)!r}, {data!r}),")
    lines.append("}")
    return "\n".join(lines)


def model_folder(backend) -> Path:
    """The folder holding the model's weights as safetensors; an error for people otherwise."""
    from core.walkthrough import reference_backend
    ref, _ = reference_backend(backend)
    if ref.source.kind == "random":
        raise InputError("the notebook needs a model folder: a random model has no weights on disk "
                         "(use --model minilm, a model folder, or a trained checkpoint)")
    folder = Path(ref.source.folder).resolve()
    if not (folder / "model.safetensors").is_file():
        raise InputError(f"the notebook reads weights with safetensors, but {folder} has no "
                         "model.safetensors (only pytorch_model.bin?)")
    return folder


def build_notebook(walk, backend):
    """-> an nbformat v4 notebook that recomputes and checks every step of ``walk``."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    folder = model_folder(backend)
    from core.walkthrough import reference_backend
    ref, _ = reference_backend(backend)
    cfg = {k: getattr(ref.config, k) for k in CONFIG_FIELDS}
    has_types = walk.token_type_ids is not None
    pair = walk.pair
    cells = [new_markdown_cell(
        f"# Inside the encoder, step by step\n\n"
        f"Model **{walk.model}**, sentence {_quote(walk.text)}"
        + (f" paired with {_quote(pair)}" if pair else "") + ".\n\n"
        f"This notebook recomputes every step of the encoder for this sentence with plain NumPy, "
        f"from the model's own weights, and checks each result against the numbers Encoderscope "
        f"computed (stored below). Encoderscope in turn checked each of them against its PyTorch "
        f"encoder: the largest difference was {walk.worst_diff:.1e}.\n\n"
        f"We open up layer {walk.layer + 1} and attention head {walk.head + 1} "
        f"({walk.norm}-norm model, {walk.pooling} pooling); the other layers run in one call each.\n\n"
        "Needs: Python with `numpy`, `safetensors` and `tokenizers`. No PyTorch, no Encoderscope.")]
    if walk.truncated:
        cells.append(new_markdown_cell(f"**Note:** the text was cut to the model's maximum of "
                                       f"{walk.max_length} tokens ({walk.truncated} tokens dropped)."))
    cells.append(new_markdown_cell("## Setup\n\nThe step functions (from Encoderscope's `core/numpy_ref.py`, "
                                   "copied here so the notebook stands alone):"))
    cells.append(new_code_cell("import base64\nimport math\nimport re\nfrom pathlib import Path\n"
                               "from types import SimpleNamespace\n\nimport numpy as np\n"
                               "from safetensors.numpy import load_file\n\n"
                               "np.set_printoptions(precision=4, suppress=True, linewidth=110, threshold=200, "
                               "edgeitems=3)"))
    cells.append(new_code_cell("\n\n".join(inspect.getsource(getattr(numpy_ref, f)).rstrip()
                                           for f in FUNCTIONS)))
    cells.append(new_markdown_cell(
        "The model's settings, and where its weights are. **If you moved the model, change `FOLDER`.**"))
    cells.append(new_code_cell(
        f"FOLDER = Path({str(folder)!r})\n"
        f"cfg = SimpleNamespace(**{cfg!r})\n"
        f"TEXT, PAIR = {walk.text!r}, {pair!r}\n"
        f"LAYER, HEAD, POOLING = {walk.layer}, {walk.head}, {walk.pooling!r}   # 0-based layer and head\n"
        f"MAX_LENGTH = {walk.max_length}"))
    cells.append(new_markdown_cell(
        "Load the weights with safetensors as NumPy arrays (float64 for exact sums). BERT-layout "
        "files (such as all-MiniLM-L6-v2) name their tensors differently from DistilBERT; this table "
        "renames them to the DistilBERT names the steps use."))
    cells.append(new_code_cell(
        f"BERT_TO_DISTILBERT = {[(a, b) for a, b in BERT_KEY_MAP]!r}\n"
        f"LEGACY_LAYER_NORM = re.compile({LEGACY_LAYER_NORM.pattern!r})   # old TF names: gamma/beta\n\n"
        "def our_name(key):\n"
        "    key = LEGACY_LAYER_NORM.sub(lambda m: m[1] + ('.weight' if m[2] == 'gamma' else '.bias'), key)\n"
        "    for pattern, repl in BERT_TO_DISTILBERT:\n"
        "        new, n = re.subn(pattern, repl, key)\n"
        "        if n:\n"
        "            return new\n"
        "    return key.removeprefix('distilbert.')\n\n"
        "p = {}\n"
        "for key, value in load_file(str(FOLDER / 'model.safetensors')).items():\n"
        "    name = our_name(key)\n"
        "    if name.startswith(('embeddings.', 'transformer.', 'final_layer_norm.', 'attention_pooling.')) \\\n"
        "            and 'position_ids' not in name:\n"
        "        p[name] = value.astype(np.float64)\n"
        "QUERY = p.get('attention_pooling.query')   # attention pooling's learned query, if trained\n"
        "print(len(p), 'tensors, e.g.', p['embeddings.word_embeddings.weight'].shape, 'word embeddings')"))
    cells.append(new_markdown_cell(
        "Tokenize with the model's own tokenizer (`tokenizer.json`), and check the ids are the ones "
        "Encoderscope used."))
    cells.append(new_code_cell(
        f"STORED_IDS = {walk.ids!r}\nSTORED_TYPES = {walk.token_type_ids!r}\n"
        "if (FOLDER / 'tokenizer.json').is_file():\n"
        "    from tokenizers import Tokenizer\n"
        "    tokenizer = Tokenizer.from_file(str(FOLDER / 'tokenizer.json'))\n"
        "    tokenizer.no_padding()\n"
        "    tokenizer.enable_truncation(max_length=MAX_LENGTH)\n"
        "    encoding = tokenizer.encode(TEXT, PAIR) if PAIR else tokenizer.encode(TEXT)\n"
        "    ids, types, tokens = encoding.ids, encoding.type_ids, encoding.tokens\n"
        "    assert ids == STORED_IDS, 'the tokenizer gives other ids than Encoderscope did'\n"
        "else:   # no tokenizer.json in the folder: use the ids Encoderscope stored\n"
        f"    ids, types, tokens = STORED_IDS, STORED_TYPES or [0] * len(STORED_IDS), {walk.tokens!r}\n"
        "ids, types = np.array(ids), np.array(types)\n"
        "T = len(ids)\n"
        "keep = np.ones(T, bool)   # one sentence, no padding\n"
        "seen = attention_keep(keep, cfg.attention == 'causal')   # the keys each query sees\n"
        "print(T, 'tokens:', ' '.join(tokens))"))
    cells.append(new_markdown_cell(
        "The numbers Encoderscope computed, stored so that this notebook can check itself "
        "(float32, base64), and the check each step runs."))
    # Long lines of base64: folded away in Jupyter (the code still runs).
    cells.append(new_code_cell(_stored(walk), metadata={"jupyter": {"source_hidden": True}}))
    cells.append(new_code_cell(
        "def expected(name):\n"
        "    shape, data = EXPECTED[name]\n"
        "    return np.frombuffer(base64.b64decode(data), dtype='<f4').reshape(shape).astype(np.float64)\n\n"
        "checked = []\n\n"
        "def check(name, value):\n"
        "    \"\"\"Show the step's matrix and assert it is Encoderscope's (to float32 precision).\"\"\"\n"
        "    want = expected(name)\n"
        "    print(f'{name}: shape {value.shape}')\n"
        "    print(value)\n"
        "    assert value.shape == want.shape, (value.shape, want.shape)\n"
        "    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)\n"
        "    checked.append(name)\n"
        "    masked = np.isinf(want) & (value == want)   # -inf (a masked score) on both sides\n"
        "    print(f'= Encoderscope (max |Δ| {np.abs(np.where(masked, 0, value - want)).max():.1e})')\n\n"
        "dh = cfg.dim // cfg.n_heads\n"
        "COLS = slice(HEAD * dh, (HEAD + 1) * dh)            # head HEAD's columns\n"
        "L = f'transformer.layer.{LAYER}'\nA, F = L + '.attention', L + '.ffn'\n"
        "LN1 = (p[L + '.sa_layer_norm.weight'], p[L + '.sa_layer_norm.bias'], cfg.layer_norm_eps)\n"
        "LN2 = (p[L + '.output_layer_norm.weight'], p[L + '.output_layer_norm.bias'], cfg.layer_norm_eps)"))
    cells.append(new_markdown_cell("## The steps"))
    for i, s in enumerate(walk.steps, 1):
        cells.append(new_markdown_cell(
            f"### {i}. {s.title}\n\n{s.description}\n\n"
            f"**Formula:** `{s.formula}`  \n**Shapes:** {s.shape_text}  \n"
            f"**Encoderscope's check against its PyTorch encoder:** max |Δ| = {s.max_abs_diff:.1e}"))
        cells.append(new_code_cell(step_code(s.name, walk.norm, cfg["positions"], has_types)))
    cells.append(new_markdown_cell("## Done"))
    cells.append(new_code_cell(
        "assert checked == list(EXPECTED), 'some steps were not checked'\n"
        "print(f'all {len(checked)} steps equal the numbers Encoderscope computed')"))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.validate(nb)
    return nb


def check_target(backend, path) -> Path:
    """Fail before any work when the notebook could not be written: wrong suffix, no folder."""
    path = Path(path)
    if path.suffix != ".ipynb":
        raise InputError(f"the notebook file should end in .ipynb, not {path.name!r}")
    model_folder(backend)
    return path


def write_notebook(walk, backend, path) -> Path:
    import nbformat
    path = check_target(backend, path)
    nb = build_notebook(walk, backend)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(path))
    except OSError as e:
        raise EncoderscopeError(f"cannot write {path}: {e.strerror or e}") from None
    return path


def _quote(text: str) -> str:
    short = text if len(text) <= 300 else text[:300] + "…"
    return "“" + short.replace("\n", " ") + "”"
