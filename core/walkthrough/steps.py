"""Every moving part of the encoder on one sentence, each step checked against the model.

``explain(backend, text)`` runs the text through the NumPy steps of core/walkthrough/numpy_ref.py (the
teaching code: explicit matrices, one small function per step) and returns each intermediate
by a stable name, for one chosen layer and head (the other layers run too, so the chosen
layer sees the real input and the sentence vector is the real one). Beside every step sits
``max_abs_diff``: the largest |difference| to the torch encoder's own intermediate for the
same input, captured from the real forward pass (core/walkthrough/capture.py). With fp32
weights every difference is below 1e-5: the numbers shown are the model's.

Step names, post-norm (BERT, DistilBERT, minilm):
  token_embeddings, position_embeddings, token_type_embeddings (BERT layouts only),
  embeddings_sum, embeddings_layernorm, then for the chosen layer: layer_input, q, k, v,
  scores, masked_scores, weights, head_output, heads_concat, attention_output, residual_1,
  layernorm_1, ffn_hidden, ffn_activation, ffn_output, residual_2, layernorm_2 (= the layer's
  output), then pooled and normalized.
Pre-norm (x + f(LN(x))): the same embeddings steps, then layer_input, layernorm_1 (input of
  attention), q ... attention_output, residual_1 (= layer_input + attention_output),
  layernorm_2 (input of the FFN), ffn_hidden, ffn_activation, ffn_output, residual_2
  (= residual_1 + ffn_output, the layer's output), final_layernorm (after the last layer),
  pooled, normalized.
Patched from sentence B (core/walkthrough/patched.py): patched_head, patched_ffn and patched_resid,
  each right after A's own value of that site (only where the drawn layer has such a patch).
A causal model (``attention="causal"``) masks the scores above the diagonal: masked_scores shows
them as -inf (the model adds the most negative float, which softmax turns into the same 0).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from core.errors import InputError
from core.walkthrough import numpy_ref as nr

POST_ORDER = ("token_embeddings", "position_embeddings", "token_type_embeddings", "embeddings_sum",
              "embeddings_layernorm", "layer_input", "q", "k", "v", "scores", "masked_scores", "weights",
              "head_output", "heads_concat", "attention_output", "residual_1", "layernorm_1", "ffn_hidden",
              "ffn_activation", "ffn_output", "residual_2", "layernorm_2", "pooled", "normalized")
PRE_ORDER = ("token_embeddings", "position_embeddings", "token_type_embeddings", "embeddings_sum",
             "embeddings_layernorm", "layer_input", "layernorm_1", "q", "k", "v", "scores", "masked_scores",
             "weights", "head_output", "heads_concat", "attention_output", "residual_1", "layernorm_2",
             "ffn_hidden", "ffn_activation", "ffn_output", "residual_2", "final_layernorm", "pooled",
             "normalized")
TOKEN_BY_TOKEN = ("scores", "masked_scores", "weights")     # steps whose columns are tokens too
TOLERANCE = 1e-5                 # a step "equals the model's" when max |Δ| is at most this
LAYER_NORMS = ("embeddings_layernorm", "layernorm_1", "layernorm_2", "final_layernorm")


@dataclass
class Step:
    name: str                       # stable name, e.g. "q"
    title: str                      # for people, e.g. "Queries Q, head 3"
    values: np.ndarray              # the step's numbers (T×… mostly; 1-D for pooled/normalized)
    formula: str                    # e.g. "Q = X·W_Q + b_Q (columns of head h)"
    description: str                # one or two plain sentences: what the step does and why
    shape_text: str                 # e.g. "(16 tokens × 384) @ (384 × 32) → 16 × 32"
    row_labels: list                # usually the tokens
    col_labels: list | None         # the tokens again for token × token steps, else None
    max_abs_diff: float | None      # largest |NumPy − torch encoder| (both float64, same weights)
    extra: dict = field(default_factory=dict)   # e.g. {"mean": (T,), "var": (T,)} for LayerNorms
    fp32_max_abs_diff: float | None = None      # largest |NumPy − the fp32 forward pass embed runs|
    scale: float = 0.0                          # largest |value|: fp32 rounds at ~1e-7 of it
    weights: list = field(default_factory=list, repr=False)   # core.walkthrough.weights.Weight it multiplies by
    input_step: str | None = None               # the step whose output this one reads (weights steps)

    @property
    def fp32_rel_diff(self) -> float | None:
        """fp32 difference relative to the step's largest value (fp32 rounding: ~1e-7)."""
        if self.fp32_max_abs_diff is None:
            return None
        return self.fp32_max_abs_diff / max(self.scale, 1e-30)

    def to_dict(self) -> dict:
        """JSON has no infinity: a masked (-inf) score is written as null."""
        return {"name": self.name, "title": self.title, "shape": list(self.values.shape),
                "shape_text": self.shape_text, "formula": self.formula, "description": self.description,
                "max_abs_diff": self.max_abs_diff, "fp32_max_abs_diff": self.fp32_max_abs_diff,
                "fp32_rel_diff": self.fp32_rel_diff, "values": _rounded(self.values),
                "extra": {k: _rounded(v) if isinstance(v, np.ndarray) else v for k, v in self.extra.items()}}


