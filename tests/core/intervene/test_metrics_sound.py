"""Metrics that can move (issue 49, item 1): the default metrics are not at their ceiling on
clean minilm and their floors (every head, every attention branch, every FFN off) fall beyond
the 95 % interval of no change, so a map over them can show a part that matters; a metric pinned at
its ceiling is recognised and said so; the bootstrap is seeded and paired."""
from __future__ import annotations

import numpy as np
import pytest

from core.intervene import uncertainty as U
from core.intervene.importance import KINDS, ImportanceMap, all_off
from core.intervene.measure import CEILING, DEFAULT_METRIC, DEFAULT_RETRIEVAL, Measure


def test_the_defaults_are_the_graded_metrics_the_cli_and_the_app_offer_first():
    pytest.importorskip("PySide6", reason="the app's metric list needs PySide6 (a bare GPU box has none)")
    from app.cli import build_parser
    from app.gui.panels.intervene.importance_view import METRICS as APP_METRICS
    args = build_parser().parse_args(["importance"])
    assert args.metric == DEFAULT_METRIC == APP_METRICS[0][0]
    assert [key for key, *_ in APP_METRICS][:2] == [DEFAULT_METRIC, DEFAULT_RETRIEVAL]
    assert "recall" not in (DEFAULT_METRIC, DEFAULT_RETRIEVAL)


@pytest.mark.slow       # minilm through 8 full runs (616 + 188 texts): ~20 s on 2 loaded cores
@pytest.mark.parametrize("metric", [DEFAULT_METRIC, DEFAULT_RETRIEVAL])
def test_a_default_metric_can_fall_on_minilm(minilm, metric):
    m = Measure(minilm, metric, 0)
    counts = U.resample_counts(m.n, 0)
    clean = m.values(all_off("heads", 0, 0))            # nothing off: the empty intervention
    lo, hi = U.interval(m.scores(clean, counts))
    assert hi < CEILING[metric] - 1e-9, f"{metric} is at its ceiling on clean minilm: it cannot show a fall"
    L, H = minilm.n_layers, minilm.n_heads
    clean_scores = m.scores(clean, counts)
    for kind in KINDS:
        values = m.values(all_off(kind, L, H))
        # paired: the same resampled items with and without the parts
        drop_lo, drop_hi = U.interval(clean_scores - m.scores(values, counts))
        if metric == DEFAULT_RETRIEVAL and kind == "heads":
            # the 40 shipped queries are easy (28 at rank 1 of 576): with all 72 heads zeroed MRR
            # falls 0.83 -> 0.77, an interval that still holds 0. The docs say so; a harder query
            # set is still to come. Held here so that the day it changes, the docs are re-read.
            assert drop_lo <= 0 < drop_hi
            continue
        assert drop_lo > 0, f"{metric} with every {kind} off cannot be told from the clean model"


def _map(metric, baseline, interval, heads_low, heads_high):
    L, H = heads_low.shape
    z = np.zeros(L)
    return ImportanceMap(metric, baseline, (heads_low + heads_high) / 2, z, z, 0, "", "", "", 40, "queries",
                         interval, {k: 0.0 for k in KINDS}, {k: (0.0, 0.0) for k in KINDS},
                         {"heads": heads_low, "attention": z - 0.01, "ffn": z - 0.01},
                         {"heads": heads_high, "attention": z + 0.01, "ffn": z + 0.01})


def test_a_metric_at_its_ceiling_is_said_to_be_so_and_noise_is_not_ranked():
    flat = _map("recall", 1.0, (1.0, 1.0), np.full((2, 3), -0.025), np.full((2, 3), 0.025))
    assert flat.at_ceiling()
    words = flat.verdict()
    assert "at its ceiling" in words[0]
    assert "no single head matters at this resolution: n = 40 queries, ±0.025" in words[1]
    low = np.full((2, 3), -0.01)
    low[1, 2] = 0.02
    one = _map("mrr", 0.6, (0.5, 0.7), low, low + 0.03)
    assert not one.at_ceiling() and one.outside("heads").sum() == 1
    assert one.verdict()[0].startswith("1 of 6 heads lower mrr beyond the 95% interval")
    assert one.to_dict()["outside_no_change"]["heads"] == ["2.3"]


def test_the_bootstrap_is_seeded_paired_and_right():
    """Resampled Spearman equals scipy-free brute force on the drawn items; the counts are seeded."""
    from core.evaluate.metrics import spearman
    rng = np.random.default_rng(1)
    x, gold = rng.normal(size=30), np.round(rng.normal(size=30), 1)      # ties in the gold scores
    counts = U.resample_counts(30, 7, rounds=20)
    np.testing.assert_array_equal(counts, U.resample_counts(30, 7, rounds=20))
    assert not np.array_equal(counts, U.resample_counts(30, 8, rounds=20))
    got = U.spearman_scores(x, gold, counts)
    for r in range(20):
        drawn = np.repeat(np.arange(30), counts[r].astype(int))
        assert got[r] == pytest.approx(spearman(x[drawn], gold[drawn]), abs=1e-12)
    np.testing.assert_allclose(U.mean_scores(x, counts), [x[np.repeat(np.arange(30), c.astype(int))].mean()
                                                          for c in counts])
