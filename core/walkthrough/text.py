"""The words beside each walkthrough step: title, formula, plain description and shapes.

Kept apart from the maths (core/walkthrough/steps.py) so the app, the CLI and the exported notebook
all say the same thing. Shapes use the real sizes of the loaded model and sentence.
"""
from __future__ import annotations

POOLING_WORDS = {
    "mean": ("the average of all token vectors", "s = (1/T) Σₜ hₜ"),
    "cls": ("the vector of the first token, [CLS]", "s = h₀"),
    "max": ("the largest value of each dimension over the tokens", "sⱼ = maxₜ hₜⱼ"),
    "attention": ("the average of the token vectors weighted by a learned query q",
                  "s = Σₜ wₜ hₜ,  w = softmax(q·hₜ / √D)"),
}


def masked_scores_entry(cfg, T: int, h: int) -> tuple:
    """The masked-scores step: padding only, or (causal models) the triangle above the diagonal."""
    if cfg.attention == "causal":
        return (f"Masked scores (causal), head {h}",
                "S′ᵢⱼ = Sᵢⱼ if j ≤ i (and token j is real), −∞ if j > i",
                ("This model is causal: token i may attend only to itself and the tokens before it, "
                 "so every score above the diagonal (a later token j > i) is pushed to minus infinity "
                 "and gets weight 0 after softmax. That is what lets it be trained to predict the next "
                 "token without seeing it; the price is that early tokens see little of the sentence."),
                f"{T} × {T} → {T} × {T}, {T * (T - 1) // 2} of {T * T} scores masked")
    return (f"Masked scores, head {h}", "S′ᵢⱼ = Sᵢⱼ if token j is real, −∞ if it is padding",
            ("Padding tokens must get no attention, so their scores are pushed to minus infinity. "
             "A single sentence has no padding, so nothing changes here; in a batch it would."),
            f"{T} × {T} → {T} × {T}")


def cut_scores_entry(T: int, h: int, cuts: list[str]) -> dict:
    """The masked-scores step when attention edges are cut there (``cuts`` described, e.g. "2.3:sat(3)>cat(2)")."""
    n = len(cuts)
    return {"title": f"Masked scores, head {h}: {n} edge{'s' if n != 1 else ''} cut",
            "formula": "S′ᵢⱼ = −∞ for each cut edge (query i → key j), S′ᵢⱼ = Sᵢⱼ for every other pair",
            "description": (f"Cut here: {', '.join(cuts)}. A cut stops query i reading key j: its score is "
                            "pushed to minus infinity, so softmax gives that key weight 0 and the query's "
                            "other weights share what it had. Every other score is unchanged."),
            "shape_text": f"{T} × {T} → {T} × {T}, {n} of {T * T} scores cut"}