@dataclass
class Walkthrough:
    model: str                      # the model's name as the user chose it
    tokens: list                    # tokens as the tokenizer writes them, specials included
    ids: list                       # their ids
    token_type_ids: list | None     # segment ids (BERT layouts), else None
    layer: int                      # chosen layer, 0-based
    head: int                       # chosen head, 0-based
    pooling: str                    # "mean", "cls", "max" or "attention"
    norm: str                       # "post" or "pre": which step order applies
    truncated: int                  # tokens cut beyond the model's maximum length
    steps: list                     # Step objects, in the order the encoder computes them
    note: str = ""                  # e.g. why an hf backend's steps are our encoder's numbers
    max_length: int = 0             # the model's maximum tokens (specials included)
    text: str = ""                  # the sentence walked through
    pair: str | None = None         # the second sentence of a pair, if any
    config: object = None           # the EncoderConfig the steps ran with (the architecture map draws it)
    intervention: object = None     # the core.intervene Intervention both sides ran with, or None
    patched_from: str | None = None  # sentence B, when the walk follows patches from it

# Twin of core.walkthrough.architecture.Architecture.block, alike: a look-up by name, each in
#   its own list with its own KeyError words.
    def step(self, name: str) -> Step:
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(f"no step {name!r}; steps: {', '.join(s.name for s in self.steps)}")

    @property
    def worst_diff(self) -> float:
        return max(s.max_abs_diff for s in self.steps if s.max_abs_diff is not None)

    def to_dict(self) -> dict:
        """The CLI's JSON: 1-based layer and head, every step's full values."""
        return {"model": self.model, "text": self.text, "pair": self.pair, "tokens": self.tokens, "ids": self.ids,
                "token_type_ids": self.token_type_ids, "layer": self.layer + 1, "head": self.head + 1,
                "pooling": self.pooling, "norm": self.norm, "truncated": self.truncated,
                "max_length": self.max_length, "note": self.note, "patched_from": self.patched_from,
                "steps": [s.to_dict() for s in self.steps]}


def _rounded(a: np.ndarray):
    a = np.round(np.asarray(a, dtype=np.float64), 7)
    if np.isfinite(a).all():
        return a.tolist()
    return np.where(np.isfinite(a), a, None).tolist()


def max_abs_diff(ours: np.ndarray, model: np.ndarray) -> float:
    """The largest |ours - model|, where a -inf (a masked score) equals only a -inf: a cell
    masked on one side and not on the other is an infinite difference."""
    ours, model = np.asarray(ours, np.float64), np.asarray(model, np.float64)
    if ours.shape != model.shape:
        # broadcasting would compare rows of two different token sequences
        raise ValueError(f"cannot compare a step of shape {ours.shape} with the model's {model.shape}: "
                         "they were computed for different token sequences")
    both_masked = np.isinf(ours) & (ours == model)
    with np.errstate(invalid="ignore"):               # -inf - -inf: the cells both_masked sets to 0
        diff = np.where(both_masked, 0.0, np.abs(ours - model))
    return float(np.nan_to_num(diff, nan=np.inf, posinf=np.inf).max())


# ------------------------------------------------------------------------------ the model

