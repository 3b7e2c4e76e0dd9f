"""The text of the exported notebook's cells: the helpers it defines, each step's NumPy lines,
the parts the steps are grouped in, and an exercise after each part.

Everything here is source code *for the notebook*, which imports only NumPy, `tokenizers` (to
read a new sentence) and, when installed, matplotlib. core/walkthrough/notebook_export.py assembles it.
"""
from __future__ import annotations

# The parts of the walk: (first step of the part, title, introduction). A part runs until the
# next part's first step; "pooled" opens the last part when there is no final LayerNorm.
PARTS = (
    ("token_embeddings", "Part 1 · From tokens to vectors",
     "Each token id picks a row of a learned table; where the token stands adds a position vector "
     "(and, for a pair, which sentence it is in adds a segment vector). LayerNorm then gives every "
     "token's vector mean 0 and variance 1 before the learned scale and shift."),
    ("layer_input", "Part 2 · One attention head",
     "Inside the chosen layer, one head: every token asks a question (its query q), offers a "
     "label (its key k) and carries content (its value v). Scores q·k/√d say how well each "
     "question matches each label; softmax turns each row into weights that sum to 1; the "
     "head's output for a token is the weighted sum of the values."),
    ("heads_concat", "Part 3 · All heads, and back to the residual stream",
     "Every head does the same on its own slice of the dimensions; their outputs side by side "
     "are mixed by one more matrix (W_O) and added to the layer's input: the residual stream."),
    ("ffn_hidden", "Part 4 · The feed-forward network",
     "Each token alone now goes through two linear maps with a GELU between them: the layer's "
     "per-token computation. Its output is added to the stream and normalised."),
    ("final_layernorm", "Part 5 · One vector for the sentence",
     "The last layer's token vectors are pooled into one sentence vector and scaled to length 1: "
     "the vector a search compares by cosine."),
)
LAST_PART_ALTERNATIVE = "pooled"      # post-norm models have no final LayerNorm: part 5 opens here

EXERCISES = {
    "Part 1": (
        "**Exercise 1 — word order.** Attention by itself ignores order: only the position "
        "embeddings tell the model where a token stands. Tokenize *dog bites man* and *man bites "
        "dog* with `tokenize(...)` below, look up their token embeddings and check which rows are "
        "equal (same word, different place). Are the rows of `embeddings_sum` equal too? Why not?",
        "# Exercise 1: your code here, for example\n"
        "# ids_a, _, tokens_a = tokenize('dog bites man')\n"
        "# ids_b, _, tokens_b = tokenize('man bites dog')\n"
        "# E = p['embeddings.word_embeddings.weight']\n"
        "# print(tokens_a, tokens_b)"),
    "Part 2": (
        "**Exercise 2 — softmax by hand.** Write softmax with `np.exp` yourself (subtract each "
        "row's maximum first: why?) and check your result equals `weights`. Then compute the "
        "weights *without* dividing by √d: are the rows more peaked (larger maximum) or flatter?",
        "# Exercise 2: your code here, for example\n"
        "# def my_softmax(s):\n"
        "#     e = np.exp(s - s.max(axis=-1, keepdims=True))\n"
        "#     return e / e.sum(axis=-1, keepdims=True)\n"
        "# print(np.abs(my_softmax(masked_scores) - weights).max())"),
    "Part 3": (
        "**Exercise 3 — heads side by side.** `heads_concat` holds every head's output. Check that "
        "its columns `COLS` equal `head_output` (the head of part 2). Then set `HEAD` to another "
        "head in the settings cell, run all cells again and compare the two heads' weights: do "
        "they look at the same tokens?",
        "# Exercise 3: your code here, for example\n"
        "# print(np.abs(heads_concat[:, COLS] - head_output).max())"),
    "Part 4": (
        "**Exercise 4 — GELU versus ReLU.** What share of `ffn_hidden`'s values does GELU turn "
        "into (almost) zero? Replace `gelu` by ReLU (`np.maximum(x, 0)`) and see how much "
        "`ffn_output` changes.",
        "# Exercise 4: your code here, for example\n"
        "# print((np.abs(ffn_activation) < 1e-2).mean())\n"
        "# relu_out = linear(np.maximum(ffn_hidden, 0), p, F + '.lin2')"),
    "Part 5": (
        "**Exercise 5 — a search by hand.** `sentence_vector(text)` (defined below) runs the whole "
        "encoder on a sentence. Compute the vectors of three sentences of your own and their "
        "cosines (a dot product: the vectors have length 1). Which pair is closest? Do the same "
        "with `pooling='cls'`: does the order change?",
        "# Exercise 5: your code here, for example\n"
        "# a, b = sentence_vector('A cat sleeps.'), sentence_vector('A kitten naps.')\n"
        "# print(float(a @ b))"),
}

