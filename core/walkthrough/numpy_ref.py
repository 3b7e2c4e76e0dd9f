"""The encoder once more, in NumPy: explicit matrices, one function per step.

This is the teaching version (the seed notebooks' style) and a second reference for the torch
encoder: ``forward(params, cfg, input_ids, attention_mask)`` equals ``Encoder`` to 1e-5.
``params`` is the torch model's state_dict as NumPy arrays (``params_from_torch``).

``switch`` (a core.intervene Intervention, optional) switches parts off the NumPy way: a head's
columns zeroed or set to its mean before out_lin, a sublayer's output dropped, a block passed
through, positions dropped or permuted, the scores scaled otherwise, attention edges cut (a
query no longer among the keys it sees: cut_keep). It is a second, independent
computation of what core/intervene/apply.py does with hooks. ``patches`` ({site: B's numbers at
A's token positions}, the form core.intervene.patching.capture_sites gives) puts sentence B's
numbers in place of A's at a head's output, an FFN's output or a block's output (patch_rows).
"""
from __future__ import annotations

import math

import numpy as np


def params_from_torch(model) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().astype(np.float64) for k, v in model.state_dict().items()}


def sinusoidal_positions(n_positions: int, dim: int) -> np.ndarray:
    """PE[p, 2i] = sin(p / 10000^(2i/d)),  PE[p, 2i+1] = cos(p / 10000^(2i/d))."""
    pe = np.zeros((n_positions, dim))
    for p in range(n_positions):
        for i in range(0, dim, 2):
            angle = p / 10000 ** (i / dim)
            pe[p, i] = math.sin(angle)
            if i + 1 < dim:
                pe[p, i + 1] = math.cos(angle)
    return pe


def layer_norm_stats(x):
    """Each token's mean and (biased) variance over its D numbers: what LayerNorm removes."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return mean, var


def layer_norm(x, gamma, beta, eps):
    """Normalise each token vector to mean 0, variance 1, then scale and shift."""
    mean, var = layer_norm_stats(x)
    return gamma * (x - mean) / np.sqrt(var + eps) + beta


def gelu(x, approximate: bool):
    if approximate:
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def linear(x, p, name):
    """x @ W^T + b, with torch's (out, in) weight layout."""
    return x @ p[name + ".weight"].T + p[name + ".bias"]


def softmax(scores):
    scores = scores - scores.max(axis=-1, keepdims=True)     # stable: the largest becomes 0
    e = np.exp(scores)
    return e / e.sum(axis=-1, keepdims=True)


def split_heads(x, n_heads):
    """(T, D) -> (H, T, Dh): head h owns the columns h*Dh ... (h+1)*Dh - 1."""
    T, D = x.shape
    return x.reshape(T, n_heads, D // n_heads).transpose(1, 0, 2)


def merge_heads(x):
    """(H, T, Dh) -> (T, D): the heads' outputs side by side again."""
    H, T, dh = x.shape
    return x.transpose(1, 0, 2).reshape(T, H * dh)


def attention_scores(q, k):
    """How well each query matches each key: Q Kᵀ / √Dh.  (..., T, Dh) -> (..., T, T)."""
    return q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])


def mask_scores(scores, keep, fill=-1e30):
    """Keys not kept get a score so low (``fill``; -inf to show it) that softmax gives them
    weight 0. keep (T,): padding keys False; (T, T): row i says which keys query i may see
    (the causal mask, and padding)."""
    return np.where(keep, scores, fill)


def causal_mask(T):
    """(T, T) bool: query i may see key j when j <= i (itself and the tokens before it)."""
    return np.tril(np.ones((T, T), bool))


def attention_keep(keep, causal):
    """Which keys each query sees: the padding mask (T,), and with ``causal`` also only the
    earlier keys, (T, T)."""
    return causal_mask(len(keep)) & keep[None, :] if causal else keep


def cut_keep(keep, cuts, layer, n_heads):
    """Attention-edge knock-out: which keys each query of each head sees in ``layer``, (H, T, T),
    query q no longer seeing key k in the cut heads (a cut has layer, head (None: every head),
    query and key, as core.intervene.edges.Cut). keep: (T,) or (T, T), as attention_keep gives."""
    T = keep.shape[-1]
    out = np.array(np.broadcast_to(keep if keep.ndim == 2 else keep[None, :], (n_heads, T, T)))
    for c in cuts:
        if c.layer == layer:
            out[slice(None) if c.head is None else c.head, c.query, c.key] = False
    return out


