"""Where one sentence's forward pass spends its time on a CPU, against onnxruntime's whole forward.

    python bench/single_sentence_anatomy.py                 # minilm, fp32, 8 and 24 tokens
    python bench/single_sentence_anatomy.py --tokens 8 16 32 --precision auto

For each length T (one sentence, no padding) it prints, in ms (best of ROUNDS blocks of REPS
calls, one process; rows are measured one after another, so compare rows of one run only):
  forward            core/encoder/packed_forward.py's PackedEncoder, as embed() runs it
  GEMMs in place     its Linear kernels, timed inside that forward
  attention          MultiHeadSelfAttention.attend, timed inside it
  rest               forward - GEMMs - attention (embeddings, LayerNorms, adds, views, Python,
                     and the in-place timers' own cost)
  without GEMMs      the same forward with every Linear replaced by a ready output of its shape
  GEMMs alone        the model's Linear shapes back to back on distinct weights of the model's
                     size (the memory traffic of one call: fp32's 42.5 MB outgrow a 32 MB L3,
                     bf16's 21 MB may stay in it), with the kernel the model uses and, in fp32,
                     with MKL's F.linear
  set-up per GEMM    the kernel on a 32 x 32 weight: what a call costs before any arithmetic,
                     times the number of GEMMs in one forward
  onnxruntime        the same weights exported to ONNX, whole forward (bench extra installed)
and the ratio onnxruntime / ours (> 1: ours faster). See docs/benchmarks.md (session 15).
"""
from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from encoder_throughput import onnx_session  # first: it puts the repository on sys.path

from core.device import autocast
from core.encoder.backends import get_backend
from core.encoder.kernels import Linear
from core.encoder.packed_forward import PackedEncoder, pack_for_cpu_inference

ROUNDS, REPS = 5, 100


def best_ms(fn, reps: int = REPS, rounds: int = ROUNDS) -> float:
    for _ in range(10):
        fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t) / reps * 1e3)
    return best


class InPlaceTimer:
    """A PackedEncoder whose Linear kernels and attention are timed as the forward runs them."""

    def __init__(self, backend, bf16: bool):
        self.packed = PackedEncoder(backend.encoder)
        self.seconds = {"gemm": 0.0, "attention": 0.0}
        kernels = [tuple(self._timed(k, "gemm") for k in block) for block in self.packed.kernels(bf16)]
        self.packed.kernels = lambda _bf16: kernels          # instance attribute: this copy only
        self.attentions = self.packed.attentions
        for att in self.attentions:
            att.attend = self._timed(att.attend, "attention")

    def _timed(self, fn, part):
        clock, seconds = time.perf_counter, self.seconds

        def timed(*args):
            t = clock()
            out = fn(*args)
            seconds[part] += clock() - t
            return out
        return timed

    def close(self):
        for att in self.attentions:
            del att.attend                                    # back to the class's method


