"""Importance maps and effects: the map's drop is the metric re-measured with that part off (a
full run, no cached layers), the map is the same with the same seed, and the cache gives it back."""
from __future__ import annotations

import numpy as np
import pytest

from core.encoder.backends import get_backend
from core.errors import NoMLMHead
from core.intervene import effects
from core.intervene.importance import importance_map, measure
from core.intervene.spec import Intervention
from tests.support.bf16 import needs_cpu_bf16

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"


@pytest.fixture(scope="module")
def tiny():
    return get_backend(RANDOM, "scratch", device="cpu")


# mlm reads the whole sample corpus through a 30k-word head for every part: minutes on 2 cores
@pytest.mark.parametrize("metric", ["spearman", pytest.param("mlm", marks=pytest.mark.slow)])
def test_the_map_says_what_ablating_the_part_costs(tiny, metric, tmp_path):
    m = importance_map(tiny, metric, seed=1, cache_dir=tmp_path)
    (l, h), drop = m.top(1)[0]
    assert m.baseline - measure(tiny, metric, Intervention(heads={(l, h)}), seed=1) == pytest.approx(drop, abs=1e-6)
    for layer in range(2):
        assert m.baseline - measure(tiny, metric, Intervention(ffn_off={layer}), seed=1) == pytest.approx(
            m.ffn[layer], abs=1e-6)
    assert np.abs(m.heads).max() > 0
    again = importance_map(tiny, metric, seed=1)                       # no cache: computed afresh
    np.testing.assert_array_equal(again.heads, m.heads)
    cached = importance_map(tiny, metric, seed=1, cache_dir=tmp_path)  # read back from disk
    np.testing.assert_array_equal(cached.heads, m.heads)
    assert cached.baseline == m.baseline
    assert cached.interval == m.interval and cached.floors == m.floors and cached.n == m.n
    np.testing.assert_array_equal(cached.low["heads"], m.low["heads"])
    assert {p.suffix for p in tmp_path.iterdir()} == {".safetensors"}


@pytest.mark.slow
def test_mlm_masks_follow_the_seed(tiny):
    assert importance_map(tiny, "mlm", seed=1).baseline != importance_map(tiny, "mlm", seed=2).baseline


def test_spearman_effect_equals_the_metric_measured_plainly(tiny):
    spec = Intervention(heads={(0, 1)}, ffn_off={1})
    e = effects.compare_pairs(tiny, spec)
    assert e.before == pytest.approx(measure(tiny, "spearman", Intervention()), abs=1e-6)
    assert e.after == pytest.approx(measure(tiny, "spearman", spec), abs=1e-6)


def test_fill_mask_and_vector_effects(tiny):
    spec = Intervention(positions="off")
    f = effects.compare_fill_mask(tiny, "the cat sat on the [MASK].", spec, top_k=3, target="mat")
    assert len(f.after.masks[0]["predictions"]) == 3
    assert f.target_before != f.target_after
    v = effects.compare_vector(tiny, "the cat sat on the mat.", spec)
    assert v.cosine == pytest.approx(float(np.dot(v.before, v.after)))
    assert v.cosine < 0.9999


def test_mlm_needs_a_head(minilm):
    with pytest.raises(NoMLMHead, match="choose the spearman, mrr or recall metric, or a model with one") as e:
        importance_map(minilm, "mlm")
    assert e.value.fix == {"kind": "train_mlm", "init": "minilm"}       # the CLI and the app word it


@pytest.mark.parametrize("spec", [RANDOM, "random:dim=32,layers=3,heads=4,ffn=64,norm=pre,seed=5",
                                  "random:dim=32,layers=2,heads=4,ffn=64,attention=causal,seed=6"])