def describe(name: str, cfg, T: int, layer: int, head: int, pooling: str) -> dict:
    """-> {"title", "formula", "description", "shape_text"} for one step (layer, head 0-based)."""
    D, H, F = cfg.dim, cfg.n_heads, cfg.hidden_dim
    dh = D // H
    L, h = layer + 1, head + 1
    pre = cfg.norm == "pre"
    x_in = "LN₁(X)" if pre else "X"                  # what the attention reads
    td = f"{T} × {D}"
    gelu = ("GELU(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))" if cfg.activation == "gelu_tanh"
            else "GELU(x) = x·Φ(x) = 0.5·x·(1 + erf(x/√2))")
    ln_formula = "LN(x) = γ ⊙ (x − mean(x)) / √(var(x) + ε) + β, per token"
    ln_desc = ("Each token's vector is shifted to mean 0 and scaled to variance 1 (its mean and "
               "variance are shown), then multiplied by the learned γ and shifted by β. This keeps "
               "the numbers in a steady range from layer to layer.")
    def layer_norm_entry(n, pre_where, post_where, pre_applied, post_applied, pre_note, post_note):
        """A block's LayerNorm n: where it sits and what it reads depend on pre/post-norm."""
        return (f"LayerNorm {n}, layer {L} " + (pre_where if pre else post_where),
                (pre_applied if pre else post_applied) + "   with   " + ln_formula,
                ln_desc + (pre_note if pre else post_note), f"{td} → {td}")

    proj = {"q": ("Queries Q", "what each token is looking for"),
            "k": ("Keys K", "what each token offers to be found by"),
            "v": ("Values V", "what each token passes on when it is attended to")}
    table = {
        "token_embeddings": (
            "Token embeddings", "E[id] for each token id",
            ("Each token id picks its row of the learned embedding table: a vector of "
            f"{D} numbers that stands for the token before it has seen any context."),
            f"{T} ids → rows of the ({cfg.vocab_size} × {D}) table → {td}"),
        "position_embeddings": (
            "Position embeddings",
            ("PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D))"
             if cfg.positions == "sinusoidal" else "P[p] for positions p = 0 … T−1"),
            ("Attention itself ignores word order, so each position adds its own vector: here "
             + ("fixed sine and cosine waves of different wavelengths." if cfg.positions == "sinusoidal"
                else "a learned row of the position table, one per position.")),
            (f"sin/cos of positions 0 … {T - 1} → {td}" if cfg.positions == "sinusoidal"
             else f"rows 0 … {T - 1} of the ({cfg.max_position_embeddings} × {D}) table → {td}")),
        "token_type_embeddings": (
            "Token-type (segment) embeddings", "S[type] for each token's segment (0 or 1)",
            ("BERT models add one more learned vector saying which sentence of a pair a token "
            "belongs to: type 0 for the first, 1 for the second."),
            f"{T} type ids → rows of the ({cfg.type_vocab_size} × {D}) table → {td}"),
        "embeddings_sum": (
            "Sum of the embeddings",
            "x = E[id] + P[p]" + (" + S[type]" if cfg.type_vocab_size else ""),
            ("The token's meaning and its position (and segment) are simply added: one vector "
            "per token that carries both."),
            f"{td} + {td}" + (f" + {td}" if cfg.type_vocab_size else "") + f" → {td}"),
        "embeddings_layernorm": (
            "Embedding LayerNorm", ln_formula, ln_desc, f"{td} → {td}, normalised row by row"),
        "layer_input": (
            f"Input of layer {L}", "X = output of " + ("the embeddings" if layer == 0 else f"layer {L - 1}"),
            "The token vectors as they enter this layer; every layer reads the previous one's output.",
            td),
        "layernorm_1": layer_norm_entry(
            1, "(before attention)", "(after attention)", "LN₁(X)", "LN₁(X + Attention(X))",
            " In a pre-norm model this happens before attention reads the vectors.",
            " Here it normalises the first residual sum."),
        "scores": (
            f"Attention scores, head {h}", "S = Q·Kᵀ / √Dh",
            ("Every query is compared with every key by a dot product: a high score means token i "
            f"finds what it looks for in token j. Dividing by √{dh} keeps the scores from growing "
            "with the head size."),
            f"({T} × {dh}) @ ({dh} × {T}) / √{dh} → {T} × {T}"),
        "masked_scores": masked_scores_entry(cfg, T, h),
        "weights": (
            f"Attention weights, head {h}", "A = softmax(S′) row by row: Aᵢⱼ = exp(S′ᵢⱼ) / Σₖ exp(S′ᵢₖ)",
            ("Softmax turns each row of scores into weights that are positive and sum to 1: how "
            "much token i takes from each token j."),
            f"softmax over each row of {T} × {T} → {T} × {T}"),
        "head_output": (
            f"Output of head {h}", "Oₕ = A·V",
            ("Each token's new vector is the weighted average of the value vectors, with the "
            "attention weights of its row."),
            f"({T} × {T}) @ ({T} × {dh}) → {T} × {dh}"),
        "heads_concat": (
            "All heads side by side", "concat(O₁, …, O_H)",
            (f"The {H} heads work in parallel, each on its own {dh} columns; their outputs are "
            f"put side by side again to make {D} numbers per token."),
            f"{H} heads × ({T} × {dh}) → {td}"),
        "attention_output": (
            f"Attention output, layer {L}", "Attention(X) = concat(O₁, …, O_H)·W_O + b_O",
            "One more learned matrix mixes what the heads found into a single update per token.",
            f"({td}) @ ({D} × {D}) → {td}"),
        "residual_1": (
            "Residual connection 1", "X + Attention(" + x_in + ")",
            ("The update is added to the layer's input instead of replacing it, so information "
            "and gradients can pass straight through the layer."),
            f"{td} + {td} → {td}"),
        "layernorm_2": layer_norm_entry(
            2, "(before the FFN)", "= the layer's output", "LN₂(R₁)", "LN₂(Y + FFN(Y)), Y = LN₁ output",
            " In a pre-norm model this prepares the input of the feed-forward network.",
            " Its result is this layer's output, the next layer's input."),
        "ffn_hidden": (
            "Feed-forward: first linear map", "H = Y·W₁ + b₁",
            (f"Each token on its own is expanded from {D} to {F} numbers by a learned matrix: "
            "the feed-forward network works token by token."),
            f"({td}) @ ({D} × {F}) → {T} × {F}"),
        "ffn_activation": (
            "Feed-forward: GELU", gelu,
            ("A smooth non-linearity: negative values are mostly switched off, positive ones pass. "
            "Without it, the two linear maps would collapse into one."),
            f"{T} × {F} → {T} × {F}, number by number"),
        "ffn_output": (
            "Feed-forward: second linear map", "FFN(Y) = GELU(H)·W₂ + b₂",
            f"Back from {F} to {D} numbers per token: the feed-forward network's update.",
            f"({T} × {F}) @ ({F} × {D}) → {td}"),
        "residual_2": (
            "Residual connection 2" + (f" = the output of layer {L}" if pre else ""),
            ("R₁ + FFN(LN₂(R₁))" if pre else "Y + FFN(Y), Y = LN₁ output"),
            "The feed-forward update is added to what went into it, as with attention.",
            f"{td} + {td} → {td}"),
        "final_layernorm": (
            "Final LayerNorm (after the last layer)", ln_formula,
            ln_desc + " Pre-norm models leave the residual sum unnormalised, so one last "
            "LayerNorm runs after the last layer.",
            f"{td} → {td}"),
        "pooled": (
            f"Sentence vector ({pooling} pooling)", POOLING_WORDS[pooling][1],
            f"One vector for the whole sentence: {POOLING_WORDS[pooling][0]} of the last layer.",
            {"mean": f"average of the {T} rows of {td} → {D}", "cls": f"row 0 of {td} → {D}",
             "max": f"largest of each column of {td} → {D}",
             "attention": f"{T} weights from ({td}) @ q ({D}), then weights @ ({td}) → {D}"}[pooling]),
        "normalized": (
            "Unit vector", "u = s / ‖s‖",
            ("Scaled to length 1, so the dot product of two sentence vectors is their cosine "
            "similarity: what search ranks by."),
            f"{D} → {D}, length 1"),
    }
    if name in proj:
        title, what = proj[name]
        letter = name.upper()
        return {"title": f"{title}, head {h}",
                "formula": f"{letter} = {x_in}·W_{letter} + b_{letter}, columns {head * dh} … {(head + 1) * dh - 1} "
                           f"(head {h})",
                "description": f"A learned matrix turns each token's vector into its {title.split()[0].lower()}: "
                               f"{what}. Head {h} uses its own {dh} of the {D} columns.",
                "shape_text": f"({T} tokens × {D}) @ ({D} × {dh}) → {T} × {dh}"}
    title, formula, description, shape = table[name]
    return {"title": title, "formula": formula, "description": description, "shape_text": shape}
