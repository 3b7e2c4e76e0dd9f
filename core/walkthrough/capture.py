"""The torch encoder's own intermediates for one text: the "= model" side of the walkthrough.

Forward hooks on the modules of core/encoder/model.py record what the real forward pass computes
(embedding rows, LayerNorm inputs and outputs, Q/K/V projections, the attention weights the
module returns, out_lin's input and output, the FFN's pre-activation, GELU and output). Two
numbers never leave a module as a tensor of their own, so they are computed here in torch from the
captured tensors, exactly as the module does: the scaled scores and the masked scores (the same
additive mask, causal or not). Nothing here uses the NumPy code.
"""
from __future__ import annotations

import math
import weakref
from contextlib import contextmanager

import numpy as np
import torch

from core.encoder.model import Encoder, attention_bias
from core.encoder.pooling import l2_normalize, pool
from core.encoder.scoped_hooks import scoped_hooks


@contextmanager
def _hooks(pairs):
    """Register (module, kind, fn) hooks for the duration of the block, acting only on this
    thread (core/encoder/scoped_hooks.py): another job on the same model is not recorded."""
    with scoped_hooks() as register:
        for module, kind, fn, *first in pairs:
            register(module, kind, fn, prepend=bool(first))
        yield


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def float64_copy(encoder: Encoder) -> Encoder:
    """The same encoder and weights, computing in float64.

    fp32 arithmetic rounds every result to 7 significant digits: where minilm's residual stream
    reaches 200, one rounding step is 1.5e-5, so two correct fp32 computations (torch and NumPy)
    already differ by a few 1e-5. Run in float64 on the very same (fp32-valued) weights, the
    torch encoder and the NumPy steps agree to ~1e-12 when their maths is the same, and to far
    more than 1e-5 when it is not: a sharp test. The fp32 run is compared too (``capture`` on
    the model itself), with differences at fp32's rounding level.
    """
    # One copy is kept (twice the fp32 model's memory), for the last encoder asked about.
    # Weights changed in place (training) bump their tensors' version counters: copy afresh.
    versions = tuple(t._version for t in encoder.state_dict().values())
    source, seen, copy = _last_copy
    if source is not None and source() is encoder and seen == versions:
        return copy
    with torch.device("meta"):          # no time spent on a random init that is overwritten
        copy = Encoder(encoder.config)
    copy = copy.to_empty(device="cpu").double()
    copy.load_state_dict(encoder.state_dict())
    _last_copy[:] = [weakref.ref(encoder), versions, copy.eval()]
    return copy


_last_copy: list = [None, None, None]      # [weakref to the fp32 encoder, its versions, float64 copy]