def reference_backend(backend):
    """The CPU fp32 from-scratch backend holding the same weights, and a note when it differs
    from the one given (hf backends, GPUs, bf16): the steps are always the fp32 encoder's."""
    from core.encoder.backends import get_backend
    if backend.backend == "scratch" and backend.device.type == "cpu" and backend.precision == "fp32":
        return backend, ""
    ref = get_backend(backend.model_name, "scratch", device="cpu", precision="fp32")
    if backend.backend == "hf":
        return ref, ("the steps are Encoderscope's own encoder (core/encoder/model.py) on the same weights; "
                     "it matches Hugging Face transformers to 1e-5")
    return ref, (f"the steps run on the CPU in fp32 (the model is loaded for {backend.device_name}, "
                 f"{backend.precision})")


def tokenize(backend, text: str, pair: str | None = None):
    """-> (ids, token type ids or None, tokens cut): the backend's one tokenisation of a text or
    a pair (Backend.encode_input); types spelled out (0 for one text) where the model has them."""
    ids, types, cut = backend.encode_input(text, pair)
    if not backend.config.type_vocab_size:
        return ids, None, cut
    return ids, (types if types is not None else [0] * len(ids)), cut


def check_choice(cfg, layer: int, head: int, pooling: str):
    from core.encoder.backends import check_pooling
    check_pooling(pooling)
    if not 0 <= layer < cfg.n_layers:
        raise InputError(f"layer {layer + 1} does not exist: this model has {cfg.n_layers} layers "
                         f"(choose 1 to {cfg.n_layers})")
    if not 0 <= head < cfg.n_heads:
        raise InputError(f"head {head + 1} does not exist: this model has {cfg.n_heads} heads per layer "
                         f"(choose 1 to {cfg.n_heads})")


# ------------------------------------------------------------------------------ NumPy steps

def numpy_steps(p: dict, cfg, ids, types, layer: int, head: int, pooling: str, switch=None,
                means=None, patches=None) -> dict:
    """Every step by name, computed with numpy_ref's functions (float64). ``p`` is the
    encoder's state_dict as NumPy arrays (numpy_ref.params_from_torch). ``switch``: an
    Intervention applied the NumPy way (means (L, H, Dh) for mean ablation). ``patches``:
    {site: sentence B's numbers at A's positions} (patched.numpy_sources)."""
    patches = patches or {}
    ids = np.asarray(ids)
    T, eps = len(ids), cfg.layer_norm_eps
    keep = np.ones(T, bool)                          # one sentence: no padding
    seen = nr.attention_keep(keep, cfg.attention == "causal")    # which keys each query sees
    v = {"token_embeddings": p["embeddings.word_embeddings.weight"][ids]}
    if cfg.positions == "sinusoidal":
        v["position_embeddings"] = nr.sinusoidal_positions(T, cfg.dim)
    else:
        v["position_embeddings"] = p["embeddings.position_embeddings.weight"][:T]
    if switch is not None and switch.positions == "shuffle":
        v["position_embeddings"] = v["position_embeddings"][np.random.default_rng(switch.shuffle_seed).permutation(T)]
    elif switch is not None and switch.positions == "off":
        v["position_embeddings"] = np.zeros_like(v["position_embeddings"])
    total = v["token_embeddings"] + v["position_embeddings"]
    if cfg.type_vocab_size:
        v["token_type_embeddings"] = p["embeddings.token_type_embeddings.weight"][np.asarray(types)]
        total = total + v["token_type_embeddings"]
    v["embeddings_sum"] = total
    v["embeddings_layernorm"] = nr.layer_norm(total, p["embeddings.LayerNorm.weight"],
                                              p["embeddings.LayerNorm.bias"], eps)
    x = v["embeddings_layernorm"]
    for i in range(cfg.n_layers):
        sees = nr.layer_keep(seen, switch, i, cfg.n_heads)          # less the edges cut in this layer
        if i == layer:
            v.update(_layer_steps(x, p, f"transformer.layer.{i}", cfg, head, sees, switch, i, means, patches))
            x = v["layernorm_2"] if cfg.norm == "post" else v["residual_2"]   # the block's output
            if switch is not None and i in switch.skip:
                x = v["layer_input"]                 # a skipped block passes its input on
            if any(s.layer == i and s.kind == "resid" for s in patches):
                x = v["patched_resid"] = nr.patch_output(x, patches, i)
        else:
            x, _ = nr.block(x, p, f"transformer.layer.{i}", cfg, sees, switch, i, means, patches)
    if cfg.norm == "pre":
        v["_final_input"] = x                        # the last layer's output (for its mean/var)
        x = v["final_layernorm"] = nr.layer_norm(x, p["final_layer_norm.weight"], p["final_layer_norm.bias"], eps)
    v["pooled"] = nr.pool(x, keep, pooling, p.get("attention_pooling.query"))
    v["normalized"] = nr.l2_normalize(v["pooled"])
    return v


