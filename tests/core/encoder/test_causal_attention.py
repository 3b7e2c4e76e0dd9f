"""The causal attention mask: each token sees itself and the tokens before it, in every path
of the encoder (modules, fused and explicit attention, the packed CPU path), in the NumPy
reference, and in the walkthrough's masked-scores step."""
import numpy as np
import pytest
import torch

from core.encoder.model import Encoder, EncoderConfig, EncoderForMaskedLM
from core.encoder.packed_forward import PackedEncoder, pack_for_cpu_inference
from core.walkthrough import numpy_ref
from tests.core.encoder.test_parts import randomised, small_config
from tests.support.bf16 import needs_cpu_bf16


def causal_model(seed=0, **kw):
    return randomised(Encoder(small_config(attention="causal", **kw)), seed=seed)


def test_config_validates_and_defaults_to_bidirectional():
    assert EncoderConfig().attention == "bidirectional"
    with pytest.raises(ValueError, match="attention must be 'bidirectional' or 'causal'"):
        EncoderConfig(attention="left-to-right")
    # An older checkpoint's config has no "attention": it loads as it always did.
    old = {k: v for k, v in EncoderConfig().to_dict().items() if k not in ("attention", "pooling")}
    assert EncoderConfig.from_dict(old).attention == "bidirectional"


@pytest.mark.parametrize("need_weights", [False, True])     # fused kernel / explicit path
@pytest.mark.parametrize("norm", ["post", "pre"])
def test_a_token_does_not_see_later_tokens(norm, need_weights):
    """Perturbation: change tokens after position t, outputs at 0..t stay exactly; the tokens
    from the change on move (the check can fail, and the bidirectional model does fail it)."""
    model = causal_model(norm=norm)
    ids = torch.tensor([[2, 11, 12, 13, 14, 15, 3]])
    changed = ids.clone()
    changed[0, 4:6] = torch.tensor([40, 41])
    with torch.no_grad():
        a = model(ids, torch.ones_like(ids), output_attentions=need_weights).last_hidden_state
        b = model(changed, torch.ones_like(ids), output_attentions=need_weights).last_hidden_state
    assert torch.allclose(a[0, :4], b[0, :4], atol=1e-6)
    assert (a[0, 4:] - b[0, 4:]).abs().max() > 1e-3
    bidirectional = randomised(Encoder(small_config(norm=norm)))
    with torch.no_grad():
        a = bidirectional(ids).last_hidden_state
        b = bidirectional(changed).last_hidden_state
    assert (a[0, :4] - b[0, :4]).abs().max() > 1e-3


def test_attention_weights_are_zero_above_the_diagonal_and_padding():
    model = causal_model()
    ids = torch.tensor([[2, 11, 12, 13, 3], [2, 21, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        att = model(ids, mask, output_attentions=True).attentions
    for w in att:
        assert torch.all(w.triu(1) == 0)
        assert torch.all(w[1, :, :, 3:] == 0)                      # padding keys
        assert torch.allclose(w.sum(-1), torch.ones_like(w.sum(-1)))


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_numpy_reference_equals_torch_under_the_causal_mask(norm):
    cfg = small_config(norm=norm, attention="causal", type_vocab_size=2)
    model = randomised(Encoder(cfg), seed=3)
    ids = torch.tensor([[2, 11, 12, 13, 14, 3], [2, 21, 22, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        out = model(ids, mask, output_hidden_states=True, output_attentions=True)
    p = numpy_ref.params_from_torch(model)
    for b in range(2):
        keep = mask[b].numpy().astype(bool)
        # the padded row as it is (padding keys masked by keep) and cut to its real tokens
        last, hidden, att = numpy_ref.forward(p, cfg, ids[b].numpy(), keep)
        n = keep.sum()
        np.testing.assert_allclose(last[:n], out.last_hidden_state[b, :n].numpy(), atol=1e-5)
        for layer in range(cfg.n_layers):
            np.testing.assert_allclose(att[layer][:, :n], out.attentions[layer][b, :, :n].numpy(), atol=1e-5)
        cut, _, _ = numpy_ref.forward(p, cfg, ids[b, :n].numpy())
        np.testing.assert_allclose(cut, out.last_hidden_state[b, :n].numpy(), atol=1e-5)


def test_numpy_causal_mask_is_the_lower_triangle():
    m = numpy_ref.causal_mask(4)
    assert m.dtype == bool
    assert m.tolist() == [[True, False, False, False], [True, True, False, False],
                          [True, True, True, False], [True, True, True, True]]
    keep = np.array([True, True, True, False])
    both = numpy_ref.attention_keep(keep, causal=True)
    assert not both[:, 3].any() and both[3, :3].all()
    assert numpy_ref.attention_keep(keep, causal=False) is keep


@pytest.mark.parametrize("bf16", [False, pytest.param(True, marks=needs_cpu_bf16)])
def test_packed_cpu_path_keeps_the_causal_mask(bf16):
    """The fast path embed() takes equals the modules on a causal model (padded batch)."""
    model = causal_model(seed=5)
    if not pack_for_cpu_inference(model, bf16=bf16, tune=False):
        pytest.skip("oneDNN is not available")
    packed = PackedEncoder(model)
    ids = torch.tensor([[2, 11, 12, 13, 14, 3], [2, 21, 22, 3, 0, 0]])
    mask = (ids != 0).long()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        assert packed.usable(ids)
        fast = packed(ids, mask).float()
        slow = model(ids, mask).last_hidden_state.float()
    tol = 3e-2 if bf16 else 1e-5
    assert torch.allclose(fast[0], slow[0], atol=tol)
    assert torch.allclose(fast[1, :4], slow[1, :4], atol=tol)
    with torch.inference_mode():       # and it is causal: the bidirectional packed path differs
        model.config.attention = "bidirectional"
        other = packed(ids, mask)
        model.config.attention = "causal"
    if not bf16:
        assert (other[0, :3] - fast[0, :3]).abs().max() > 1e-3


def test_mlm_head_model_round_trips_the_setting(tmp_path):
    from core.encoder.weights import load_folder, save_checkpoint
    cfg = small_config(attention="causal")
    model = randomised(EncoderForMaskedLM(cfg))
    save_checkpoint(model, None, tmp_path)
    loaded, cfg2, _ = load_folder(tmp_path)
    assert cfg2.attention == "causal"
    ids = torch.tensor([[2, 11, 12, 13, 3]])
    with torch.no_grad():
        assert torch.equal(model(ids)[0], loaded(ids)[0])