IMPORTS = """\
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np

np.set_printoptions(precision=4, suppress=True, linewidth=120)
try:                       # optional: a plot per step
    import matplotlib.pyplot as plt
except ImportError:
    plt = None
    print('matplotlib is not installed: the plots are skipped (pip install matplotlib to see them)')"""

LOAD = """\
data = np.load(Path(DATA))           # beside this notebook: the weights and Encoderscope's numbers
p = {name[2:]: data[name].astype(np.float64) for name in data.files if name.startswith('w/')}
EXPECTED = {name[2:]: data[name].astype(np.float64) for name in data.files if name.startswith('e/')}
print(len(p), 'weight tensors, e.g. word embeddings', p['embeddings.word_embeddings.weight'].shape)

tokenizer = None
if 'tokenizer_json' in data.files:
    try:
        from tokenizers import Tokenizer
        tokenizer = Tokenizer.from_str(bytes(data['tokenizer_json']).decode('utf-8'))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_LENGTH)
    except ImportError:
        print('tokenizers is not installed: only the stored sentence can be used (pip install tokenizers)')


def tokenize(text, pair=None):
    \"\"\"-> (ids, token types, tokens) of a sentence, or of a pair [CLS] text [SEP] pair [SEP].\"\"\"
    if (text, pair) == (STORED['text'], STORED['pair']):
        return STORED['ids'], STORED['types'], STORED['tokens']
    if tokenizer is None:
        raise RuntimeError('this notebook can only read the sentence Encoderscope stored '
                           '(no tokenizer): change LAYER, HEAD or POOLING instead of TEXT')
    encoding = tokenizer.encode(text, pair) if pair else tokenizer.encode(text)
    return encoding.ids, encoding.type_ids, encoding.tokens"""

CHOOSE = """\
if not 1 <= LAYER <= cfg.n_layers:
    raise ValueError(f'LAYER must be 1 to {cfg.n_layers}')
if not 1 <= HEAD <= cfg.n_heads:
    raise ValueError(f'HEAD must be 1 to {cfg.n_heads}')
QUERY = p.get('attention_pooling.query')   # attention pooling's learned query, if the model has one
if POOLING not in ('mean', 'cls', 'max') and not (POOLING == 'attention' and QUERY is not None):
    raise ValueError("POOLING must be 'mean', 'cls' or 'max'" + (" or 'attention'" if QUERY is not None else ""))
ids, types, tokens = tokenize(TEXT, PAIR)
ids, types = np.array(ids), np.array(types if types else [0] * len(ids))
T = len(ids)
keep = np.ones(T, bool)                   # one sentence, no padding
seen = attention_keep(keep, cfg.attention == 'causal')   # the keys each query sees (a causal model: the earlier ones)
layer, head = LAYER - 1, HEAD - 1         # the arrays count from 0
dh = cfg.dim // cfg.n_heads
COLS = slice(head * dh, (head + 1) * dh)  # this head's columns of Q, K and V
L = f'transformer.layer.{layer}'
A, F = L + '.attention', L + '.ffn'
LN1 = (p[L + '.sa_layer_norm.weight'], p[L + '.sa_layer_norm.bias'], cfg.layer_norm_eps)
LN2 = (p[L + '.output_layer_norm.weight'], p[L + '.output_layer_norm.bias'], cfg.layer_norm_eps)

# What changed since Encoderscope's run decides which steps can still be compared with it.
changed = set()
if list(ids) != list(STORED['ids']) or list(types) != list(STORED['types'] or [0] * len(STORED['ids'])):
    changed.add('tokens')
changed |= {name for name, now in (('layer', LAYER), ('head', HEAD), ('pooling', POOLING)) if now != STORED[name]}
print(T, 'tokens:', ' '.join(tokens))
print('compared with Encoderscope\\'s run:', 'every step' if not changed else
      'only the steps that do not depend on the ' + ', '.join(sorted(changed)) + ' you changed')"""

