"""CPU fast paths (core/encoder/packed_forward.py pack_for_cpu_inference) give the hand-written path's numbers:
oneDNN-packed weights, the fused GELU and the fused Q/K/V projection, each within 1e-5."""
from __future__ import annotations

import pytest
import torch

from core.encoder import kernels as kernels_mod
from core.encoder import model as model_mod
from core.encoder.backends import get_backend
from core.encoder.packed_forward import pack_for_cpu_inference
from tests.support.bf16 import needs_cpu_bf16

TEXTS = ["The cat sat on the mat.", "A quick brown fox jumps over the lazy dog near the river bank.",
         "Where is the nearest train station?", "ok"] * 8


def _batch(b):
    ids, _ = b.encode_ids(TEXTS)
    return b._batch(ids)


def test_packed_model_matches_the_plain_model(minilm):
    from core.encoder.weights import load_folder
    model, _, _ = load_folder(minilm.source.folder)       # fresh: the hand-written path only
    plain = (model.distilbert if hasattr(model, "head") else model).eval()
    assert all(m.packed is None for m in plain.modules() if isinstance(m, model_mod.Linear))
    input_ids, mask = _batch(minilm)
    with torch.inference_mode():
        fast = minilm.encoder(input_ids, mask).last_hidden_state
        ref = plain(input_ids, mask).last_hidden_state
    keep = mask.bool()
    assert (fast - ref)[keep].abs().max().item() <= 1e-5


def test_fused_qkv_is_used_and_equals_three_projections(minilm, monkeypatch):
    att = minilm.encoder.transformer.layer[0].attention
    assert att.fused_qkv is not None
    # its own generator: the global stream depends on which tests ran before
    x = torch.randn(4, 32, minilm.dim, generator=torch.Generator().manual_seed(0))
    calls = []
    original = att.fused_qkv.forward
    monkeypatch.setattr(att.fused_qkv, "forward", lambda *a, **k: calls.append(1) or original(*a, **k))
    with torch.inference_mode():
        q, k, v = att.project_qkv(x)
        separate = (att.q_lin(x), att.k_lin(x), att.v_lin(x))
        att.project_qkv(x[:1, :8])                     # one short sentence: fused as well
    assert calls == [1, 1]
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


def test_a_batch_without_padding_runs_without_a_mask(minilm, monkeypatch):
    """One sentence (or all of one length): the all-ones mask is dropped, and with it the work
    of adding zeros; a mask of zeros and no mask give the same block output."""
    seen = []
    real = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(model_mod.F, "scaled_dot_product_attention",
                        lambda q, k, v, attn_mask=None, dropout_p=0.0:
                        seen.append(attn_mask) or real(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p))
    ids, _ = minilm.encode_ids(["The cat sat on the mat."])
    with torch.inference_mode():
        minilm.encoder(*minilm._batch(ids))
        assert len(seen) == minilm.n_layers and all(m is None for m in seen)
        seen.clear()
        minilm.encoder(*minilm._batch(minilm.encode_ids(["ok", "The cat sat on the mat."])[0]))
        assert len(seen) == minilm.n_layers and all(m is not None for m in seen)   # padded: masked
        block = minilm.encoder.transformer.layer[0]
        x = torch.randn(1, 7, minilm.dim)
        zeros = model_mod.additive_mask(torch.ones(1, 7, dtype=torch.long), x.dtype)
        assert (block(x, zeros)[0] - block(x, None)[0]).abs().max().item() <= 1e-6


