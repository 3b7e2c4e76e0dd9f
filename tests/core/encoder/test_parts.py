"""The pieces of the encoder against closed forms and against the NumPy reference."""
import math

import numpy as np
import pytest
import torch

from core.encoder.model import Encoder, EncoderConfig, sinusoidal_table
from core.encoder.pooling import l2_normalize, pool
from core.walkthrough import numpy_ref


def small_config(**kw):
    base = dict(vocab_size=60, max_position_embeddings=32, dim=24, n_layers=2, n_heads=3, hidden_dim=48,
                dropout=0.0, attention_dropout=0.0)
    base.update(kw)
    return EncoderConfig(**base)


def randomised(model, seed=0):
    """Fresh models have identity LayerNorms and zero biases; shake every parameter."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model.eval()


def test_sinusoidal_matches_closed_form():
    table = sinusoidal_table(50, 16).numpy()
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    model = Encoder(small_config(positions="sinusoidal"))
    assert not model.embeddings.position_embeddings.weight.requires_grad
    assert torch.allclose(model.embeddings.position_embeddings.weight, sinusoidal_table(32, 24))


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
@pytest.mark.parametrize("activation", ["gelu", "gelu_tanh"])
def test_numpy_reference_equals_torch(norm, positions, activation):
    cfg = small_config(norm=norm, positions=positions, activation=activation, type_vocab_size=2)
    model = randomised(Encoder(cfg), seed=hash((norm, positions, activation)) % 1000)
    ids = torch.tensor([[2, 11, 12, 13, 14, 3], [2, 21, 3, 0, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = model(ids, mask, output_hidden_states=True, output_attentions=True)
    p = numpy_ref.params_from_torch(model)
    for b in range(2):
        keep = mask[b].numpy().astype(bool)
        n = keep.sum()
        last, hidden, att = numpy_ref.forward(p, cfg, ids[b, :n].numpy())
        np.testing.assert_allclose(last, out.last_hidden_state[b, :n].numpy(), atol=1e-5)
        for layer in range(cfg.n_layers):
            np.testing.assert_allclose(hidden[layer + 1], out.hidden_states[layer + 1][b, :n].numpy(), atol=1e-5)
            np.testing.assert_allclose(att[layer], out.attentions[layer][b, :, :n, :n].numpy(), atol=1e-5)
            # padded keys get exactly zero weight
            if n < ids.shape[1]:
                assert out.attentions[layer][b, :, :, n:].abs().max().item() == 0.0
        pooled = pool(out.last_hidden_state[b:b + 1], mask[b:b + 1], "mean")
        np.testing.assert_allclose(numpy_ref.mean_pool(last, np.ones(n, bool)),
                                   l2_normalize(pooled)[0].numpy(), atol=1e-5)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_fused_and_explicit_attention_agree(norm):
    model = randomised(Encoder(small_config(norm=norm)), seed=5)
    ids = torch.randint(5, 60, (3, 9))
    mask = torch.ones_like(ids)
    mask[0, 4:] = 0
    with torch.no_grad():
        fused = model(ids, mask).last_hidden_state                       # scaled_dot_product_attention
        explicit = model(ids, mask, output_attentions=True).last_hidden_state
    assert torch.allclose(fused[mask.bool()], explicit[mask.bool()], atol=1e-5)


def test_mean_pooling_ignores_padding():
    model = randomised(Encoder(small_config()), seed=2)
    alone = torch.tensor([[2, 11, 12, 3]])
    padded = torch.tensor([[2, 11, 12, 3, 0, 0, 0], [2, 30, 31, 32, 33, 34, 3]])
    with torch.no_grad():
        a = pool(model(alone, torch.ones_like(alone)).last_hidden_state, torch.ones_like(alone), "mean")
        mask = (padded != 0).long()
        b = pool(model(padded, mask).last_hidden_state, mask, "mean")
    assert torch.allclose(a[0], b[0], atol=1e-5)


def test_pooling_variants():
    h = torch.tensor([[[1.0, 0.0], [3.0, 4.0], [100.0, 100.0]]])   # third token is padding
    m = torch.tensor([[1, 1, 0]])
    assert torch.equal(pool(h, m, "cls"), torch.tensor([[1.0, 0.0]]))
    assert torch.equal(pool(h, m, "mean"), torch.tensor([[2.0, 2.0]]))
    assert torch.equal(pool(h, m, "max"), torch.tensor([[3.0, 4.0]]))
    special = torch.tensor([[1, 0, 0]])
    assert torch.equal(pool(h, m, "mean", special), torch.tensor([[3.0, 4.0]]))
    assert torch.allclose(l2_normalize(torch.tensor([[3.0, 4.0]])), torch.tensor([[0.6, 0.8]]))


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="divisible"):
        EncoderConfig(dim=10, n_heads=3)
    with pytest.raises(ValueError, match="norm"):
        EncoderConfig(norm="sandwich")


def test_onednn_inference_path_equals_plain_path():
    from core.encoder.kernels import Linear
    from core.encoder.model import EncoderForMaskedLM
    from core.encoder.packed_forward import pack_for_cpu_inference
    model = randomised(EncoderForMaskedLM(small_config(activation="gelu_tanh")), seed=9)
    ids = torch.randint(5, 60, (2, 7))
    mask = torch.ones_like(ids)
    with torch.inference_mode():
        plain_logits, plain = model(ids, mask)
    if not pack_for_cpu_inference(model):
        pytest.skip("this torch has no oneDNN")
    linears = [m for m in model.modules() if isinstance(m, Linear)]
    assert all(m.packed is not None for m in linears)
    with torch.inference_mode():
        tuned_logits, tuned = model(ids, mask)       # each shape on its faster fp32 kernel
    for m in linears:
        m.fp32_onednn = True                          # every Linear through oneDNN
    with torch.inference_mode():
        fast_logits, fast = model(ids, mask)
    for out in (tuned, fast):
        assert torch.allclose(plain.last_hidden_state, out.last_hidden_state, atol=1e-5)
    for logits in (tuned_logits, fast_logits):
        assert torch.allclose(plain_logits, logits, atol=1e-4)
    # Training still gets gradients (the plain path), and a changed weight is never served stale.
    logits, _ = model(ids, mask)
    logits.sum().backward()
    assert model.distilbert.transformer.layer[0].ffn.lin1.weight.grad is not None
    with torch.no_grad():
        model.distilbert.transformer.layer[0].ffn.lin1.weight.mul_(2.0)
    with torch.inference_mode():
        changed = model(ids, mask)[1].last_hidden_state
    model.distilbert.transformer.layer[0].ffn.lin1.packed = None
    with torch.inference_mode():
        expected = model(ids, mask)[1].last_hidden_state
    assert torch.allclose(changed, expected, atol=1e-6)