SHOW = """\
def table(value, rows, cols=None, max_cols=8, width=9):
    \"\"\"A matrix as text, every row labelled by its token (and token x token columns by token).\"\"\"
    v = np.atleast_2d(value)
    n = v.shape[1]
    names = [str(c) for c in cols] if cols is not None else [f'd{j}' for j in range(n)]
    shown = list(range(n)) if n <= max_cols else [*range(max_cols - 2), None, n - 2, n - 1]
    left = max(len(str(r)) for r in rows)

    def cell(x):
        return ('-inf' if x < -1e29 else f'{x:.4f}').rjust(width)
    lines = [' ' * left + ''.join(('…' if j is None else names[j][:width - 1]).rjust(width) for j in shown)]
    for i, r in enumerate(rows):
        lines.append(str(r).rjust(left) + ''.join('…'.rjust(width) if j is None else cell(v[i, j]) for j in shown))
    if n > max_cols:
        lines.append(f'({n} columns, {max_cols - 1} shown)')
    return '\\n'.join(lines)


def plot(name, value, rows, cols=None):
    \"\"\"One picture of the step: a heatmap with token labels, or the vector as bars.\"\"\"
    if plt is None:
        return
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rows) + 1.5 if np.ndim(value) == 2 else 2.2))
    if np.ndim(value) == 1:
        ax.bar(np.arange(len(value)), value, width=1.0)
        ax.set_xlabel('dimension')
    else:
        shown = np.where(value < -1e29, np.nan, value)
        limit = np.nanmax(np.abs(shown)) or 1.0
        probabilities = name == 'weights'
        image = ax.imshow(shown, aspect='auto', cmap='Blues' if probabilities else 'RdBu_r',
                          vmin=0 if probabilities else -limit, vmax=1 if probabilities else limit)
        ax.set_yticks(range(len(rows)), rows)
        if cols is not None:
            ax.set_xticks(range(len(cols)), cols, rotation=90)
            ax.set_xlabel('token (key)')
        else:
            ax.set_xlabel('dimension')
        fig.colorbar(image, ax=ax)
    ax.set_title(name)
    plt.show()
    plt.close(fig)


checked, recomputed = [], []


def show(name, value, cols=None):
    \"\"\"Print the step with its token labels, plot it, and compare it with Encoderscope's run
    when nothing it depends on was changed in the settings cell.\"\"\"
    rows = [f'{POOLING} pooled'] if np.ndim(value) == 1 else list(tokens)
    print(f'{name}: shape {value.shape}')
    print(table(value, rows, cols, max_cols=16 if cols is not None else 8))
    plot(name, value, rows, cols)
    stale = changed & set(DEPENDS[name])
    if stale:
        recomputed.append(name)
        print(f'(not compared with Encoderscope: it depends on the {", ".join(sorted(stale))} you changed)')
        return
    want = EXPECTED[name]
    assert value.shape == want.shape, (value.shape, want.shape)
    np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-5)
    checked.append(name)
    print(f"= Encoderscope's number (max |Δ| {np.nan_to_num(np.abs(value - want)).max():.1e})")


def sentence_vector(text, pair=None, pooling=None):
    \"\"\"The whole encoder on a sentence: its unit vector (what a search compares).\"\"\"
    ids_, types_, _ = tokenize(text, pair)
    mask = np.ones(len(ids_), bool)
    seen_ = attention_keep(mask, cfg.attention == 'causal')
    x = p['embeddings.word_embeddings.weight'][np.array(ids_)]
    x = x + (sinusoidal_positions(len(ids_), cfg.dim) if cfg.positions == 'sinusoidal'
             else p['embeddings.position_embeddings.weight'][:len(ids_)])
    if cfg.type_vocab_size:
        x = x + p['embeddings.token_type_embeddings.weight'][np.array(types_ or [0] * len(ids_))]
    x = layer_norm(x, p['embeddings.LayerNorm.weight'], p['embeddings.LayerNorm.bias'], cfg.layer_norm_eps)
    for i in range(cfg.n_layers):
        x, _ = block(x, p, f'transformer.layer.{i}', cfg, seen_)
    if cfg.norm == 'pre':
        x = layer_norm(x, p['final_layer_norm.weight'], p['final_layer_norm.bias'], cfg.layer_norm_eps)
    return l2_normalize(pool(x, mask, pooling or POOLING, QUERY))"""

