"""CPU inference of core/encoder/model.py's Encoder in few Python steps: the last hidden state only.

Why: for one sentence the Python around the kernels (nn.Module calls, eval-mode dropouts,
attribute look-ups, autocast's checks on every operator) is a fixed cost per call, where
onnxruntime's C++ graph runner is ahead at batch 1. Skipping the module machinery made one
sentence of 8-32 tokens 1.09-1.17x faster (0.4-0.6 ms of 3.4-6.5 ms); binding each Linear's
kernel once and running with autocast off (the bf16 kernels cast their inputs themselves, as
autocast would) took another ~0.5 ms off bf16 at 8 tokens (same process, alternating blocks,
AMD Zen 5, 2 threads). This path runs the same operations, in the same order, on the same
packed weights (core.encoder.packed_forward.pack_for_cpu_inference) and gives the same numbers
(tests/core/encoder/test_fast_paths.py: identical to the hand-written modules, fp32 and bf16, within 1e-5
in any case); it asks the modules for what has logic of its own (Linear.cpu_kernel: the kernel
Linear.forward would pick; the fused Q/K/V and its checks; attention) and skips only the
machinery around them.

The hand-written modules stay the model that the walkthrough, the inspector's hooks, the
parity tests and training read: ``usable()`` sends anything else there (training, gradients,
hooks of this thread or unscoped ones, another device, weights changed since packing).
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from core import machine_cache
from core.encoder.kernels import Linear, autocast_is_bf16
from core.encoder.model import Encoder, MultiHeadSelfAttention, attention_bias, needs_mask
from core.encoder.scoped_hooks import forward_is_plain


class PackedEncoder:
    """``PackedEncoder(encoder)(input_ids, attention_mask, token_type_ids)`` -> (B, T, D), the
    encoder's ``last_hidden_state`` for inference, fp32 or, inside a bf16 autocast region, with
    the Linears' weights in bf16 (cast once: pack_for_cpu_inference on a CPU, cast_for_inference
    on any device) and LayerNorm, softmax and the residual stream in fp32. On a CPU a padded batch
    runs its token-wise steps on the real tokens only (bit for bit the same vectors; 1.03-1.05x
    on 1,000 mixed sentences, batch 64, AMD Zen 5) and its padding positions come back at 0."""

    def __init__(self, encoder: Encoder):
        self.encoder = encoder
        self.pre_norm = encoder.config.norm == "pre"
        emb = encoder.embeddings
        self.word, self.position = emb.word_embeddings.weight, emb.position_embeddings.weight
        self.token_type = None if emb.token_type_embeddings is None else emb.token_type_embeddings.weight
        self.embed_norm = _norm_args(emb.LayerNorm)
        self.layers = list(encoder.transformer.layer)
        self.attentions = [b.attention for b in self.layers]
        self.n_heads = encoder.config.n_heads
        self.norms = [(_norm_args(b.sa_layer_norm), _norm_args(b.output_layer_norm)) for b in self.layers]
        self.final_norm = None if encoder.final_layer_norm is None else _norm_args(encoder.final_layer_norm)
        self.modules = list(encoder.modules())
        # The Linear weights and biases, held directly: nn.Module attribute look-ups cost
        # ~0.6 us each, and their versions are checked on every call.
        self.params = [p for b in self.layers
                       for m in (b.attention.q_lin, b.attention.k_lin, b.attention.v_lin,
                                 b.attention.out_lin, b.ffn.lin1, b.ffn.lin2)
                       for p in (m.weight, m.bias) if p is not None]
        self._kernels = {}          # bf16 -> ((qkv, out, ffn) per block), while fresh

    def usable(self, input_ids) -> bool:
        """True when this path gives what the modules would: CPU, eval, no gradients, no hooks,
        and every Linear still packed with its current weights."""
        return (input_ids.device == self.word.device and not self.encoder.training
                and not torch.is_grad_enabled()
                and forward_is_plain(self.modules)     # other threads' scoped hooks do not count
                and self.kernels(self.bf16_asked(input_ids.device)) is not None)

    def kernels(self, bf16: bool):
        """Each block's four packed Linear kernels (Linear.cpu_kernel: the ones its forward would
        pick), or None where a weight or bias changed since packing or has no kernel for this precision."""
        cached = self._kernels.get(bf16)
        if cached is not None and cached[0] == self._versions():
            return cached[1]
        kernels = []
        for b in self.layers:
            att = b.attention
            if att.fused_qkv is None or att.fused_qkv.source_versions != att._qkv_versions():
                return None
            block = (att.fused_qkv.inference_kernel(bf16), att.out_lin.inference_kernel(bf16),
                     ffn_kernel(b.ffn, bf16))
            if None in block:
                return None
            kernels.append(block)
        self._kernels[bf16] = (self._versions(), kernels)
        return kernels

    def _versions(self) -> tuple:
        return tuple(p._version for p in self.params)

    @staticmethod
    def bf16_asked(device: torch.device) -> bool:
        """Inside a bf16 autocast region for this device: run the bf16 kernels (weights cast once)."""
        if device.type == "cpu":
            return autocast_is_bf16()
        return torch.is_autocast_enabled(device.type) and torch.get_autocast_dtype(device.type) == torch.bfloat16

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None):
        device = input_ids.device
        bf16 = self.bf16_asked(device)
        kernels = self.kernels(bf16)
        if kernels is None:
            raise RuntimeError("the encoder's weights changed since they were packed, or have no "
                               "packed kernel for this precision: run the modules (see usable())")
        # The kernels cast to bf16 themselves, as autocast would: with autocast off, no other
        # operation pays for its checks (8 tokens in bf16: ~0.5 ms of ~3 ms, same numbers).
        with torch.autocast(device.type, enabled=False):
            return self._forward(kernels, input_ids, attention_mask, token_type_ids)

    # Twin of core.encoder.model.Encoder.forward,
    #   pinned by tests/core/encoder/test_fast_paths.py::test_packed_encoder_gives_the_modules_numbers:
    #   the CPU fast path: the last hidden state only, fused QKV and oneDNN-packed Linears in few
    #   Python steps; the readable modules stay the reference (and run whenever hooks are set).
    def _forward(self, kernels, input_ids, attention_mask, token_type_ids):
        B, T = input_ids.shape
        x = F.embedding(input_ids, self.word) + self.position[:T]             # (B, T, D)
        if self.token_type is not None:
            x = x + (self.token_type[0] if token_type_ids is None else F.embedding(token_type_ids, self.token_type))
        x = F.layer_norm(x, *self.embed_norm)
        mask = attention_bias(attention_mask, T, x.dtype, x.device, self.encoder.config.attention == "causal")
        D = x.shape[-1]
        H = self.n_heads
        # Unpadded: every token-wise step (Linears, GELU, LayerNorms, adds) runs on the real
        # tokens only, (N, D); only the attention sees the padded (B, T) layout.
        real = real_tokens(attention_mask) if x.is_cpu and needs_mask(attention_mask) else None
        if real is not None:
            x = x.reshape(B * T, D).index_select(0, real.rows)                 # (N, D)
        for att, (qkv, out, ffn), (norm1, norm2) in zip(self.attentions, kernels, self.norms):
            h = F.layer_norm(x, *norm1) if self.pre_norm else x
            y = qkv(h)
            if real is not None:                                           # (N, 3D) -> (B * T, 3D)
                y = y.new_zeros(B * T, 3 * D).index_copy_(0, real.rows, y)
            # split_heads of Q, K and V in one view: (B, T, 3D) -> (3, B, H, T, Dh)
            q, k, v = y.view(B, T, 3, H, D // H).permute(2, 0, 3, 1, 4)
            context, _ = att.attend(q, k, v, mask)
            context = context.transpose(1, 2)                              # (B, T, H, Dh)
            a = out(context.reshape(B, T, D) if real is None else
                    context[real.batch, real.position].reshape(-1, D))
            if self.pre_norm:                                              # x + f(LN(x))
                x = x + a
                x = x + ffn(F.layer_norm(x, *norm2))
            else:                                                          # LN(x + f(x))
                x = F.layer_norm(x + a, *norm1)
                x = F.layer_norm(x + ffn(x), *norm2)
        x = x if self.final_norm is None else F.layer_norm(x, *self.final_norm)
        if real is not None:                                               # padding back, at 0
            x = x.new_zeros(B * T, D).index_copy_(0, real.rows, x).view(B, T, D)
        return x


class RealTokens(NamedTuple):
    rows: torch.Tensor          # (N,) flat indices b * T + t of the real tokens, ascending
    batch: torch.Tensor         # (N,) their b
    position: torch.Tensor      # (N,) their t


def real_tokens(attention_mask: torch.Tensor) -> RealTokens:
    """Where the real tokens of a padded batch are (attention_mask (B, T) of 1 = token)."""
    T = attention_mask.shape[1]
    rows = attention_mask.reshape(-1).nonzero().squeeze(1)
    return RealTokens(rows, rows // T, rows % T)


def _norm_args(ln: torch.nn.LayerNorm) -> tuple:
    return (ln.normalized_shape, ln.weight, ln.bias, ln.eps)


# oneDNN's matmul wants the weight in its own blocked layout. A weight only converted with
# ``to_mkldnn()`` stays plain and is reordered again on every call; ``_reorder_linear_weight``
# does it once, for a batch of about this many rows (any hint from 16 to 512 measured the same:
# 1.3-1.75x faster fp32 Linears at 4-512 rows, 1.1-1.7x bf16, 2 threads, AMD Zen 5).
PACK_ROWS_HINT = 64


def fuse_qkv(model: nn.Module) -> None:
    """Give each attention of `model` (fp32 weights) its Q, K and V weights stacked as one Linear."""
    with torch.no_grad():
        for att in [m for m in model.modules() if isinstance(m, MultiHeadSelfAttention)]:
            if att.q_lin.weight.dtype != torch.float32:
                continue
            fused = Linear(att.q_lin.in_features, 3 * att.q_lin.out_features).to(att.q_lin.weight.device)
            fused.weight.copy_(torch.cat([att.q_lin.weight, att.k_lin.weight, att.v_lin.weight]))
            fused.bias.copy_(torch.cat([att.q_lin.bias, att.k_lin.bias, att.v_lin.bias]))
            fused.requires_grad_(False)
            fused.source_versions = att._qkv_versions()
            # a plain attribute, not a submodule: the state_dict stays DistilBERT's
            object.__setattr__(att, "fused_qkv", fused)


def cast_for_inference(model: nn.Module, bf16: bool) -> None:
    """Prepare `model` for PackedEncoder on any device without oneDNN (a GPU; a CPU for the
    tests): Q, K and V fused, and with bf16 every Linear's weights cast to bf16 once, instead
    of autocast casting them on every call. LayerNorms, embeddings and the pooling query stay
    fp32, as autocast keeps them."""
    fuse_qkv(model)
    linears = [m for m in model.modules() if isinstance(m, Linear)] + [
        a.fused_qkv for a in model.modules() if isinstance(a, MultiHeadSelfAttention) and a.fused_qkv is not None]
    for m in linears:
        if m.weight.dtype == torch.float32:
            m.cast_for_inference(bf16)


def ffn_kernel(ffn, bf16: bool):
    """The FFN on packed kernels, W2 · GELU(W1 · x + b1) + b2, or None where a kernel is missing.

    fp32: the GELU runs inside lin1's oneDNN kernel, one pass fewer over the (T, 4D) activation
    (minilm, batch 64, 2 cores: 80.6 vs 101.4 ms for the whole encoder, Intel Xeon, quiet), equal
    to the modules' separate GELU within fp32 rounding (~1e-7). bf16: the modules' three steps as they are, since
    fusing rounds once fewer and the two paths would differ by bf16 rounding (0.015 on minilm's
    hidden states); unfused cost 1.00-1.06x at batch 64 and nothing for one sentence (two runs,
    Intel Xeon with AMX, 2 cores, quiet)."""
    lin1 = ffn.lin1.inference_kernel(bf16, gelu=None if bf16 else ffn.approximate)
    lin2 = ffn.lin2.inference_kernel(bf16)
    if lin1 is None or lin2 is None:
        return None
    if bf16:
        return lambda x: lin2(F.gelu(lin1(x), approximate=ffn.approximate))
    return lambda x: lin2(lin1(x))


def pack_for_cpu_inference(model: nn.Module, bf16: bool = False, tune: bool = True) -> bool:
    """Give every Linear of a CPU model its oneDNN weights. Returns False where oneDNN is missing.

    tune: time oneDNN against MKL once per (shape, fused GELU) and use the faster for fp32; the
    winners are remembered on disk per machine (core/machine_cache.py), so later loads skip it."""
    if not (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
            and hasattr(torch.ops.mkldnn, "_reorder_linear_weight")):
        return False
    chosen = machine_cache.load(machine_cache.KERNEL_CHOICE) if tune else {}   # key -> oneDNN won
    timed: dict[str, bool] = {}                 # the ones timed now, to remember
    with torch.no_grad():
        fuse_qkv(model)
        linears = list(model.named_modules()) + [
            (f"{n}.fused_qkv", a.fused_qkv) for n, a in model.named_modules()
            if isinstance(a, MultiHeadSelfAttention) and a.fused_qkv is not None]
        for name, m in linears:
            if isinstance(m, Linear) and m.weight.device.type == "cpu" and m.weight.dtype == torch.float32:
                w = m.weight.detach()
                m.packed = torch.ops.mkldnn._reorder_linear_weight(w, PACK_ROWS_HINT)
                if bf16:
                    bias = None if m.bias is None else m.bias.detach().to(torch.bfloat16)
                    m.packed_bf16 = (torch.ops.mkldnn._reorder_linear_weight(w.to(torch.bfloat16),
                                                                             PACK_ROWS_HINT), bias)
                m.packed_version = m.param_versions()
                if tune:
                    gelu = "none" if name.endswith("ffn.lin1") else None   # fp32 FFN fuses its GELU
                    key = machine_cache.machine_key(f"{w.shape[0]}x{w.shape[1]}", f"gelu {gelu}",
                                                    f"reordered for {PACK_ROWS_HINT} rows", *kernel_isa())
                    if key not in chosen:
                        chosen[key] = timed[key] = _onednn_is_faster(m, gelu)
                    m.fp32_onednn = chosen[key]
    if timed:
        machine_cache.save(machine_cache.KERNEL_CHOICE, timed)
    return True


def kernel_isa() -> tuple[str, ...]:
    """What the fp32 kernels compiled for besides the CPU's name: ATen's capability and oneDNN's
    ISA limit. A choice timed with AVX-512 says nothing of the same CPU held to AVX2
    (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA), so each is timed and remembered apart."""
    cap = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "?")()
    limit = os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA")
    return (f"aten {cap}",) + ((f"onednn max {limit}",) if limit else ())


def _onednn_is_faster(m: Linear, gelu: str | None, tokens: int = 512, rounds: int = 3) -> bool:
    """Best of `rounds` alternating timings of both fp32 kernels on a batch of `tokens` rows.
    oneDNN must win by 3% to be chosen: a tie goes to the plain path."""
    x = torch.randn(tokens, m.in_features)
    best = {True: float("inf"), False: float("inf")}
    with torch.inference_mode():
        for _ in range(rounds + 1):            # the first round warms both up
            for onednn in (True, False):
                m.fp32_onednn = onednn
                t = time.perf_counter()
                m(x, gelu=gelu)
                best[onednn] = min(best[onednn], time.perf_counter() - t)
    return best[True] < 0.97 * best[False]