def layer_keep(keep, switch, layer, n_heads):
    """The keys each query sees in ``layer``: ``keep``, less the edges ``switch`` cuts there."""
    if switch is None or not any(c.layer == layer for c in switch.cuts):
        return keep
    return cut_keep(keep, switch.cuts, layer, n_heads)


# Twin of core.encoder.model.Embeddings.forward,
#   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
#   the same sum and LayerNorm in NumPy float64, one sequence at a time, for a learner to read.
def embed(p, cfg, ids, prefix="", types=None, switch=None):
    """Token embedding + position (+ token type, 0 unless given) -> LayerNorm.  ids (T,) -> (T, D)."""
    T = len(ids)
    x = p[prefix + "embeddings.word_embeddings.weight"][ids]
    if cfg.positions == "sinusoidal":
        table = sinusoidal_positions(T, cfg.dim)
    else:
        table = p[prefix + "embeddings.position_embeddings.weight"][:T]
    positions = "keep" if switch is None else switch.positions
    if positions == "shuffle":
        table = table[np.random.default_rng(switch.shuffle_seed).permutation(T)]
    if positions != "off":
        x = x + table
    if cfg.type_vocab_size:
        types = np.zeros(T, int) if types is None else np.asarray(types)
        x = x + p[prefix + "embeddings.token_type_embeddings.weight"][types]
    return layer_norm(x, p[prefix + "embeddings.LayerNorm.weight"], p[prefix + "embeddings.LayerNorm.bias"],
                      cfg.layer_norm_eps)


# Twin of core.encoder.model.MultiHeadSelfAttention.forward,
#   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
#   every intermediate kept (the walkthrough shows each), one sequence, NumPy float64.
def self_attention_steps(x, p, name, n_heads, keep, fill=-1e30, score_factor=1.0, replace_heads=None,
                         patch_heads=()) -> dict:
    """Multi-head self-attention for one sequence, every intermediate kept.  x (T, D), keep (T,)
    or (T, T) bool -> q, k, v (H, T, Dh); scores, masked_scores, weights (H, T, T); head_outputs
    (H, T, Dh); heads_concat (T, D); attention_output (T, D). ``fill``: the masked score (-inf to show it).
    score_factor multiplies the scaled scores (1: the model's own); replace_heads {h: 0 or a (Dh,) mean}
    puts that in place of head h's output (an intervention); patch_heads [(h, token or None, B's
    (T, D) concatenation)] then takes head h's columns from sentence B. computed_head_outputs: the
    heads' outputs before either."""
    s = {m: split_heads(linear(x, p, f"{name}.{m}_lin"), n_heads) for m in ("q", "k", "v")}   # (H, T, dh)
    s["scores"] = attention_scores(s["q"], s["k"])
    if score_factor != 1.0:
        s["scores"] = s["scores"] * score_factor
    s["masked_scores"] = mask_scores(s["scores"], keep, fill)
    s["weights"] = softmax(s["masked_scores"])
    s["head_outputs"] = s["weights"] @ s["v"]
    s["computed_head_outputs"] = s["head_outputs"].copy()
    for h, value in (replace_heads or {}).items():
        s["head_outputs"][h] = value
    s["heads_concat"] = merge_heads(s["head_outputs"])                            # the heads side by side
    dh = s["v"].shape[-1]
    for h, token, from_b in patch_heads:
        s["heads_concat"] = patch_rows(s["heads_concat"], from_b, token, slice(h * dh, (h + 1) * dh))
    s["attention_output"] = linear(s["heads_concat"], p, name + ".out_lin")
    return s


def self_attention(x, p, name, n_heads, keep, score_factor=1.0, replace_heads=None):
    """Multi-head self-attention for one sequence.  x (T, D), keep (T,) or (T, T) bool -> (T, D), (H, T, T)."""
    s = self_attention_steps(x, p, name, n_heads, keep, score_factor=score_factor, replace_heads=replace_heads)
    return s["attention_output"], s["weights"]


# Twin of core.encoder.model.FFN.forward,
#   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
#   W2·GELU(W1·x + b1) + b2 in NumPy float64, the formula the walkthrough prints.
def feed_forward(x, p, name, approximate):
    """The position-wise FFN.  x (T, D) -> (T, D)."""
    return linear(gelu(linear(x, p, name + ".lin1"), approximate), p, name + ".lin2")


