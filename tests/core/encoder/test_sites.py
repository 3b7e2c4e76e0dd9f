"""The sites table and the model's seams against the plain forward and plain torch hooks."""
import threading

import pytest
import torch

from core.encoder import sites
from core.encoder.model import Encoder
from core.errors import InputError
from tests.core.encoder.test_parts import randomised, small_config


def model(**kw):
    torch.manual_seed(0)
    return randomised(Encoder(small_config(n_layers=3, **kw)))


IDS = torch.tensor([[5, 9, 17, 3, 22, 41]])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_seams_are_the_forward(norm):
    m = model(norm=norm)
    with torch.no_grad():
        out = m(IDS, output_hidden_states=True)
        x = m.embeddings.from_words(m.embeddings.words(IDS))
        assert torch.equal(x, out.hidden_states[0])
        bias = m.bias(torch.ones_like(IDS), x)
        for i, block in enumerate(m.transformer.layer):
            heads, _ = block.attention.heads(block.attention_input(x), bias)
            x = block.finish(x, block.attention.project(heads))
            assert torch.equal(x, out.hidden_states[i + 1])
        assert torch.equal(m.run_from(0, out.hidden_states[0], bias), out.last_hidden_state)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_capture_reads_what_the_forward_computes(norm):
    m = model(norm=norm)
    plain = {}
    att = m.transformer.layer[1].attention
    h = att.out_lin.register_forward_pre_hook(lambda mod, args: plain.__setitem__("heads", args[0].clone()))
    try:
        with torch.no_grad():
            ref = m(IDS, output_hidden_states=True)
    finally:
        h.remove()
    with torch.no_grad():       # the weights come from the explicit kernel: the pattern is compared to 1e-6
        weights = m(IDS, output_attentions=True).attentions
    with torch.no_grad(), sites.hooks(m) as at:
        got = {name: at.capture(name) for name in
               ("embed", "L1.resid_pre", "L2.resid", "L3.resid", "L2.heads", "L2.H3", "L2.pattern", "L2.attn")}
        m(IDS)
    assert torch.equal(got["embed"].value, ref.hidden_states[0])
    assert torch.equal(got["L1.resid_pre"].value, ref.hidden_states[0])
    assert torch.equal(got["L2.resid"].value, ref.hidden_states[2])
    assert torch.equal(got["L3.resid"].value, ref.hidden_states[3])
    assert torch.equal(got["L2.heads"].value, plain["heads"])
    dh = 24 // 3
    assert torch.equal(got["L2.H3"].value, plain["heads"][..., 2 * dh:3 * dh])
    torch.testing.assert_close(got["L2.pattern"].value, weights[1], rtol=0, atol=1e-6)
    assert torch.equal(got["L2.attn"].value, att.project(plain["heads"]))


def test_add_at_the_residual_is_run_from_there():
    m = model()
    direction = torch.randn(24)
    with torch.no_grad():
        clean = m(IDS, output_hidden_states=True)
        expected = m.run_from(2, clean.hidden_states[2] + direction, None)
        with sites.hooks(m) as at:
            seen = at.capture("L2.resid", prepend=True)
            at.add("L2.resid", direction)
            after = m(IDS).last_hidden_state
    assert torch.equal(seen.value, clean.hidden_states[2])        # read before the add
    assert torch.equal(after, expected)
    with torch.no_grad():                                           # and gone after the block
        assert torch.equal(m(IDS).last_hidden_state, clean.last_hidden_state)


def test_capture_keeps_the_last_forward_or_every_one():
    m = model()
    with torch.no_grad(), sites.hooks(m) as at:
        last, every = at.capture("L1.ffn"), at.capture("L1.ffn", every=True)
        m(IDS)
        m(IDS[:, :4])
    assert len(last.values) == 1 and last.value.shape[1] == 4
    assert [v.shape[1] for v in every.values] == [6, 4]


def test_edit_one_head_changes_only_its_columns():
    m = model()
    with torch.no_grad(), sites.hooks(m) as at:
        at.edit("L1.H2", torch.zeros_like)
        seen = at.capture("L1.heads")           # after the edit: hooks run in order
        m(IDS)
    dh = 8
    assert torch.all(seen.value[..., dh:2 * dh] == 0)
    assert torch.all(seen.value[..., :dh] != 0)


def test_hooks_act_on_their_own_thread_only():
    m = model()
    with torch.no_grad():
        clean = m(IDS).last_hidden_state
        other = {}
        with sites.hooks(m) as at:
            at.edit("L1.ffn", torch.zeros_like)
            t = threading.Thread(target=lambda: other.__setitem__("y", m(IDS).last_hidden_state))
            t.start()
            t.join()
            mine = m(IDS).last_hidden_state
    assert torch.equal(other["y"], clean)
    assert not torch.equal(mine, clean)


def test_names_round_trip_and_refusals():
    assert sites.where("L3.resid") == sites.Where("resid", 2)
    assert sites.where("l5.h3") == sites.Where("head", 4, 2)
    assert sites.where("embed") == sites.Where("embed")
    for name in ("L3.resid", "L5.H3", "L1.ffn", "L2.resid_pre", "embed", "L4.pattern"):
        assert sites.where(name).name == name
    assert sites.site_name("resid", 2) == "L3.resid"
    with pytest.raises(InputError, match="is not one of"):
        sites.where("L0.resid")
    m = model()
    with sites.hooks(m) as at:
        with pytest.raises(InputError, match="layer 9 does not exist"):
            at.capture("L9.resid")
        with pytest.raises(InputError, match="read only"):
            at.edit("L1.pattern", lambda v: v)
    assert {row["name"] for row in sites.table()} >= {"L3.resid", "L3.H5", "embed", "L3.ffn", "L3.pattern"}


def test_the_architecture_docs_example_runs_and_steers():
    """docs/architecture.md's example of a new technique through the sites, run as written."""
    import re
    from pathlib import Path

    from core.encoder.backends.scratch import RandomScratchBackend
    doc = (Path(__file__).resolve().parents[3] / "docs" / "architecture.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(from core.encoder import sites\n.*?)```", doc, re.S)[1]
    assert len(code.strip().splitlines()) <= 12
    space: dict = {}
    exec(code, space)
    backend = RandomScratchBackend("random:dim=32,layers=2,heads=4,ffn=64", torch.device("cpu"))
    with torch.no_grad():
        plain = space["steer"](backend, "the cat sat", 0, torch.zeros(32), 1)
        steered = space["steer"](backend, "the cat sat", 0, torch.ones(32), 1)
    assert plain.shape == (1, 5, 8) and not torch.equal(plain, steered)
