"""CPU fast paths (core/model.py pack_for_cpu_inference) give the hand-written path's numbers:
oneDNN-packed weights, the fused GELU and the fused Q/K/V projection, each within 1e-5."""
from __future__ import annotations

import pytest
import torch

from core import model as model_mod
from core.backend import get_backend
from core.model import pack_for_cpu_inference

TEXTS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog near the river bank.",
         "Where is the nearest train station?", "ok"] * 8


@pytest.fixture(scope="module")
def minilm():
    return get_backend("minilm", precision="fp32", device="cpu")


def _batch(b):
    ids, _ = b.encode_ids(TEXTS)
    return b._batch(ids)


def test_packed_model_matches_the_plain_model(minilm):
    from core.weights import load_folder
    model, _, _ = load_folder(minilm.source.folder)       # fresh: the hand-written path only
    plain = (model.distilbert if hasattr(model, "head") else model).eval()
    assert all(m.packed is None for m in plain.modules() if isinstance(m, model_mod.Linear))
    input_ids, mask = _batch(minilm)
    assert input_ids.numel() >= model_mod.FUSED_QKV_MIN_TOKENS          # the fused Q/K/V path runs
    with torch.inference_mode():
        fast = minilm.encoder(input_ids, mask).last_hidden_state
        ref = plain(input_ids, mask).last_hidden_state
    keep = mask.bool()
    assert (fast - ref)[keep].abs().max().item() <= 1e-5


def test_fused_qkv_is_used_and_equals_three_projections(minilm, monkeypatch):
    att = minilm.encoder.transformer.layer[0].attention
    assert att.fused_qkv is not None
    x = torch.randn(4, 32, minilm.dim)
    calls = []
    original = att.fused_qkv.forward
    monkeypatch.setattr(att.fused_qkv, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    with torch.inference_mode():
        q, k, v = att.project_qkv(x)
        separate = (att.q_lin(x), att.k_lin(x), att.v_lin(x))
        att.project_qkv(x[:1, :8])                     # 8 tokens: below the threshold, three GEMMs
    assert calls == [1]
    for a, b in zip((q, k, v), separate):
        assert (a - b).abs().max().item() <= 1e-5


def test_fused_qkv_steps_aside_once_the_weights_change():
    cfg = model_mod.EncoderConfig(vocab_size=50, dim=32, n_layers=1, n_heads=4, hidden_dim=64,
                                  dropout=0.0, attention_dropout=0.0)
    enc = model_mod.Encoder(cfg).eval()
    assert pack_for_cpu_inference(enc, tune=False)
    att = enc.transformer.layer[0].attention
    with torch.no_grad():
        att.k_lin.weight.add_(1.0)                     # trained further after packing
    x = torch.randn(2, 64, 32)
    with torch.inference_mode():
        q, k, v = att.project_qkv(x)
        expected = torch.nn.functional.linear(x, att.k_lin.weight, att.k_lin.bias)
    assert (k - expected).abs().max().item() <= 1e-5