# Twin of core.encoder.model.TransformerBlock.forward,
#   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
#   pre- and post-norm spelled out step by step, every intermediate kept, NumPy float64.
def block_steps(x, p, name, cfg, keep, fill=-1e30, score_factor=1.0, replace_heads=None,
                attention_off=False, ffn_off=False, patch_heads=(), patch_ffn=()) -> dict:
    """One transformer block, every intermediate kept (self_attention_steps' too): layer_input,
    layernorm_1, residual_1, layernorm_2, ffn_hidden, ffn_activation, ffn_output, residual_2 and
    output. Pre-norm normalises each sublayer's input; post-norm each residual sum.
    score_factor, replace_heads: see self_attention_steps; attention_off / ffn_off: that sublayer's
    output is dropped (zeros), so its residual add passes the input through (an intervention).
    patch_heads: see self_attention_steps; patch_ffn [(token or None, B's (T, D) FFN output)]: the
    FFN's output taken from sentence B there (``patched_ffn``; ``ffn_output`` stays A's own)."""
    ln1 = (p[name + ".sa_layer_norm.weight"], p[name + ".sa_layer_norm.bias"], cfg.layer_norm_eps)
    ln2 = (p[name + ".output_layer_norm.weight"], p[name + ".output_layer_norm.bias"], cfg.layer_norm_eps)
    pre = cfg.norm == "pre"
    s = {"layer_input": x}
    if pre:
        s["layernorm_1"] = layer_norm(x, *ln1)
    s.update(self_attention_steps(s["layernorm_1"] if pre else x, p, name + ".attention", cfg.n_heads, keep, fill,
                                  score_factor, replace_heads, patch_heads))
    if attention_off:
        s["attention_output"] = np.zeros_like(s["attention_output"])
    s["residual_1"] = x + s["attention_output"]
    if pre:
        s["layernorm_2"] = ffn_input = layer_norm(s["residual_1"], *ln2)
    else:
        s["layernorm_1"] = ffn_input = layer_norm(s["residual_1"], *ln1)
    s["ffn_hidden"] = linear(ffn_input, p, name + ".ffn.lin1")
    s["ffn_activation"] = gelu(s["ffn_hidden"], cfg.activation == "gelu_tanh")
    s["ffn_output"] = s["computed_ffn_output"] = linear(s["ffn_activation"], p, name + ".ffn.lin2")
    if ffn_off:
        s["ffn_output"] = np.zeros_like(s["ffn_output"])
    added = s["ffn_output"]
    if patch_ffn:
        s["ffn_output"] = s["computed_ffn_output"]       # A's own, shown before B's numbers replace it
        for token, from_b in patch_ffn:
            added = patch_rows(added, from_b, token)
        s["patched_ffn"] = added
    s["residual_2"] = (s["residual_1"] if pre else s["layernorm_1"]) + added
    s["output"] = s["residual_2"] if pre else layer_norm(s["residual_2"], *ln2)
    if not pre:
        s["layernorm_2"] = s["output"]
    return s


def block(x, p, name, cfg, keep, switch=None, layer=0, means=None, patches=None):
    """One transformer block.  x (T, D) -> (T, D), its attention weights (H, T, T).
    switch: an Intervention, applied to this block as layer number ``layer`` (0-based);
    patches: {site: B's numbers at A's positions}, this layer's applied (see patch_arguments)."""
    if switch is not None or patches:
        return _switched_block(x, p, name, cfg, keep, switch, layer, means, patches or {})
    s = block_steps(x, p, name, cfg, keep)
    return s["output"], s["weights"]


def patch_rows(value, from_b, token=None, cols=slice(None)):
    """Activation patching: ``value`` (T, D) with sentence B's numbers at one token (None: every
    token), in ``cols`` only. ``from_b`` (T, D) holds B's numbers already at A's positions."""
    out = np.array(value, dtype=np.float64)
    rows = slice(None) if token is None else token
    out[rows, cols] = from_b[rows, cols]
    return out


def patch_arguments(patches: dict, layer: int) -> dict:
    """block_steps' keyword arguments for the head and FFN patches of layer ``layer``. A site has
    kind ("head", "ffn", "resid"), layer, head and token, as core.intervene.spec.Site."""
    here = [(s, b) for s, b in patches.items() if s.layer == layer]
    return {"patch_heads": [(s.head, s.token, b) for s, b in here if s.kind == "head"],
            "patch_ffn": [(s.token, b) for s, b in here if s.kind == "ffn"]}