def _layer_steps(x, p, name, cfg, head, keep, switch=None, layer=0, means=None, patches=None) -> dict:
    """One block's intermediates (numpy_ref.block_steps, the reference's own), the attention's
    for the chosen head. keep: which keys each query sees, (T,) or causal (T, T)."""
    from core.walkthrough.patched import numpy_patched_steps
    dh = cfg.dim // cfg.n_heads
    switched = {} if switch is None else nr.switch_arguments(switch, layer, dh, means)
    v = nr.block_steps(x, p, name, cfg, keep, fill=-np.inf, **switched, **nr.patch_arguments(patches or {}, layer))
    if switched.get("score_factor", 1.0) != 1.0:
        # the intervention scales the queries (the model's q_lin output), so Q shows them scaled
        v["q"] = v["q"] * switched["score_factor"]
    for key in ("q", "k", "v", "scores", "masked_scores", "weights"):
        v[key] = v[key][head]
    v["head_output"] = v.pop("head_outputs")[head]
    v.update(numpy_patched_steps(v, list(patches or {}), layer, head, dh))
    del v["output"]
    return v


# ------------------------------------------------------------------------------ the walk

def explain(backend, text: str, pair: str | None = None, layer: int = 0, head: int = 0,
            pooling: str = "mean", intervention=None, means=None, patch_from=None) -> Walkthrough:
    """Walk one text (or a sentence pair) through the encoder; layer and head are 0-based.

    ``intervention`` (core.intervene Intervention): the model side runs inside ``intervene`` and
    the NumPy side switches the same parts off, so each step and its badge are the intervened
    model's (edge cuts included). Its patches are followed when ``patch_from`` (patched.PatchFrom)
    names sentence B and ``text`` is the sentence they were aligned to: B runs through both sides
    and its numbers replace A's at the sites (patched.py); otherwise they are left out, and the
    note says why.
    ``means`` (L, H, Dh): the heads' mean outputs, for mean ablation."""
    from core.walkthrough import patched as P
    from core.walkthrough.capture import capture, float64_copy
    ref, note = reference_backend(backend)
    cfg = ref.config
    pooling = ref.choose_pooling(pooling)
    check_choice(cfg, layer, head, pooling)
    switch, note = _switch(intervention, cfg, note)
    ids, types, cut = tokenize(ref, text, pair)
    tokens = ref.tokenizer.convert_ids_to_tokens(ids)
    patch = None
    if switch is not None and switch.patch:
        patch, why = P.plan(ref, switch, patch_from, text, pair, tokens)
        if patch is None:
            note = "; ".join(filter(None, [note, why + ": the other switches are followed"]))
            switch = None if switch.without_patch().is_empty else switch.without_patch()
    rest = None if switch is None or switch.without_patch().is_empty else switch.without_patch()
    means64 = None if means is None else np.asarray(means, np.float64)
    with ref._lock:                     # hooks see only this forward pass (and the copy is shared)
        source = None if patch is None else P.model_sources(ref.encoder, patch, len(ids), rest, means)
        with _intervened(ref.encoder, switch, means, source):
            as_run = capture(ref.encoder, ids, types, layer, head, pooling)
        exact_model = float64_copy(ref.encoder)
        source = None if patch is None else P.model_sources(exact_model, patch, len(ids), rest, means)
        with _intervened(exact_model, switch, means, source):
            model = capture(exact_model, ids, types, layer, head, pooling)
    # The NumPy side reads the same float64 tensors (views, no copy).
    p = {k: t.numpy() for k, t in exact_model.state_dict().items()}
    sources = None if patch is None else P.numpy_sources(p, cfg, patch, len(ids), rest, means64)
    ours = numpy_steps(p, cfg, ids, types, layer, head, pooling, switch, means64, sources)
    if patch is not None:
        dh = cfg.dim // cfg.n_heads
        for vals in (as_run, model):
            vals.update(P.model_patched_steps(vals, patch.sites, layer, head, dh))
        note = "; ".join(filter(None, [note, P.walk_note(patch, layer)]))
    return _walk(backend, ref, cfg, text, pair, ids, types, tokens, cut, layer, head, pooling, note, switch,
                 patch, ours, model, as_run, p)