def test_the_stacked_sweep_gives_each_hooked_ablation(spec):
    """sweep.layer_sweep runs a layer's H + 2 single-part ablations as one stacked batch: each
    variant's final hidden states equal the hooked model's full forward with that part off."""
    import torch

    from core.intervene.apply import intervene
    from core.intervene.sweep import layer_sweep, layer_variants
    backend = get_backend(spec, "scratch", device="cpu", precision="fp32")
    enc = backend.encoder
    ids, mask = backend._batch(backend.encode_ids(["the cat sat on the mat", "a dog ran", "hello there world"])[0])
    with torch.inference_mode():
        out = enc(ids, mask, output_hidden_states=True)
        hidden, clean = out.hidden_states, out.last_hidden_state
        for layer in range(enc.config.n_layers):
            stacked = layer_sweep(enc, layer, hidden[layer], mask)
            variants = layer_variants(enc.config.n_heads, layer)
            assert len(stacked) == len(variants) == enc.config.n_heads + 2
            for got, part in zip(stacked, variants):
                with intervene(enc, part):
                    want = enc(ids, mask).last_hidden_state
                real = mask.bool()
                np.testing.assert_allclose(got[real].numpy(), want[real].numpy(), atol=2e-5,
                                           err_msg=f"{spec}: {part.describe()}")
                assert (got[real] - clean[real]).abs().max() > 1e-4, f"{part.describe()} changed nothing"


# recall: 616 texts through the one-at-a-time path, 12 full passes: ~1 min on 2 loaded cores
@pytest.mark.parametrize("metric", ["spearman", pytest.param("recall", marks=pytest.mark.slow)])
def test_the_batched_map_is_the_one_at_a_time_map(tiny, metric):
    fast = importance_map(tiny, metric, seed=0)
    slow = importance_map(tiny, metric, seed=0, batched=False)
    np.testing.assert_allclose(fast.heads, slow.heads, atol=1e-6)
    np.testing.assert_allclose(fast.attention, slow.attention, atol=1e-6)
    np.testing.assert_allclose(fast.ffn, slow.ffn, atol=1e-6)
    assert fast.baseline == slow.baseline
    np.testing.assert_allclose(fast.low["heads"], slow.low["heads"], atol=1e-6)


def test_a_mean_ablation_map_is_each_head_replaced_by_its_mean(tiny):
    """The stacked sweep with each head's columns filled by its mean equals the hooked path of
    apply.py's mean ablation, cell by cell, and differs from the zero map."""
    from core.intervene.means import mean_head_outputs
    means = mean_head_outputs(tiny, ["the cat sat on the mat", "a dog ran in the park", "hello world"])
    pairs = range(30)           # 30 of the pairs: the same check, a third of the time
    fast = importance_map(tiny, "spearman", head_mode="mean", means=means, items=pairs)
    slow = importance_map(tiny, "spearman", head_mode="mean", means=means, batched=False, items=pairs)
    np.testing.assert_allclose(fast.heads, slow.heads, atol=1e-6)
    assert fast.n == 30 and fast.head_mode == "mean"
    from core.intervene.importance import all_off
    from core.intervene.measure import Measure
    m = Measure(tiny, "spearman", 0, items=pairs)     # every head mean-ablated is not every head zeroed
    assert not np.array_equal(m.values(all_off("heads", 2, 4, "mean"), means=means), m.values(all_off("heads", 2, 4)))
    (l, h), drop = fast.top(1)[0]
    assert fast.baseline - measure(tiny, "spearman", Intervention(heads={(l, h)}, head_mode="mean"),
                                   means=means, items=pairs) == pytest.approx(drop, abs=1e-6)


@needs_cpu_bf16
def test_maps_of_each_precision_are_cached_apart(tmp_path):
    fp32 = importance_map(get_backend(RANDOM, "scratch", device="cpu", precision="fp32"), "spearman",
                          cache_dir=tmp_path)
    bf16 = importance_map(get_backend(RANDOM, "scratch", device="cpu", precision="bf16"), "spearman",
                          cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.safetensors"))) == 2
    assert not np.array_equal(fp32.heads, bf16.heads)


def test_progress_counts_every_part_once_in_order(tiny):
    """The stacked sweep finishes a layer's parts together, yet a progress bar (and a Cancel
    that reacts at a given part) sees 1, 2, ... total, as a part-by-part computation reports."""
    seen = []
    importance_map(tiny, "spearman", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(d, 12) for d in range(1, 13)]