def test_the_encoder_exports_with_one_graph_for_padded_and_unpadded_batches():
    """torch.export (the first step of the ONNX export in bench/encoder_throughput.py) cannot
    follow the 'no padding, no mask' shortcut, which depends on the data: while tracing the mask
    is kept, so one exported graph serves both kinds of batch with the eager model's numbers."""
    cfg = model_mod.EncoderConfig(vocab_size=50, dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                  dropout=0.0, attention_dropout=0.0)
    enc = model_mod.Encoder(cfg).eval()

    class LastHidden(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = enc

        def forward(self, ids, mask):
            return self.enc(ids, mask).last_hidden_state

    b, t = torch.export.Dim("b", min=1, max=64), torch.export.Dim("t", min=2, max=64)
    ids = torch.ones(2, 8, dtype=torch.long)
    exported = torch.export.export(LastHidden(), (ids, torch.ones_like(ids)),
                                   dynamic_shapes={"ids": {0: b, 1: t}, "mask": {0: b, 1: t}}).module()
    torch.manual_seed(0)
    padded_ids = torch.randint(1, 50, (3, 11))
    padded = torch.ones(3, 11, dtype=torch.long)
    padded[1, 6:] = 0
    with torch.inference_mode():
        for x, m in ((padded_ids, padded), (padded_ids[:, :9], torch.ones(3, 9, dtype=torch.long))):
            got, want = exported(x, m), enc(x, m).last_hidden_state
            keep = m.bool()
            assert (got - want)[keep].abs().max().item() <= 1e-5
        # the padded row's tokens do not see its padding in the exported graph either
        alone = exported(padded_ids[1:2, :6], torch.ones(1, 6, dtype=torch.long))
        assert (exported(padded_ids, padded)[1, :6] - alone[0]).abs().max().item() <= 1e-5


@needs_cpu_bf16
def test_bf16_attention_on_cpu_stays_within_bf16_rounding_of_fp32(minilm):
    """bf16 on a CPU computes attention in the open (faster there than the fused kernel) with its
    softmax in fp32: the result stays within bf16's rounding of the fp32 one, padding masked."""
    from core.device import autocast
    att = minilm.encoder.transformer.layer[0].attention
    x = torch.randn(2, 12, minilm.dim)
    keep = torch.ones(2, 12, dtype=torch.long)
    keep[1, 9:] = 0
    mask = model_mod.additive_mask(keep, x.dtype)
    with torch.inference_mode():
        ref, _ = att(x, mask)
        with autocast(torch.device("cpu"), "bf16"):
            low, w = att(x, mask)
    assert w is None
    rel = ((low.float() - ref).norm() / ref.norm()).item()
    assert rel < 2e-2
    bf16 = get_backend("minilm", precision="bf16", device="cpu")
    cos = (bf16.embed(TEXTS) * minilm.embed(TEXTS)).sum(1)
    assert cos.min() >= 0.9999


@pytest.mark.parametrize("spec", [None, "random:dim=64,layers=2,heads=4,ffn=128,norm=pre,positions=sinusoidal"])
def test_packed_encoder_gives_the_modules_numbers(minilm, spec):
    """core/encoder/packed_forward.py runs the same operations on the same packed weights as the modules:
    post-norm with token types (minilm) and pre-norm with sinusoidal positions, padded and not."""
    b = minilm if spec is None else get_backend(spec, precision="fp32", device="cpu")
    assert b.packed is not None
    batches = [b._batch(b.encode_ids(TEXTS)[0]), b._batch(b.encode_ids(["The cat sat on the mat."])[0])]
    with torch.inference_mode():
        for input_ids, mask in batches:
            ref = b.encoder(input_ids, mask).last_hidden_state
            assert b.packed.usable(input_ids)
            fast = b.packed(input_ids, mask)
            keep = mask.bool()
            assert (fast - ref)[keep].abs().max().item() <= 1e-5
        types = torch.zeros_like(batches[1][0])
        types[0, -3:] = 1
        ref = b.encoder(*batches[1], token_type_ids=types).last_hidden_state
        assert (b.packed(*batches[1], token_type_ids=types) - ref).abs().max().item() <= 1e-5


def test_embed_runs_the_packed_encoder_and_hooks_send_it_back_to_the_modules(minilm, monkeypatch):
    calls = []
    real = type(minilm.packed).__call__
    monkeypatch.setattr(type(minilm.packed), "__call__", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    v = minilm.embed(["The cat sat on the mat."])
    assert calls == [1]
    seen = []
    handle = minilm.encoder.transformer.layer[1].ffn.lin1.register_forward_hook(lambda m, i, o: seen.append(o.shape))
    try:
        w = minilm.embed(["The cat sat on the mat."])
    finally:
        handle.remove()
    assert calls == [1] and len(seen) == 1          # the hook ran: the modules did the work
    assert abs(float((v * w).sum()) - 1.0) <= 1e-6
    with torch.no_grad():
        assert minilm.packed.usable(torch.ones(1, 3, dtype=torch.long))
    assert not minilm.packed.usable(torch.ones(1, 3, dtype=torch.long))   # gradients on: modules
    minilm.encoder.train()
    try:
        with torch.no_grad():
            assert not minilm.packed.usable(torch.ones(1, 3, dtype=torch.long))
    finally:
        minilm.encoder.eval()


@needs_cpu_bf16
def test_packed_encoder_under_bf16_autocast_matches_the_modules():
    from core.device import autocast
    b = get_backend("minilm", precision="bf16", device="cpu")
    # A batch (explicit attention), one sentence and two short padded ones (the fused kernel)
    batches = [b._batch(b.encode_ids(TEXTS)[0]), b._batch(b.encode_ids(TEXTS[:1])[0]),
               b._batch(b.encode_ids(["Cats purr.", "The dog barked at the mailman."])[0])]
    assert batches[2][1].numel() <= kernels_mod.FUSED_BF16_MAX_ROWS and not batches[2][1].all()
    for input_ids, mask in batches:
        with torch.inference_mode(), autocast(b.device, "bf16"):
            assert b.packed.usable(input_ids)
            ref = b.encoder(input_ids, mask).last_hidden_state
            fast = b.packed(input_ids, mask)
        assert fast.dtype == ref.dtype
        keep = mask.bool()
        assert (fast.float() - ref.float())[keep].abs().max().item() <= 1e-5


def test_packed_encoder_steps_aside_once_a_weight_changes():
    """Kernels are bound once per weight and bias version: a weight or a bias changed in place
    after packing (a state_dict loaded, a training step) sends the call to the modules, whose
    plain path uses the new values, until the model is packed again."""
    b = get_backend("random:dim=64,layers=2,heads=4,ffn=128", precision="fp32", device="cpu")
    input_ids, mask = b._batch(b.encode_ids(TEXTS[:4])[0])
    with torch.inference_mode():
        assert b.packed.usable(input_ids)
        before = b.packed(input_ids, mask)
    lin2 = b.encoder.transformer.layer[1].ffn.lin2
    with torch.no_grad():
        lin2.weight.mul_(2.0)
    with torch.inference_mode():
        assert not b.packed.usable(input_ids)
        hidden, _, _ = b._forward(input_ids, mask, None)
        ref = b.encoder(input_ids, mask).last_hidden_state
        assert lin2.cpu_kernel(bf16=False) is None
    assert (hidden - ref).abs().max().item() == 0
    assert (hidden - before).abs().max().item() > 1e-3     # the new weight is the one used
    assert pack_for_cpu_inference(b.model, tune=False)
    with torch.inference_mode():
        assert b.packed.usable(input_ids)
        keep = mask.bool()                  # the packed path leaves padding at 0
        assert (b.packed(input_ids, mask) - ref)[keep].abs().max().item() <= 1e-5
    # A bias alone changed (the fused Q/K/V holds a copy of it) counts as well.
    q_lin = b.encoder.transformer.layer[0].attention.q_lin
    with torch.no_grad():
        q_lin.bias.add_(0.5)
    with torch.inference_mode():
        assert not b.packed.usable(input_ids)
        with pytest.raises(RuntimeError, match="changed since they were packed"):
            b.packed(input_ids, mask)
        hidden, _, _ = b._forward(input_ids, mask, None)
        assert (hidden - b.encoder(input_ids, mask).last_hidden_state).abs().max().item() == 0
        assert (hidden - ref).abs().max().item() > 1e-3



def _plain_weights(q, k, mask):
    scores = (q @ k.transpose(-2, -1)).float() / q.shape[-1] ** 0.5
    return (scores if mask is None else scores + mask).softmax(dim=-1)


@pytest.mark.parametrize("n_tokens", [1, 2, 9, 15, 16, 17])
@pytest.mark.parametrize("masking", ["none", "padding", "causal"])
def test_bf16_attention_over_few_keys_pads_them_and_keeps_the_weights(n_tokens, masking, monkeypatch):
    """On a CPU in bf16, fewer than 16 keys are padded with masked keys for the softmax (torch's
    CPU softmax takes a scalar path below 16): the weights (B, H, T, T) are torch's softmax of the
    same bf16 scores to fp32 rounding, masked keys exactly 0; fp32 takes no padding and gives
    torch's softmax bit for bit."""
    g = torch.Generator().manual_seed(n_tokens)
    q, k = (torch.randn(2, 3, n_tokens, 8, generator=g) * 2 for _ in range(2))
    keep = torch.ones(2, n_tokens, dtype=torch.long)
    keep[1, max(1, n_tokens - 3):] = 0
    mask = {"none": None, "padding": model_mod.additive_mask(keep, torch.float32),
            "causal": model_mod.attention_bias(keep, n_tokens, torch.float32, None, causal=True)}[masking]
    padded = []
    real = model_mod.pad_keys
    monkeypatch.setattr(model_mod, "pad_keys", lambda m, pad, *a: padded.append(pad) or real(m, pad, *a))
    w32 = model_mod.MultiHeadSelfAttention.attention_weights(q, k, mask)
    assert padded == [] and torch.equal(w32, _plain_weights(q, k, mask))
    qb, kb = q.bfloat16(), k.bfloat16()
    wb = model_mod.MultiHeadSelfAttention.attention_weights(qb, kb, mask)
    assert padded == ([16 - n_tokens] if n_tokens < 16 else [])
    want = _plain_weights(qb, kb, mask)
    assert wb.shape == want.shape == (2, 3, n_tokens, n_tokens) and wb.dtype == torch.float32
    assert (wb - want).abs().max().item() <= 1e-6
    assert torch.allclose(wb.sum(-1), torch.ones(2, 3, n_tokens))
    if mask is not None:
        assert (wb[mask.expand_as(wb) < 0] == 0).all()


@pytest.mark.parametrize("spec,precision", [
    (None, "fp32"), pytest.param(None, "bf16", marks=needs_cpu_bf16),
    ("random:dim=32,layers=2,heads=2,ffn=64,attention=causal,norm=pre", "fp32")])
def test_packed_encoder_runs_token_wise_steps_on_real_tokens_only(minilm, spec, precision, monkeypatch):
    """A padded batch runs its Linears, GELUs and LayerNorms on the real tokens only (N rows, not
    B x T): every real token's vector is bit for bit the one of the padded computation, the
    padding comes back at 0, and a batch without padding is left as it is."""
    from core.device import autocast
    from core.encoder import packed_forward
    b = minilm if spec is None and precision == "fp32" else get_backend(spec or "minilm", precision=precision,
                                                                         device="cpu")
    input_ids, mask = _batch(b)
    assert not mask.all()
    rows = []
    real = packed_forward.real_tokens
    monkeypatch.setattr(packed_forward, "real_tokens", lambda m: rows.append(1) or real(m))
    with torch.inference_mode(), autocast(b.device, precision):
        unpadded = b.packed(input_ids, mask)
        assert rows == [1]
        b.packed(input_ids[:1, :5], None)           # nothing padded: nothing to leave out
        assert rows == [1]
        monkeypatch.setattr(packed_forward, "real_tokens", lambda m: None)
        padded = b.packed(input_ids, mask)
    keep = mask.bool()
    assert torch.equal(unpadded[keep], padded[keep])
    assert (unpadded[~keep] == 0).all() and not (padded[~keep] == 0).all()