def capture(encoder: Encoder, ids: list[int], types: list[int] | None, layer: int, head: int,
            pooling: str) -> dict[str, np.ndarray]:
    """Run ``encoder`` on one sequence; return its intermediates by walkthrough step name
    (first row of the batch, batch axis dropped), plus ``hidden_states`` (L+1, T, D) and
    ``last_hidden_state`` (T, D) from the forward's own result."""
    cfg = encoder.config
    emb, block = encoder.embeddings, encoder.transformer.layer[layer]
    att, ffn = block.attention, block.ffn
    dh = cfg.dim // cfg.n_heads
    cols = slice(head * dh, (head + 1) * dh)
    got: dict[str, torch.Tensor] = {}

    def out(name, index=None):
        def hook(_module, _inputs, output):
            got[name] = output if index is None else output[index]
        return hook

    def inp(name):
        def hook(_module, inputs, _output=None):
            got[name] = inputs[0]
        return hook

    pairs = [(emb.word_embeddings, "out", out("token_embeddings")),
             (emb.position_embeddings, "out", out("position_embeddings")),
             (emb.LayerNorm, "pre", inp("embeddings_sum")),
             (emb.LayerNorm, "out", out("embeddings_layernorm")),
             (block, "pre", inp("layer_input")),
             (block, "out", out("layer_output", 0)),
             (att.q_lin, "out", out("q_all")), (att.k_lin, "out", out("k_all")),
             (att.v_lin, "out", out("v_all")),
             (att, "out", out("attention_weights", 1)),
             # the mask the module is handed (an edge cut adds its -inf to the block's own)
             (att, "pre", lambda _m, inputs: got.__setitem__("mask_passed", inputs[1])),
             (att, "out", out("attention_output", 0)),     # what the residual adds (an intervention's too)
             (att.out_lin, "pre", inp("heads_concat")),
             (ffn.lin1, "pre", inp("ffn_input")),
             (ffn.lin1, "out", out("ffn_hidden")),
             (ffn.activation, "out", out("ffn_activation")),
             (ffn, "out", out("ffn_output")),
             (block.sa_layer_norm, "pre", inp("sa_ln_input")),
             (block.sa_layer_norm, "out", out("sa_ln_output")),
             (block.output_layer_norm, "pre", inp("out_ln_input")),
             (block.output_layer_norm, "out", out("out_ln_output")),
             # before an intervention's hooks (prepended): A's own numbers where a patch replaces them
             (att.out_lin, "pre", inp("heads_concat_own"), True),
             (ffn, "out", out("ffn_output_own"), True),
             (block, "out", out("layer_output_own", 0), True)]
    if emb.token_type_embeddings is not None:
        pairs.append((emb.token_type_embeddings, "out", out("token_type_embeddings")))
    if encoder.final_layer_norm is not None:
        pairs.append((encoder.final_layer_norm, "out", out("final_layernorm")))

    device = next(encoder.parameters()).device
    input_ids = torch.tensor([ids], device=device)
    mask = torch.ones_like(input_ids)
    type_ids = None if types is None else torch.tensor([types], device=device)
    with _hooks(pairs), torch.inference_mode():
        result = encoder(input_ids, mask, type_ids, output_hidden_states=True, output_attentions=True)
        # What the attention module computes inside its explicit path, redone in torch on
        # the module's own Q and K: the scaled scores, then the same additive mask.
        q = att.split_heads(got["q_all"])                                # (1, H, T, Dh)
        k = att.split_heads(got["k_all"])
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
        bias = attention_bias(mask, len(ids), scores.dtype, scores.device, cfg.attention == "causal")
        masked = scores if bias is None else scores + bias
        passed = got.pop("mask_passed", None)
        if passed is not None:          # an edge knocked out: -inf in the mask the module was handed
            masked = masked.masked_fill(torch.isneginf(passed), float("-inf"))
        # The most negative float the model adds is -inf to softmax (exp gives exactly 0): shown so.
        masked = masked.masked_fill(masked <= torch.finfo(masked.dtype).min / 2, float("-inf"))
        pooled = pool(result.last_hidden_state, mask, pooling, query=encoder.pooling_query)
        normalized = l2_normalize(pooled)

    vals = {name: _np(t[0]) for name, t in got.items()}
    for name in ("q", "k", "v"):
        vals[name] = vals.pop(name + "_all")[:, cols]
    vals["scores"] = _np(scores[0, head])
    vals["masked_scores"] = _np(masked[0, head])
    vals["weights"] = _np(got["attention_weights"][0, head])
    vals["head_output"] = vals["heads_concat"][:, cols]
    if cfg.norm == "post":
        vals.update(residual_1=vals.pop("sa_ln_input"), layernorm_1=vals.pop("sa_ln_output"),
                    residual_2=vals.pop("out_ln_input"), layernorm_2=vals.pop("out_ln_output"))
    else:
        # Pre-norm: LN before each sublayer; the FFN's LN reads the first residual sum.
        # residual_2 is the block's own sum, before a skip or a patch replaces the block's output
        vals.update(layernorm_1=vals.pop("sa_ln_output"), residual_1=vals.pop("out_ln_input"),
                    layernorm_2=vals.pop("out_ln_output"), residual_2=vals["layer_output_own"])
        vals.pop("sa_ln_input")
    vals["pooled"] = _np(pooled[0])
    vals["normalized"] = _np(normalized[0])
    vals["hidden_states"] = np.stack([_np(h[0]) for h in result.hidden_states])
    vals["last_hidden_state"] = _np(result.last_hidden_state[0])
    return vals
