"""The loaded model as a block diagram: which blocks, which arrows, what shape flows on each.

    arch = architecture(cfg, T=11, layer=1, head=2)      # layer and head 0-based
    arch.blocks      # Block(step="q", label="Q", ...): one per walkthrough step, on a grid
    arch.edges       # Edge("layer_input", "q", "11 × 384"): what flows, with the real sizes
    arch.layer_rows  # the rows inside the repeated layer frame

Drawn from the model's config alone, so it holds for every model the walkthrough explains:
post-norm (LN after each residual add, as BERT) and pre-norm (LN before each sublayer, inside
the residual branch, and one final LN) differ here as they do in core/encoder/model.py; the segment
embedding appears only when the model has token types. Every block is one walkthrough step
(core/walkthrough/steps.py names), so clicking a block can show its step. The app draws it
(app/gui/panels/walkthrough/architecture_map.py); nothing here knows Qt.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MAIN, RESIDUAL = "main", "residual"     # an edge on the main path, or the skip around a sublayer


@dataclass(frozen=True)
class Block:
    step: str           # the walkthrough step this block is (core/walkthrough/steps.py name)
    label: str          # short text in the box, e.g. "Q = X·W_Q + b_Q"
    kind: str           # "embedding", "norm", "attention", "ffn", "add", "output", "patch"
    col: float          # grid column (0 … 2; the main path runs down column 1)
    row: int            # grid row, top to bottom
    tip: str = ""       # one sentence: what the block does


@dataclass(frozen=True)
class Edge:
    source: str         # step name the arrow leaves
    target: str         # step name it enters
    shape: str          # the tensor on the arrow with the real sizes, e.g. "11 × 384"
    kind: str = MAIN    # MAIN, or RESIDUAL for the skip connection around a sublayer


@dataclass
class Architecture:
    norm: str                       # "post" or "pre"
    n_layers: int                   # L
    layer: int                      # the layer the walkthrough shows (0-based)
    head: int                       # the head it shows (0-based)
    sizes: dict                     # T, D, H, Dh, F: the numbers the shapes are written with
    blocks: list = field(default_factory=list)   # Block, top to bottom
    edges: list = field(default_factory=list)    # Edge
    layer_rows: tuple = (0, 0)      # first and last grid row inside the repeated layer frame
    repeat_text: str = ""           # "Layers 1 … 6 repeat this block, each with its own weights"
    switched_off: dict = field(default_factory=dict)    # step -> what an intervention does to it
    layers_switched: frozenset = frozenset()            # layers (0-based) an intervention touches

    def block(self, step: str) -> Block:
        for b in self.blocks:
            if b.step == step:
                return b
        raise KeyError(f"no block for step {step!r}")

    @property
    def steps(self) -> list[str]:
        return [b.step for b in self.blocks]


def architecture(cfg, T: int, layer: int = 0, head: int = 0, intervention=None) -> Architecture:
    """The block diagram of a model with config ``cfg`` on a sentence of ``T`` tokens; with an
    ``intervention``, the blocks it switches off or changes are named (``switched_off``)."""
    D, H, F = cfg.dim, cfg.n_heads, cfg.hidden_dim
    Dh = D // H
    pre = cfg.norm == "pre"
    td, tdh, tt, tf = f"{T} × {D}", f"{T} × {Dh}", f"{T} × {T}", f"{T} × {F}"
    L, h = layer + 1, head + 1
    arch = Architecture(norm=cfg.norm, n_layers=cfg.n_layers, layer=layer, head=head,
                        sizes={"T": T, "D": D, "H": H, "Dh": Dh, "F": F})
    rows = _Rows()

    def add(step, label, kind, col=1.0, tip="", same_row=False):
        arch.blocks.append(Block(step, label, kind, col, rows.now if same_row else rows.next(), tip))

    def edge(source, target, shape, kind=MAIN):
        arch.edges.append(Edge(source, target, shape, kind))

    # ---- embeddings: two or three lookups side by side, their sum, a LayerNorm
    types = bool(cfg.type_vocab_size)
    cols = (0.0, 1.0, 2.0) if types else (0.5, 1.5)
    add("token_embeddings", "token  E[id]", "embedding", cols[0], "each token id's row of the embedding table")
    add("position_embeddings", "position  " + ("sin/cos" if cfg.positions == "sinusoidal" else "P[p]"),
        "embedding", cols[1], "one vector per position p = 0 … T−1", same_row=True)
    lookups = ["token_embeddings", "position_embeddings"]
    if types:
        add("token_type_embeddings", "segment  S[type]", "embedding", cols[2],
            "which sentence of a pair the token belongs to", same_row=True)
        lookups.append("token_type_embeddings")
    add("embeddings_sum", "+  sum", "add", tip="token + position" + (" + segment" if types else ""))
    for name in lookups:
        edge(name, "embeddings_sum", td)
    add("embeddings_layernorm", "LayerNorm  γ, β", "norm", tip="each token to mean 0, variance 1, then γ, β")
    edge("embeddings_sum", "embeddings_layernorm", td)

    # ---- one layer: the frame that repeats L times
    add("layer_input", f"X  (input of layer {L})", "add", tip="what the layer reads: the previous one's output")
    edge("embeddings_layernorm", "layer_input", td)
    first = rows.now
    attention_in = "layer_input"
    if pre:
        add("layernorm_1", "LayerNorm₁  γ, β", "norm", tip="pre-norm: LN before attention, inside the residual branch")
        edge("layer_input", "layernorm_1", td)
        attention_in = "layernorm_1"
    for col, name, label in ((0.0, "q", "Q = X·W_Q + b_Q"), (1.0, "k", "K = X·W_K + b_K"),
                             (2.0, "v", "V = X·W_V + b_V")):
        add(name, label, "attention", col, f"head {h}: {Dh} of the {D} columns", same_row=name != "q")
        edge(attention_in, name, td)
    add("scores", f"scores  Q·Kᵀ/√{Dh}", "attention", 0.5, "every query against every key")
    edge("q", "scores", tdh)
    edge("k", "scores", tdh)
    add("masked_scores", "mask  (padding → −∞)", "attention", 0.5, "padding keys get no attention")
    edge("scores", "masked_scores", tt)
    add("weights", "softmax  (rows sum to 1)", "attention", 0.5, "scores become weights")
    edge("masked_scores", "weights", tt)
    add("head_output", "weighted sum  A·V", "attention", 1.5, f"head {h}'s output")
    edge("weights", "head_output", tt)
    edge("v", "head_output", tdh)
    patched = _patched_kinds(intervention, layer)
    into_concat = "head_output"
    if "head" in patched:
        add("patched_head", "patched from B", "patch", 1.5, "sentence B's numbers replace A's here")
        edge("head_output", "patched_head", tdh)
        into_concat = "patched_head"
    add("heads_concat", f"{H} heads side by side", "attention", tip=f"{H} × ({tdh}) → {td}")
    edge(into_concat, "heads_concat", f"{H} × {tdh}")
    add("attention_output", "output  ·W_O + b_O", "attention", tip="mixes what the heads found")
    edge("heads_concat", "attention_output", td)
    add("residual_1", "+  add  (residual)", "add", tip="the update is added to the layer's input")
    edge("attention_output", "residual_1", td)
    edge("layer_input", "residual_1", td, RESIDUAL)
    if pre:
        add("layernorm_2", "LayerNorm₂  γ, β", "norm", tip="pre-norm: LN before the FFN, inside the residual branch")
        edge("residual_1", "layernorm_2", td)
        ffn_in, skip_from = "layernorm_2", "residual_1"
    else:
        add("layernorm_1", "LayerNorm₁  γ, β", "norm", tip="post-norm: LN after the add")
        edge("residual_1", "layernorm_1", td)
        ffn_in, skip_from = "layernorm_1", "layernorm_1"
    add("ffn_hidden", "FFN  ·W₁ + b₁", "ffn", tip=f"{D} → {F} per token")
    edge(ffn_in, "ffn_hidden", td)
    add("ffn_activation", "GELU", "ffn", tip="the non-linearity")
    edge("ffn_hidden", "ffn_activation", tf)
    add("ffn_output", "FFN  ·W₂ + b₂", "ffn", tip=f"{F} → {D} per token")
    edge("ffn_activation", "ffn_output", tf)
    into_add = "ffn_output"
    if "ffn" in patched:
        add("patched_ffn", "patched from B", "patch", tip="sentence B's numbers replace A's here")
        edge("ffn_output", "patched_ffn", td)
        into_add = "patched_ffn"
    add("residual_2", "+  add  (residual)" + ("  = layer output" if pre else ""), "add",
        tip="the FFN's update added to what went into it")
    edge(into_add, "residual_2", td)
    edge(skip_from, "residual_2", td, RESIDUAL)
    layer_out = "residual_2"
    if not pre:
        add("layernorm_2", "LayerNorm₂  = layer output", "norm", tip="post-norm: LN after the add")
        edge("residual_2", "layernorm_2", td)
        layer_out = "layernorm_2"
    if "resid" in patched:
        add("patched_resid", "patched from B", "patch", tip="sentence B's numbers replace A's here")
        edge(layer_out, "patched_resid", td)
        layer_out = "patched_resid"
    arch.layer_rows = (first, rows.now)
    arch.repeat_text = (f"× {cfg.n_layers}: layers 1 … {cfg.n_layers} repeat this block, each with its own "
                        f"weights (shown: layer {L})" if cfg.n_layers > 1 else "one layer")

    # ---- after the last layer
    last = layer_out
    if pre:
        add("final_layernorm", "final LayerNorm", "norm", tip="pre-norm models normalise once after the last layer")
        edge(layer_out, "final_layernorm", td)
        last = "final_layernorm"
    add("pooled", "pooling", "output", tip="one vector for the sentence")
    edge(last, "pooled", td)
    add("normalized", "unit vector  s/‖s‖", "output", tip="length 1: dot product = cosine")
    edge("pooled", "normalized", f"{D}")
    if intervention is not None:
        arch.switched_off = {step: why for step, why in switched_off(intervention, layer, head, pre).items()
                             if step in arch.steps}
        arch.layers_switched = layers_switched(intervention)
    return arch


def switched_off(spec, layer: int, head: int, pre_norm: bool = False) -> dict[str, str]:
    """The steps of the drawn layer (and the embeddings) that ``spec`` switches off or changes,
    each with a few words for the map's tooltip. Layer and head 0-based."""
    off: dict[str, str] = {}
    if spec.positions == "off":
        off["position_embeddings"] = "positions off: this lookup adds zeros"
    elif spec.positions == "shuffle":
        off["position_embeddings"] = f"positions shuffled (seed {spec.shuffle_seed})"
    if spec.no_scale or spec.temperature != 1.0:
        off["scores"] = " and ".join(filter(None, ["no 1/√d_k scaling" if spec.no_scale else "",
                                                   f"temperature {spec.temperature:g}"
                                                   if spec.temperature != 1.0 else ""]))
    cut = sorted(c.describe() for c in spec.cuts if c.layer == layer and c.head in (None, head))
    if cut:
        off["masked_scores"] = f"edge{'s' if len(cut) > 1 else ''} cut: {', '.join(cut)} (score −∞)"
    mode = "zeroed" if spec.head_mode == "zero" else "mean-ablated"
    heads = sorted(h for l, h in spec.heads if l == layer)
    if head in heads:
        off["head_output"] = f"head {layer + 1}.{head + 1} {mode}"
    if heads:
        off["heads_concat"] = f"head{'s' if len(heads) > 1 else ''} {', '.join(str(h + 1) for h in heads)} {mode}"
    if layer in spec.attention_off:
        off["attention_output"] = f"attention of layer {layer + 1} off: the residual adds 0"
    if layer in spec.ffn_off:
        for step in ("ffn_hidden", "ffn_activation", "ffn_output"):
            off[step] = f"FFN of layer {layer + 1} off: the residual adds 0"
    if layer in spec.skip:
        out = "residual_2" if pre_norm else "layernorm_2"
        off[out] = f"layer {layer + 1} skipped: its input is passed on unchanged"
    for kind, step in (("head", "patched_head"), ("ffn", "patched_ffn"), ("resid", "patched_resid")):
        sites = [s.describe() for s in spec.patch if s.layer == layer and s.kind == kind]
        if sites:
            off[step] = f"patched from sentence B ({', '.join(sites)})"
    return off


def _patched_kinds(spec, layer: int) -> set:
    """The kinds of patch site (head, ffn, resid) ``spec`` has in ``layer``: each is a block."""
    return set() if spec is None else {s.kind for s in spec.patch if s.layer == layer}


def layers_switched(spec) -> frozenset:
    """Every layer (0-based) in which ``spec`` changes something."""
    layers = ({l for l, _ in spec.heads} | spec.attention_off | spec.ffn_off | spec.skip
              | {s.layer for s in spec.patch} | {c.layer for c in spec.cuts})
    return frozenset(layers)


class _Rows:
    """A row counter: next() moves down one row, now is the current one."""

    def __init__(self):
        self.now = -1

    def next(self) -> int:
        self.now += 1
        return self.now
