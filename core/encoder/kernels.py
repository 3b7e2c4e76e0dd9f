"""CPU inference kernels behind core/encoder/model.py's Linear: the same maths as nn.Linear, through
oneDNN's packed weights where that is faster (core/encoder/packed_forward.py packs a model's Linears).

Training, autograd, other devices and weights changed after packing use the plain path."""
from __future__ import annotations

import threading
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import nn


def autocast_is_bf16() -> bool:
    """True inside a CPU bf16 autocast region (core.device.autocast)."""
    return torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16


class Linear(nn.Linear):
    """nn.Linear with an optional fast path for CPU inference.

    After ``pack_for_cpu_inference`` the weight is also kept in oneDNN's blocked layout (fp32,
    and bf16 where the CPU has it) and inference calls can run through oneDNN instead of MKL's
    fp32 GEMM, with the GELU fused in and, under bf16 autocast, no per-call weight casts. Which
    fp32 kernel is faster depends on the CPU and the shape (oneDNN was 1.6x faster on an AMD
    CPU; on an Intel Xeon MKL was 25% faster for single sentences), so packing times both per
    shape and keeps the winner (``fp32_onednn``). Numbers are the same either way. Training, autograd,
    other devices and weights changed after packing use the plain path.
    """

    packed = None          # fp32 weight in oneDNN layout, or None
    packed_bf16 = None     # (bf16 weight in oneDNN layout, bf16 bias), or None
    cast_bf16 = None       # (bf16 weight, bf16 bias) cast once, any device (cast_for_inference)
    packed_version = None  # param_versions() when packed or cast
    fp32_onednn = True     # fp32 inference through oneDNN (False: MKL was faster here)

    def forward(self, x, gelu: str | None = None):
        # gelu: fuse the activation into the same kernel ("none" = exact erf, "tanh").
        if self.packed is not None and x.is_cpu and not torch.is_grad_enabled():
            bf16 = autocast_is_bf16()
            if bf16 or x.dtype == torch.float32:
                kernel = self.cpu_kernel(bf16, gelu)
                if kernel is not None:
                    return kernel(x)
        y = F.linear(x, self.weight, self.bias)
        return y if gelu is None else F.gelu(y, approximate=gelu)

    def param_versions(self) -> tuple:
        """In-place changes to the weight or the bias since packing show here (the packed
        copies would be stale)."""
        return self.weight._version, (None if self.bias is None else self.bias._version)

    def cpu_kernel(self, bf16: bool, gelu: str | None = None):
        """The packed kernel for CPU inference, x -> y (bf16: under bf16 autocast, the result in
        bf16), or None where the plain path must run (not packed, weight or bias changed since)."""
        if self.packed is None or self.param_versions() != self.packed_version:
            return None
        attr, algo = ("gelu", gelu) if gelu else ("none", "")
        onednn = torch.ops.mkldnn._linear_pointwise
        if bf16:
            if self.packed_bf16 is None:
                return None
            w, b = self.packed_bf16
            return lambda x: onednn(x.to(torch.bfloat16), w, b, attr, [], algo)
        if self.fp32_onednn:
            w, b = self.packed, self.bias
            return lambda x: onednn(x, w, b, attr, [], algo)
        return self._plain(self.weight, self.bias, gelu)

    def inference_kernel(self, bf16: bool, gelu: str | None = None):
        """The kernel for inference on any device, x -> y: oneDNN's where packed (cpu_kernel),
        else with bf16 the weights cast once (cast_bf16; the input cast to bf16, as autocast
        would), else the plain fp32 one. None where the weights changed since, or bf16 was
        asked of a Linear prepared without it."""
        if self.packed is not None:
            return self.cpu_kernel(bf16, gelu)
        if self.packed_version is None or self.param_versions() != self.packed_version:
            return None
        if not bf16:
            return self._plain(self.weight, self.bias, gelu)
        if self.cast_bf16 is None:
            return None
        w, b = self.cast_bf16
        linear = self._plain(w, b, gelu)
        return lambda x: linear(x.to(torch.bfloat16))

    @staticmethod
    def _plain(w, b, gelu: str | None):
        if gelu is None:
            return lambda x: F.linear(x, w, b)
        return lambda x: F.gelu(F.linear(x, w, b), approximate=gelu)

    def cast_for_inference(self, bf16: bool) -> None:
        """Prepare inference_kernel: keep bf16 copies of the weight and bias (cast once here,
        not on every call as autocast does) and note the versions they were cast from."""
        with torch.no_grad():
            self.cast_bf16 = (self.weight.detach().to(torch.bfloat16),
                              None if self.bias is None else self.bias.detach().to(torch.bfloat16)) \
                if bf16 else None
        self.packed_version = self.param_versions()


