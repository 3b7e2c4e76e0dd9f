"""Cumulative head removal (core/intervene/pruning.py, `importance --prune`): each count's value is
the metric re-measured by a full independent run with those heads zeroed."""
from __future__ import annotations

import json

import numpy as np
import pytest

from core.encoder.backends import get_backend
from core.intervene.importance import importance_map, measure
from core.intervene.pruning import Removal, cumulative_removal, held_out_halves, least_important_first
from core.intervene.spec import Intervention
from tests.support.tiny_models import run_cli

RANDOM = "random:dim=32,layers=2,heads=4,ffn=64,seed=3"


@pytest.mark.parametrize("spec", [RANDOM, "random:dim=32,layers=2,heads=4,ffn=64,norm=pre,seed=5"])
def test_every_count_is_the_metric_with_those_heads_zeroed(spec):
    backend = get_backend(spec, "scratch", device="cpu", precision="fp32")
    m = importance_map(backend, "spearman")
    order = least_important_first(m.heads)
    assert [m.heads[p] for p in order] == sorted(m.heads.ravel().tolist())
    r = cumulative_removal(backend, order, "spearman", chunk=3)     # chunks of 3: 9 counts in 3 forwards
    assert len(r.values) == 9 and r.values[0] == pytest.approx(m.baseline, abs=1e-9)
    for n in range(1, 9) if spec == RANDOM else (2, 8):     # the pre-norm path: two counts suffice
        assert r.values[n] == pytest.approx(measure(backend, "spearman", Intervention(heads=set(order[:n]))),
                                            abs=1e-6), n
    assert len(set(np.round(r.values, 6))) > 2, "removing heads should change the metric"
    fall = max(r.values[0] - v for v in r.values[1:6])
    if spec == RANDOM and fall > 0:     # stopping at the first fall: the same values, fewer counts
        early = cumulative_removal(backend, order, "spearman", chunk=3, stop_drop=fall)
        assert len(early.values) <= 6 and early.values == r.values[:len(early.values)]
        assert early.removable(fall) == r.removable(fall)


def test_removable_counts_until_the_first_fall():
    r = Removal("recall", "", [(0, 0), (0, 1), (1, 0)], [1.0, 1.0, 0.975, 0.95])
    assert r.removable(0.05) == 2 and r.removable(0.02) == 1 and r.removable(0.5) == 3
    assert Removal("recall", "", [(0, 0), (0, 1)], [1.0, 0.9, 1.0]).removable(0.05) == 0


def test_ties_follow_the_second_map():
    drops = np.array([[0.0, 0.0], [0.1, 0.0]])
    assert least_important_first(drops, np.array([[0.3, 0.1], [0.0, 0.2]])) == [(0, 1), (1, 1), (0, 0), (1, 0)]


def test_prune_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    code, out, err = run_cli(["importance", "--metric", "spearman", "--prune", "0.05", "--model", RANDOM,
                              "--json"], capsys)
    assert code == 0, err
    full = json.loads(out)
    d = full["removal"]
    assert len(d["values"]) == 9 and d["drop"] == 0.05
    # held out: the order is chosen on one seeded half of the pairs, the curve drawn on the other
    chosen, curve = d["order_chosen_on_items"], d["curve_items"]
    assert not set(chosen) & set(curve) and sorted(chosen + curve) == list(range(94))
    assert (tuple(chosen), tuple(curve)) == held_out_halves(94, 0) and d["n"] == len(curve) == 47
    backend = get_backend(RANDOM, "scratch", device="cpu")
    half_map = importance_map(backend, "spearman", items=chosen)
    assert d["order"] == [f"{l + 1}.{h + 1}" for l, h in least_important_first(half_map.heads)]
    assert d["values"][0] == pytest.approx(measure(backend, "spearman", Intervention(), items=curve), abs=1e-9)
    assert len(d["drop_interval"]) == 9 and d["drop_interval"][0] == [0.0, 0.0]
    assert {"precision", "metric", "n", "interval", "floor", "seed"} <= set(full)
    assert d["removable"] == Removal("spearman", "", [], d["values"]).removable(0.05)
    code, out, err = run_cli(["importance", "--metric", "spearman", "--prune", "0.05", "--model", RANDOM], capsys)
    assert code == 0, err
    assert f"{d['removable']} of 8 heads can be removed before spearman falls by 0.05" in out
    # the items are one convention in both: 0-based, said so
    assert "0-based" in d["items_are"]
    assert f"chosen on items (0-based, as in --json) {' '.join(map(str, chosen))}" in out
    assert f"curve on items (0-based) {' '.join(map(str, curve))}" in out
    assert "the order chosen on 47 of the 94 items (a seeded half), the curve measured on the other 47" in out
