"""The architecture map's data (core/walkthrough/architecture.py), checked against the walkthrough's real numbers:
its blocks are the walk's steps, its shapes the arrays' shapes, its adds the sums they claim."""
import numpy as np
import pytest

from core.encoder.backends import get_backend
from core.encoder.model import EncoderConfig
from core.walkthrough.architecture import MAIN, RESIDUAL, architecture
from core.walkthrough.steps import explain
from tests.support.tiny_models import make_tiny_checkpoint, make_tiny_distilbert

SENTENCE = "The cat sat on the mat."


@pytest.fixture(scope="module")
def walks(tmp_path_factory, minilm):
    """(post, types): minilm; (pre, types): our checkpoint; (post, no types): a DistilBERT folder;
    (pre, no types): our checkpoint without segments."""
    root = tmp_path_factory.mktemp("arch")
    folders = {("pre", True): make_tiny_checkpoint(root / "pre"),
               ("post", False): make_tiny_distilbert(root / "distil"),
               ("pre", False): make_tiny_checkpoint(root / "pre_nt", type_vocab_size=0, positions="learned")}
    out = {("post", True): (minilm, explain(minilm, SENTENCE, layer=1, head=2))}
    for key, folder in folders.items():
        backend = get_backend(str(folder), "scratch", device="cpu")
        out[key] = (backend, explain(backend, SENTENCE, layer=1, head=2))
    return out


@pytest.mark.parametrize("key", [("post", True), ("pre", True), ("post", False), ("pre", False)])
def test_blocks_are_the_steps_and_shapes_are_the_arrays(walks, key):
    backend, walk = walks[key]
    cfg = backend.config
    assert (cfg.norm, bool(cfg.type_vocab_size)) == key
    T = len(walk.tokens)
    arch = architecture(cfg, T, layer=walk.layer, head=walk.head)
    assert arch.steps == [s.name for s in walk.steps]          # every step a block, in the walk's order
    assert ("token_type_embeddings" in arch.steps) == key[1]
    for e in arch.edges:
        shape = walk.step(e.source).values.shape
        expected = " × ".join(map(str, shape))
        if (e.source, e.target) == ("head_output", "heads_concat"):
            expected = f"{cfg.n_heads} × {expected}"
        assert e.shape == expected, (e.source, e.target, e.shape, shape)
    assert f"layers 1 … {cfg.n_layers} repeat" in arch.repeat_text
    rows = [b.row for b in arch.blocks]
    assert rows == sorted(rows)                                   # drawn top to bottom in computing order
    first, last = arch.layer_rows
    inside = {b.step for b in arch.blocks if first <= b.row <= last}
    assert {"q", "weights", "ffn_output", "residual_2"} <= inside
    assert not inside & {"embeddings_sum", "pooled", "final_layernorm"}


@pytest.mark.parametrize("key", [("post", True), ("pre", True), ("post", False), ("pre", False)])
def test_every_add_is_the_sum_of_its_incoming_arrows(walks, key):
    """The residual arrows are drawn where the model adds: each add equals the sum of what flows in."""
    backend, walk = walks[key]
    arch = architecture(backend.config, len(walk.tokens), walk.layer, walk.head)
    adds = [b.step for b in arch.blocks if b.kind == "add" and b.step != "layer_input"]
    assert adds == ["embeddings_sum", "residual_1", "residual_2"]
    for name in adds:
        sources = [e.source for e in arch.edges if e.target == name]
        total = sum(np.asarray(walk.step(s).values) for s in sources)
        np.testing.assert_allclose(walk.step(name).values, total, atol=1e-9, err_msg=name)


def test_pre_and_post_norm_are_drawn_as_they_are():
    post = architecture(EncoderConfig(dim=32, n_heads=4, hidden_dim=64, n_layers=3, norm="post"), 7)
    pre = architecture(EncoderConfig(dim=32, n_heads=4, hidden_dim=64, n_layers=3, norm="pre"), 7)

    def edges(a, kind=None):
        return {(e.source, e.target) for e in a.edges if kind is None or e.kind == kind}

    # post-norm: the LayerNorm comes after the add, the residual skips from the LN's output
    assert ("residual_1", "layernorm_1") in edges(post) and ("layer_input", "q") in edges(post)
    assert edges(post, RESIDUAL) == {("layer_input", "residual_1"), ("layernorm_1", "residual_2")}
    assert "final_layernorm" not in post.steps
    # pre-norm: the LayerNorm sits inside the branch, before the sublayer; the skip bypasses it
    assert ("layer_input", "layernorm_1") in edges(pre) and ("layernorm_1", "q") in edges(pre)
    assert ("layer_input", "q") not in edges(pre)
    assert edges(pre, RESIDUAL) == {("layer_input", "residual_1"), ("residual_1", "residual_2")}
    assert ("residual_2", "final_layernorm") in edges(pre, MAIN)
    assert pre.block("layernorm_1").row < pre.block("q").row
    assert post.block("layernorm_1").row > post.block("residual_1").row