def patch_output(x, patches: dict, layer: int):
    """The block's output ``x`` with the residual-stream patches of layer ``layer`` applied."""
    for s, from_b in patches.items():
        if s.layer == layer and s.kind == "resid":
            x = patch_rows(x, from_b, s.token)
    return x


def switch_arguments(switch, layer, dh, means) -> dict:
    """block_steps' keyword arguments for an Intervention's parts of layer ``layer``: the scores'
    extra factor, each ablated head's replacement (0 or its mean), the sublayers dropped."""
    return {"score_factor": (math.sqrt(dh) if switch.no_scale else 1.0) / switch.temperature,
            "replace_heads": {h: (0.0 if switch.head_mode == "zero" else np.asarray(means[layer][h], np.float64))
                              for l, h in switch.heads if l == layer},
            "attention_off": layer in switch.attention_off, "ffn_off": layer in switch.ffn_off}


def _switched_block(x, p, name, cfg, keep, switch, layer, means, patches):
    """``block`` with the intervention's parts of this layer switched off (a skipped block passes
    its input through), then sentence B's numbers patched in."""
    switched = {} if switch is None else switch_arguments(switch, layer, cfg.dim // cfg.n_heads, means)
    s = block_steps(x, p, name, cfg, keep, **switched, **patch_arguments(patches, layer))
    out = x if switch is not None and layer in switch.skip else s["output"]
    return patch_output(out, patches, layer), s["weights"]


# Twin of core.encoder.model.Encoder.forward,
#   pinned by tests/core/encoder/test_parts.py::test_numpy_reference_equals_torch:
#   the whole network in NumPy float64 with no torch in the loop: the independent reference
#   the walkthrough compares every step of the torch model with.
def forward(p, cfg, ids, keep=None, prefix="", types=None, switch=None, means=None):
    """One sequence through the whole encoder.  -> last hidden (T, D), hidden states, attentions.
    switch: an Intervention to apply (see the module's docstring); means (L, H, Dh) for mean ablation."""
    ids = np.asarray(ids)
    keep = np.ones(len(ids), bool) if keep is None else np.asarray(keep, bool)
    seen = attention_keep(keep, cfg.attention == "causal")
    x = embed(p, cfg, ids, prefix, types, switch)
    hidden, attentions = [x], []
    for i in range(cfg.n_layers):
        x, w = block(x, p, f"{prefix}transformer.layer.{i}", cfg, seen, switch, i, means)
        hidden.append(x)
        attentions.append(w)
    if cfg.norm == "pre":
        x = layer_norm(x, p[prefix + "final_layer_norm.weight"], p[prefix + "final_layer_norm.bias"],
                       cfg.layer_norm_eps)
    return x, hidden, attentions


# Twin of core.encoder.pooling.pool,
#   pinned by tests/core/encoder/test_clm_and_attention_pooling.py::test_attention_pooling_equals_numpy:
#   one sequence, no padding mask arithmetic: the formula as the walkthrough shows it.
def pool(hidden, keep, method, query=None):
    """One vector for the sentence: the first token's ("cls"), the average ("mean"), the
    per-dimension largest ("max") or the query-weighted average ("attention") over the real
    tokens (keep True)."""
    if method == "cls":
        return hidden[0]
    if method == "mean":
        return hidden[keep].mean(axis=0)
    if method == "max":
        return hidden[keep].max(axis=0)
    if method == "attention":
        return attention_pool_weights(hidden[keep], query) @ hidden[keep]
    raise ValueError(f"pooling must be cls, mean, max or attention, not {method!r}")


def attention_pool_weights(hidden, query):
    """Attention pooling's weight of each token: softmax_t(q · h_t / √D).  (T, D), (D,) -> (T,)."""
    return softmax(hidden @ query / math.sqrt(hidden.shape[-1]))


def l2_normalize(v):
    """Scale to length 1, so that a dot product of two vectors is their cosine."""
    return v / max(np.linalg.norm(v), 1e-12)


def mean_pool(hidden, keep):
    """Average the vectors of real tokens only, then scale to length 1."""
    return l2_normalize(pool(hidden, keep, "mean"))