def gemm_chain(packed: PackedEncoder, bf16: bool, T: int, plain: bool) -> float:
    """The forward's Linear calls back to back on distinct random weights of the same shapes
    (one copy per layer, as in the model): with the kernel the model picked for each (oneDNN or
    MKL, GELU fused where the model fuses it) or, plain=True, MKL's F.linear for all."""
    calls = []
    for att, block in zip(packed.attentions, packed.layers):
        for m, gelu in ((att.fused_qkv, None), (att.out_lin, None),
                        (block.ffn.lin1, block.ffn.approximate), (block.ffn.lin2, None)):
            # inputs as the model feeds them: bf16 between bf16 kernels, so no cast per call
            x = torch.randn(1, T, m.in_features, dtype=torch.bfloat16 if bf16 else torch.float32)
            if plain:
                w, b = torch.randn_like(m.weight) * 0.02, torch.zeros_like(m.bias)
                calls.append(lambda x=x, w=w, b=b: F.linear(x, w, b))
            else:
                calls.append(_packed_kernel(m.in_features, m.out_features, bf16, x, gelu, m.fp32_onednn))
    return best_ms(lambda: [c() for c in calls], reps=max(10, REPS // 4))


def _packed_kernel(n_in: int, n_out: int, bf16: bool, x, gelu=None, onednn: bool = True):
    """A random Linear of this shape, packed as the model's are; x -> its kernel(x)."""
    with torch.inference_mode(False):      # packing checks weight versions: normal tensors
        lin = Linear(n_in, n_out).requires_grad_(False)
        pack_for_cpu_inference(torch.nn.Sequential(lin), bf16=bf16, tune=False)
    lin.fp32_onednn = onednn
    kernel = lin.cpu_kernel(bf16, gelu)
    return lambda: kernel(x)


def anatomy(T: int, precision: str, session):
    backend = get_backend("minilm", "scratch", precision=precision)
    bf16 = backend.precision == "bf16"
    ids = torch.randint(1000, 20000, (1, T))
    mask = torch.ones(1, T, dtype=torch.long)
    rows = {}
    with torch.inference_mode(), autocast(backend.device, backend.precision):
        rows["forward"] = best_ms(lambda: backend.packed(ids, mask))
        timer = InPlaceTimer(backend, bf16)
        try:
            for _ in range(10):
                timer.packed(ids, mask)
            n = REPS * 3
            timer.seconds.update(gemm=0.0, attention=0.0)
            t = time.perf_counter()
            for _ in range(n):
                timer.packed(ids, mask)
            total = (time.perf_counter() - t) / n * 1e3
            gemm, att = (timer.seconds[p] / n * 1e3 for p in ("gemm", "attention"))
        finally:
            timer.close()
        rows["GEMMs in place"], rows["attention"], rows["rest"] = gemm, att, total - gemm - att
        stub = PackedEncoder(backend.encoder)
        # ready outputs in the dtype the kernels give (bf16 ones return bf16)
        dtype = torch.bfloat16 if bf16 else torch.float32
        ready = {w: torch.randn(1, T, w, dtype=dtype) for w in (stub.layers[0].ffn.lin1.out_features,
                                                                stub.attentions[0].fused_qkv.out_features,
                                                                stub.attentions[0].out_lin.out_features)}
        stubs = [tuple((lambda x, y=ready[m.out_features]: y) for m in (a.fused_qkv, a.out_lin, b.ffn.lin1, b.ffn.lin2))
                 for a, b in zip(stub.attentions, stub.layers)]
        stub.kernels = lambda _bf16: stubs
        rows["without GEMMs"] = best_ms(lambda: stub(ids, mask))
        rows["GEMMs alone (model's kernel)"] = gemm_chain(stub, bf16, T, plain=False)
        if not bf16:
            rows["GEMMs alone (MKL F.linear)"] = gemm_chain(stub, bf16, T, plain=True)
        n_gemms = 4 * len(stub.layers)
        tiny = _packed_kernel(32, 32, bf16, torch.randn(1, 8, 32, dtype=dtype))
        rows[f"set-up per GEMM x {n_gemms}"] = best_ms(tiny, reps=2000) * n_gemms
    if session is not None:
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        rows["onnxruntime forward (fp32)"] = best_ms(lambda: session.run(None, feed))
    return backend.precision, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, nargs="+", default=[8, 24])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "auto", "bf16"])
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        session = onnx_session(get_backend("minilm", "scratch", precision="fp32"), torch.get_num_threads())
    except ImportError:
        print("onnxruntime not installed (pip install 'encoderscope[bench]'): no peer row")
        session = None
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; ms per call, best of {ROUNDS}")
    for T in args.tokens:
        precision, rows = anatomy(T, args.precision, session)
        fwd = rows["forward"]
        print(f"\n{T} tokens, ours {precision}:")
        for name, ms in rows.items():
            print(f"  {name:<34} {ms:7.3f} ms  {ms / fwd:6.1%} of the forward")
        if session is not None:
            print(f"  onnxruntime / ours: {rows['onnxruntime forward (fp32)'] / fwd:.2f}")


if __name__ == "__main__":
    main()