# bf16 on a CPU: up to this many query rows (batch x tokens) the fused attention kernel is faster
# than the explicit one (2x for one sentence of 8-32 tokens: 35-55 vs 100-135 us a layer; the
# explicit path wins from 40 rows and for every batch of 64, 2 threads, AMD Zen 5).
FUSED_BF16_MAX_ROWS = 32


_choice = threading.local()      # .one_sentence: this thread chooses kernels as for one sentence


@contextmanager
def one_sentence_kernels():
    """Inside the block this thread's attention kernel is chosen as for one sentence of the batch
    alone: a stack of variants of one sentence (a patching sweep's cells) then gets the kernels,
    and so the numbers, that each variant's own run gets (fused and explicit agree only to
    rounding in bf16)."""
    was = getattr(_choice, "one_sentence", False)
    _choice.one_sentence = True
    try:
        yield
    finally:
        _choice.one_sentence = was


def explicit_attention_is_faster(q: torch.Tensor) -> bool:
    """Whether the explicit attention (scores, softmax in fp32, then V) beats torch's fused kernel
    for these queries (B, H, T, Dh): bf16 on a CPU for more than a short sentence, 6% faster in
    batches of 64 on 2 threads. A speed choice only: both compute the same maths."""
    rows = q.shape[2] if getattr(_choice, "one_sentence", False) else q.shape[0] * q.shape[2]
    return q.is_cpu and q.dtype == torch.bfloat16 and rows > FUSED_BF16_MAX_ROWS


def sdpa_mask(mask: torch.Tensor | None, q: torch.Tensor) -> torch.Tensor | None:
    """The additive mask as torch's fused attention takes it: its GPU kernels take a float mask
    of the queries' type only (bf16 weights cast once, no autocast to cast the mask)."""
    if mask is not None and mask.dtype != q.dtype and not q.is_cpu:
        return mask.to(q.dtype)
    return mask


# torch's CPU softmax over rows shorter than one AVX-512 vector of floats takes a scalar path:
# ~17 ns an element at 8-15 keys against ~1.3 at 16 (1 thread, AMD Zen 5). The explicit bf16
# attention over fewer keys pads them to this many, the added keys masked to -inf (their weights
# exactly 0): for a batch of 64 sentences of 9-15 tokens the attention ran 1.5-3.5x faster.
SOFTMAX_MIN_KEYS = 16


def key_padding(q: torch.Tensor, n_keys: int) -> int:
    """How many masked keys the explicit attention adds to n_keys for queries q (B, H, T, Dh):
    on a CPU in bf16 (or fp16), up to SOFTMAX_MIN_KEYS; else 0. fp32 keeps torch's softmax
    over the real keys, so that fp32 weights stay bit for bit what they were."""
    if q.is_cpu and q.is_floating_point() and q.element_size() < 4 and n_keys < SOFTMAX_MIN_KEYS:
        return SOFTMAX_MIN_KEYS - n_keys
    return 0


def pad_keys(mask: torch.Tensor | None, pad: int, n_keys: int, device) -> torch.Tensor:
    """The additive mask (B or 1, 1, 1 or T, n_keys), or none, widened by `pad` keys of -inf."""
    if mask is None:
        mask = torch.zeros(1, 1, 1, n_keys, device=device)
    return F.pad(mask, (0, pad), value=float("-inf"))


def at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    """bf16 and fp16 as fp32, fp32 and fp64 as they are: where a softmax must not lose precision."""
    return t.float() if t.is_floating_point() and t.element_size() < 4 else t
