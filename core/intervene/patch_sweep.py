"""Patching sweeps: every site of one kind patched from sentence B into sentence A, one at a time.

resid: the residual stream after each layer at each token (layer x token); heads: each head's
output at every token (layer x head); ffn: each layer's FFN output at every token (layer). Each
cell is the fraction of the way to B of A's sentence vector,
    (cos(patched, v_B) - cos(v_A, v_B)) / (1 - cos(v_A, v_B)),
measured by core/intervene/way_to_b.py, as ``encoderscope patch`` measures it for one site, and
with a [MASK] in A also the change of p(token) at the mask (the token: the one asked for, else B's top guess there).

Batched: a layer's cells run as one stacked batch through the rest of the network
(core/intervene/restore.py), with the attention kernels one sentence alone would get: the numbers
are those of one ``patch --site`` run per cell, to the last digit where stacking rows leaves each
row's products alone (tests/core/intervene/test_way_to_b.py; test_causal_sweep.py checks them
against transformers). A and B must have the same number of tokens: the
positions then line up one to one, as in every patching sweep.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.device import autocast
from core.encoder.kernels import one_sentence_kernels
from core.errors import Cancelled, InputError
from core.intervene import readout, way_to_b
from core.intervene.apply import encoder_of
from core.intervene.restore import (
    bias_for,
    clean_run,
    finish_block,
    head_variants,
    heads_context,
    resid_variants,
    run_from,
)
from core.names import SWEEP_KINDS


@dataclass
class SweepResult:
    site: str                  # resid | heads | ffn
    tokens_a: list
    tokens_b: list
    rows: list                 # row labels (layers, 1-based: "L1" ...)
    cols: list                 # column labels (tokens, heads "H1" ..., or "ffn")
    values: np.ndarray         # (rows, cols): fraction of the way to B
    cosine_a_b: float
    pooling: str
    precision: str
    cosine_b: np.ndarray | None = None  # (rows, cols): cos(patched, v_B), what the fraction is made of
    delta_p: np.ndarray | None = None   # (rows, cols): p(target) patched - p(target) in A
    target: str | None = None
    p_a: float | None = None
    p_b: float | None = None
    mask_position: int | None = None

    def to_dict(self) -> dict:
        out = {"site": self.site, "rows": self.rows, "cols": self.cols,
               "values": np.round(self.values, 6).tolist(),
               "value_is": "fraction of the way to B: (cos(patched, B) - cos(A, B)) / (1 - cos(A, B))",
               "cosine_patched_b": np.round(self.cosine_b, 8).tolist(), "tokens_a": self.tokens_a,
               "tokens_b": self.tokens_b, "cosine_a_b": self.cosine_a_b,
               "pooling": self.pooling, "precision": self.precision}
        if self.delta_p is not None:
            out.update({"delta_p": np.round(self.delta_p, 6).tolist(), "target": self.target,
                        "mask_position": self.mask_position, "p_a": self.p_a, "p_b": self.p_b,
                        "delta_p_is": "p(target) at the mask patched - p(target) in A"})
        return out


def patch_sweep(backend, text_a: str, text_b: str, kind: str, pooling: str | None = None,
                target: str | None = None, progress=None, cancel=None) -> SweepResult:
    """Every ``kind`` site of ``backend``'s model patched from B into A. progress(done, total) in
    layers; cancel() between layers (Cancelled). target: the word whose p at A's [MASK] is read."""
    if kind not in SWEEP_KINDS:
        raise InputError(f"a sweep is over {', '.join(SWEEP_KINDS)}, not {kind!r}")
    encoder = encoder_of(backend)
    pooling = backend.choose_pooling(pooling)
    ids, _ = backend.encode_ids([text_a, text_b])
    tok = backend.tokenizer
    tokens_a, tokens_b = tok.convert_ids_to_tokens(ids[0]), tok.convert_ids_to_tokens(ids[1])
    if len(ids[0]) != len(ids[1]):
        raise InputError(f"A has {len(ids[0])} tokens and B has {len(ids[1])}: a sweep patches position by "
                         "position, so give two sentences of the same length (one word changed)")
    mask_at = readout.mask_position(backend, ids[0])
    if target is not None and mask_at is None:
        raise InputError("a target word is read at A's [MASK]: put [MASK] in sentence A")
    if mask_at is not None:
        readout.need_mlm(backend, "p(token) at the mask")
    L, H = encoder.config.n_layers, encoder.config.n_heads
    dev = backend.device
    with torch.inference_mode(), autocast(dev, backend.precision):
        ha = clean_run(encoder, torch.tensor([ids[0]], device=dev))
        hb = clean_run(encoder, torch.tensor([ids[1]], device=dev))
        ends = torch.cat([run_from(encoder, L, ha[L]), run_from(encoder, L, hb[L])])
        va, vb = readout.unit_vectors(backend, ends, pooling).cpu().numpy()
        cos_ab = way_to_b.cosine(va, vb)
        if way_to_b.moved_toward_b(va, va, vb) is None:
            raise InputError("A and B have the same sentence vector: there is no way to B to measure; "
                             "give a B that differs from A")
        token_id = p_a = p_b = None
        if mask_at is not None:
            token_id = readout.guessed_token(backend, target, ends[1:], mask_at)     # B's guess
            p_a, p_b = (float(p) for p in readout.mask_probability(backend, ends, mask_at, token_id))
        cosines, fractions, dps = [], [], []
        for layer in range(L):
            if cancel is not None and cancel():
                raise Cancelled("patching sweep cancelled")
            with one_sentence_kernels():        # each cell's kernels: those of its single patch run
                y = _layer_cells(encoder, kind, layer, ha, hb, len(ids[0]), H)
            cells = readout.unit_vectors(backend, y, pooling).cpu().numpy()
            measured = [way_to_b.toward_b(va, v, vb) for v in cells]
            cosines.append([m.cosine_patched_b for m in measured])
            fractions.append([m.moved for m in measured])
            if mask_at is not None:
                dps.append((readout.mask_probability(backend, y, mask_at, token_id) - p_a).cpu().numpy())
            if progress is not None:
                progress(layer + 1, L)
    cols = (tokens_a if kind == "resid" else [f"H{h + 1}" for h in range(H)] if kind == "heads" else ["ffn"])
    cosine_b = np.array(cosines, dtype=np.float64)
    values = np.array(fractions, dtype=np.float64)
    return SweepResult(
        kind, tokens_a, tokens_b, [f"L{layer + 1}" for layer in range(L)], list(cols),
        values, cos_ab, pooling, backend.precision, cosine_b=cosine_b,
        delta_p=np.stack(dps).astype(np.float64) if dps else None,
        target=None if token_id is None else tok.convert_ids_to_tokens(token_id),
        p_a=p_a, p_b=p_b, mask_position=mask_at)


def _layer_cells(encoder, kind: str, layer: int, ha: list, hb: list, n_tokens: int, n_heads: int) -> torch.Tensor:
    """The final hidden states (cells, T, D) of every ``kind`` site of ``layer`` patched from B."""
    if kind == "resid":
        # the residual after block layer+1 (hidden index layer+1), one token per copy
        index = layer + 1
        return run_from(encoder, index, resid_variants(ha[index], hb[index], list(range(n_tokens))))
    block = encoder.transformer.layer[layer]
    bias = bias_for(encoder, ha[layer])
    context_a = heads_context(block, ha[layer], bias)
    context_b = heads_context(block, hb[layer], bias)
    if kind == "heads":
        contexts = head_variants(context_a, context_b, n_heads)
        y, _ = finish_block(block, ha[layer].repeat(n_heads, 1, 1), contexts)
    else:
        _, ffn_b = finish_block(block, hb[layer], context_b)
        y, _ = finish_block(block, ha[layer], context_a, ffn_out=ffn_b)
    return run_from(encoder, layer + 1, y)
