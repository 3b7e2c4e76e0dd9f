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
    assert {p.suffix for p in tmp_path.iterdir()} == {".json", ".safetensors"}


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
    with pytest.raises(NoMLMHead, match="choose the spearman or recall metric, or a model with one") as e:
        importance_map(minilm, "mlm")
    assert e.value.fix == {"kind": "train_mlm", "init": "minilm"}       # the CLI and the app word it