DONE = """\
print(f'{len(checked)} steps equal the numbers Encoderscope computed', end='')
print(f'; {len(recomputed)} recomputed for your settings, not compared: {", ".join(recomputed)}' if recomputed else '')
assert set(checked) | set(recomputed) == set(EXPECTED), 'some steps were not shown'
if not changed:
    assert checked == list(EXPECTED), 'some steps were not checked'
    print(f'all {len(checked)} steps equal the numbers Encoderscope computed')"""

# Which of the settings each step depends on: when one of them differs from the stored run,
# the step is recomputed but no longer compared.
LAYER_STEPS = ("layer_input", "heads_concat", "attention_output", "residual_1", "layernorm_1", "ffn_hidden",
               "ffn_activation", "ffn_output", "residual_2", "layernorm_2")
HEAD_STEPS = ("q", "k", "v", "scores", "masked_scores", "weights", "head_output")


def depends(name: str) -> tuple:
    if name in HEAD_STEPS:
        return ("tokens", "layer", "head")
    if name in LAYER_STEPS:
        return ("tokens", "layer")
    if name in ("pooled", "normalized"):
        return ("tokens", "pooling")
    return ("tokens",)


def step_code(name: str, norm: str, positions: str, has_types: bool) -> str:
    """The NumPy lines that compute one step in the notebook (the same maths as
    core.walkthrough.steps.numpy_steps, written out for reading), then show() it."""
    pre = norm == "pre"
    x_att = "layernorm_1" if pre else "layer_input"
    later_layers = ("x = {src}\nfor i in range(layer + 1, cfg.n_layers):   # the layers after the chosen one\n"
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
                        "for i in range(layer):   # the layers before the chosen one, each in one call\n"
                        "    x, _ = block(x, p, f'transformer.layer.{i}', cfg, seen)\n"
                        "layer_input = x"),
        "q": f"Q_all = linear({x_att}, p, A + '.q_lin')   # all heads: T × D\nq = Q_all[:, COLS]",
        "k": f"K_all = linear({x_att}, p, A + '.k_lin')\nk = K_all[:, COLS]",
        "v": f"V_all = linear({x_att}, p, A + '.v_lin')\nv = V_all[:, COLS]",
        "scores": "scores = attention_scores(q, k)",
        "masked_scores": "masked_scores = mask_scores(scores, seen, fill=-np.inf)   # -inf: a key not seen",
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
    cols = ", cols=tokens" if name in ("scores", "masked_scores", "weights") else ""
    return f"{code}\nshow({name!r}, {name}{cols})"
