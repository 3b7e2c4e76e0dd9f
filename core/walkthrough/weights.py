"""The learned tensors each walkthrough step multiplies by, and the step its input comes from.

    step_input("q", "post")                        # -> "layer_input": X is the layer's input
    step_weights(params, "q", layer=1, head=2, n_heads=12)
        # -> [Weight("W_Q", "...q_lin.weight", (384, 32) array), Weight("b_Q", ...)]

Weights are written as the formulas read them, X·W + b: a torch Linear keeps its weight as
(out, in), so W here is its transpose (in × out), and for Q, K, V only the chosen head's Dh
columns. ``params`` is the encoder's state_dict as NumPy arrays (the same float64 copy the
walkthrough computes with), so the numbers are the model's own tensors.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# step -> (module path under the layer, or a full path with {layer} absent, symbols of W and b)
LINEAR = {"q": ("attention.q_lin", "W_Q", "b_Q"), "k": ("attention.k_lin", "W_K", "b_K"),
          "v": ("attention.v_lin", "W_V", "b_V"), "attention_output": ("attention.out_lin", "W_O", "b_O"),
          "ffn_hidden": ("ffn.lin1", "W₁", "b₁"), "ffn_output": ("ffn.lin2", "W₂", "b₂")}
NORMS = {"embeddings_layernorm": ("embeddings.LayerNorm", "γ", "β"),
         "layernorm_1": ("{layer}.sa_layer_norm", "γ₁", "β₁"),
         "layernorm_2": ("{layer}.output_layer_norm", "γ₂", "β₂"),
         "final_layernorm": ("final_layer_norm", "γ", "β")}


@dataclass
class Weight:
    symbol: str           # as the formula writes it, e.g. "W_Q"
    key: str              # the state_dict entry it is (a slice of), e.g. "transformer.layer.1.attention.q_lin.weight"
    values: np.ndarray    # the numbers: (in × out) for a W, a vector for a bias, γ or β
    note: str = ""        # how it was taken from the tensor, e.g. "columns 64 … 95 of the transposed weight"


def step_input(step: str, norm: str, last_layer: bool = False) -> str | None:
    """The walkthrough step whose output this step reads (None: token ids, or a layer that is
    not shown). ``last_layer``: the walk shows the last layer, whose output the final LN reads."""
    pre = norm == "pre"
    table = {"q": "layernorm_1" if pre else "layer_input", "attention_output": "heads_concat",
             "ffn_hidden": "layernorm_2" if pre else "layernorm_1", "ffn_output": "ffn_activation",
             "embeddings_layernorm": "embeddings_sum",
             "layernorm_1": "layer_input" if pre else "residual_1",
             "layernorm_2": "residual_1" if pre else "residual_2",
             "final_layernorm": "residual_2" if last_layer else None}
    table["k"] = table["v"] = table["q"]
    return table.get(step)


def has_weights(step: str) -> bool:
    return step in LINEAR or step in NORMS


def step_weights(params: dict, step: str, layer: int, head: int, n_heads: int) -> list[Weight]:
    """The step's learned tensors (empty for a step without any); layer and head 0-based."""
    prefix = f"transformer.layer.{layer}"
    if step in LINEAR:
        module, w_sym, b_sym = LINEAR[step]
        key = f"{prefix}.{module}"
        weight, bias = params[key + ".weight"], params[key + ".bias"]
        if step in ("q", "k", "v"):
            dh = weight.shape[0] // n_heads
            lo, hi = head * dh, (head + 1) * dh
            note = f"columns {lo} … {hi - 1} (head {head + 1})"
            return [Weight(w_sym, key + ".weight", np.array(weight[lo:hi].T), note + " of the transposed weight"),
                    Weight(b_sym, key + ".bias", np.array(bias[lo:hi]), note)]
        return [Weight(w_sym, key + ".weight", np.array(weight.T), "the transposed weight (in × out)"),
                Weight(b_sym, key + ".bias", np.array(bias))]
    if step in NORMS:
        module, g_sym, b_sym = NORMS[step]
        key = module.format(layer=prefix)
        return [Weight(g_sym, key + ".weight", np.array(params[key + ".weight"]), "scale per dimension"),
                Weight(b_sym, key + ".bias", np.array(params[key + ".bias"]), "shift per dimension")]
    return []