def _walk(backend, ref, cfg, text, pair, ids, types, tokens, cut, layer, head, pooling, note, switch, patch,
          ours, model, as_run, p) -> Walkthrough:
    """The Walkthrough: each NumPy step beside its |difference| to the model's."""
    from core.walkthrough import patched as P
    from core.walkthrough.text import cut_scores_entry, describe
    from core.walkthrough.weights import step_input, step_weights
    order = P.with_patch_steps(PRE_ORDER if cfg.norm == "pre" else POST_ORDER, cfg.norm)
    steps = []
    for name in order:
        if name not in ours:
            continue                    # no token types in DistilBERT layouts
        values = ours[name]
        extra = {}
        if name in LAYER_NORMS:
            mean, var = nr.layer_norm_stats(_ln_input(name, ours, cfg))
            extra = {"mean": mean[:, 0], "var": var[:, 0]}
        if name == "position_embeddings":
            extra = {"kind": cfg.positions}
        rows = list(tokens)
        if name in P.PATCH_STEPS:
            text_ = P.describe_patch(name, patch, layer, head, tokens, cfg)
            rows = P.row_labels(name, patch, layer, head, tokens)
            extra = {"from B": P.patched_mark(name, patch, layer, head, len(tokens))}
        else:
            text_ = describe(name, cfg, len(ids), layer, head, pooling)
        cut_here = [] if switch is None or name != "masked_scores" else sorted(
            c.describe(list(tokens)) for c in switch.cuts if c.layer == layer and c.head in (None, head))
        if cut_here:
            text_ = cut_scores_entry(len(ids), head + 1, cut_here)
        one_d = values.ndim == 1
        steps.append(Step(
            name=name, title=text_["title"], values=values, formula=text_["formula"],
            description=text_["description"], shape_text=text_["shape_text"],
            row_labels=[f"{pooling} pooled"] if one_d else rows,
            col_labels=list(tokens) if name in TOKEN_BY_TOKEN else None,
            max_abs_diff=max_abs_diff(values, model[name]),
            fp32_max_abs_diff=max_abs_diff(values, as_run[name]),
            scale=float(np.abs(values[np.isfinite(values)]).max(initial=0.0)), extra=extra,
            weights=step_weights(p, name, layer, head, cfg.n_heads),
            input_step=step_input(name, cfg.norm, last_layer=layer == cfg.n_layers - 1)))
    return Walkthrough(model=backend.model_name, tokens=list(tokens), ids=ids, token_type_ids=types,
                       layer=layer, head=head, pooling=pooling, norm=cfg.norm, truncated=cut,
                       steps=steps, note=note, max_length=ref.max_length, text=text,
                       pair=pair if pair and pair.strip() else None, config=cfg, intervention=switch,
                       patched_from=None if patch is None else patch.text_b)


def _switch(intervention, cfg, note: str):
    """The intervention both sides apply (None: nothing switched off) and the walk's note."""
    if intervention is None or intervention.is_empty:
        return None, note
    intervention.check(cfg.n_layers, cfg.n_heads)
    return intervention, note


def _intervened(encoder, switch, means, source=None):
    from contextlib import nullcontext

    from core.intervene.apply import intervene
    return nullcontext() if switch is None else intervene(encoder, switch, means, source)


def _ln_input(name: str, v: dict, cfg) -> np.ndarray:
    """What each LayerNorm normalises (its per-token mean and variance are shown)."""
    if name == "embeddings_layernorm":
        return v["embeddings_sum"]
    if cfg.norm == "post":
        return v["residual_1" if name == "layernorm_1" else "residual_2"]
    if name == "final_layernorm":
        return v["_final_input"]
    return v["layer_input" if name == "layernorm_1" else "residual_1"]
