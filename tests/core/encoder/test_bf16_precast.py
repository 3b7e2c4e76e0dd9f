"""bf16 with the weights cast once (core.encoder.packed_forward.cast_for_inference, the GPU's path,
run here on the CPU without oneDNN) gives autocast's vectors: cosine >= the bound check_bf16
holds a model to (BF16_MIN_COSINE) against autocast and against fp32, with LayerNorm, softmax
and pooling in fp32. Pinned to the CPU and bf16; skipped where the CPU has no bf16."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.backends.base import BF16_CHECK_SENTENCES, BF16_MIN_COSINE
from core.encoder.kernels import Linear
from core.encoder.packed_forward import PackedEncoder, cast_for_inference
from core.encoder.pooling import l2_normalize, pool
from core.encoder.weights import load_folder
from tests.support.bf16 import needs_cpu_bf16

pytestmark = needs_cpu_bf16

MORE = [f"{s} {t}" for s, t in zip(BF16_CHECK_SENTENCES, reversed(BF16_CHECK_SENTENCES))]


def encoder():
    model, _, _ = load_folder(get_backend("minilm", "scratch", precision="fp32", device="cpu").source.folder)
    enc = (model.distilbert if hasattr(model, "head") else model).eval()
    return enc


def vectors(run, texts):
    b = get_backend("minilm", "scratch", precision="fp32", device="cpu")
    ids, _ = b.encode_ids(texts)
    input_ids, mask = b._batch(ids)
    with torch.inference_mode():
        return l2_normalize(pool(run(input_ids, mask).float(), mask, "mean")).numpy()


@pytest.mark.parametrize("texts", [BF16_CHECK_SENTENCES, BF16_CHECK_SENTENCES * 5 + MORE],
                         ids=["8 rows", "48 rows"])   # 48 rows: the CPU's explicit bf16 attention
def test_weights_cast_once_match_autocast_and_fp32(texts):
    plain = encoder()
    precast = encoder()
    cast_for_inference(precast, bf16=True)
    linears = [m for m in precast.modules() if isinstance(m, Linear)]
    assert linears and all(m.cast_bf16[0].dtype == torch.bfloat16 and m.weight.dtype == torch.float32
                           for m in linears)
    packed = PackedEncoder(precast)

    def autocast_run(ids, mask):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return plain(ids, mask).last_hidden_state

    def precast_run(ids, mask):
        assert packed.usable(ids)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return packed(ids, mask)

    fp32 = vectors(lambda ids, mask: plain(ids, mask).last_hidden_state, texts)
    auto = vectors(autocast_run, texts)
    once = vectors(precast_run, texts)
    assert (once * auto).sum(1).min() >= BF16_MIN_COSINE
    assert (once * fp32).sum(1).min() >= BF16_MIN_COSINE
    assert np.abs(once - fp32).max() > 1e-5          # it did run in bf16
    # without autocast the same object runs fp32, and gives the fp32 vectors
    np.testing.assert_allclose(vectors(packed, texts), fp32, atol=2e-5)


def test_a_weight_changed_after_the_cast_is_not_run_stale():
    enc = encoder()
    cast_for_inference(enc, bf16=True)
    packed = PackedEncoder(enc)
    ids = torch.tensor([[101, 2023, 2003, 102]])
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert packed.usable(ids)
    with torch.no_grad():
        enc.transformer.layer[0].ffn.lin1.weight.mul_(2)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert not packed.usable(ids)
