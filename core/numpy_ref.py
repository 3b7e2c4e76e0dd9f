"""The encoder once more, in NumPy: explicit matrices, one function per step.

This is the teaching version (the seed notebooks' style) and a second reference for the torch
encoder: ``forward(params, cfg, input_ids, attention_mask)`` equals ``Encoder`` to 1e-5.
``params`` is the torch model's state_dict as NumPy arrays (``params_from_torch``).
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


def layer_norm(x, gamma, beta, eps):
    """Normalise each token vector to mean 0, variance 1, then scale and shift."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
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


def embed(p, cfg, ids, prefix=""):
    """Token embedding + position (+ token type 0) -> LayerNorm.  ids (T,) -> (T, D)."""
    T = len(ids)
    x = p[prefix + "embeddings.word_embeddings.weight"][ids]
    if cfg.positions == "sinusoidal":
        x = x + sinusoidal_positions(T, cfg.dim)
    else:
        x = x + p[prefix + "embeddings.position_embeddings.weight"][:T]
    if cfg.type_vocab_size:
        x = x + p[prefix + "embeddings.token_type_embeddings.weight"][0]
    return layer_norm(x, p[prefix + "embeddings.LayerNorm.weight"], p[prefix + "embeddings.LayerNorm.bias"],
                      cfg.layer_norm_eps)


def self_attention(x, p, name, n_heads, keep):
    """Multi-head self-attention for one sequence.  x (T, D), keep (T,) bool -> (T, D), (H, T, T)."""
    T, D = x.shape
    dh = D // n_heads
    q = linear(x, p, name + ".q_lin").reshape(T, n_heads, dh).transpose(1, 0, 2)   # (H, T, dh)
    k = linear(x, p, name + ".k_lin").reshape(T, n_heads, dh).transpose(1, 0, 2)
    v = linear(x, p, name + ".v_lin").reshape(T, n_heads, dh).transpose(1, 0, 2)
    scores = q @ k.transpose(0, 2, 1) / math.sqrt(dh)                              # (H, T, T)
    scores = np.where(keep[None, None, :], scores, -1e30)                          # padding keys get 0 weight
    weights = softmax(scores)
    context = (weights @ v).transpose(1, 0, 2).reshape(T, D)                       # merge heads
    return linear(context, p, name + ".out_lin"), weights


def feed_forward(x, p, name, approximate):
    return linear(gelu(linear(x, p, name + ".lin1"), approximate), p, name + ".lin2")


def block(x, p, name, cfg, keep):
    ln1 = (p[name + ".sa_layer_norm.weight"], p[name + ".sa_layer_norm.bias"], cfg.layer_norm_eps)
    ln2 = (p[name + ".output_layer_norm.weight"], p[name + ".output_layer_norm.bias"], cfg.layer_norm_eps)
    approx = cfg.activation == "gelu_tanh"
    if cfg.norm == "pre":
        a, w = self_attention(layer_norm(x, *ln1), p, name + ".attention", cfg.n_heads, keep)
        x = x + a
        x = x + feed_forward(layer_norm(x, *ln2), p, name + ".ffn", approx)
    else:
        a, w = self_attention(x, p, name + ".attention", cfg.n_heads, keep)
        x = layer_norm(x + a, *ln1)
        x = layer_norm(x + feed_forward(x, p, name + ".ffn", approx), *ln2)
    return x, w


def forward(p, cfg, ids, keep=None, prefix=""):
    """One sequence through the whole encoder.  -> last hidden (T, D), hidden states, attentions."""
    ids = np.asarray(ids)
    keep = np.ones(len(ids), bool) if keep is None else np.asarray(keep, bool)
    x = embed(p, cfg, ids, prefix)
    hidden, attentions = [x], []
    for i in range(cfg.n_layers):
        x, w = block(x, p, f"{prefix}transformer.layer.{i}", cfg, keep)
        hidden.append(x)
        attentions.append(w)
    if cfg.norm == "pre":
        x = layer_norm(x, p[prefix + "final_layer_norm.weight"], p[prefix + "final_layer_norm.bias"],
                       cfg.layer_norm_eps)
    return x, hidden, attentions


def mean_pool(hidden, keep):
    """Average the vectors of real tokens only, then scale to length 1."""
    v = hidden[keep].mean(axis=0)
    return v / np.linalg.norm(v)
