"""How many heads can go: remove heads cumulatively, least important first, and re-measure.

Michel et al. (2019) pruned heads greedily by an importance score and re-measured after each
step. Here the order is given (e.g. an importance map's drops, smallest first) and the metric is
measured with the first n heads of it zeroed together, for every n from 0 to all of them: each
count is a real measurement (no extrapolation from the single-head map, whose drops do not add
up). The counts run as stacked batches (sweep.heads_off_forward), ``chunk`` variants at a time.

Held out: an order chosen on the items the curve is drawn on flatters the curve (the
heads whose removal happened to help those items go first). ``held_out_halves`` splits the items
in two, seeded; the CLI chooses the order on one half and draws the curve on the other. Each
count carries a 95 % bootstrap interval of its drop over the curve's items (paired with the
clean model), so a fall can be told from noise.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from core.device import autocast
from core.errors import Cancelled
from core.intervene import uncertainty as U
from core.intervene.measure import Measure
from core.intervene.sweep import heads_off_forward


@dataclass
class Removal:
    metric: str
    measured: str
    order: list[tuple[int, int]]     # 0-based (layer, head), removed in this order
    values: list[float]              # values[n]: the metric with order[:n] zeroed (values[0]: clean);
                                     # shorter than order + 1 when the removal stopped at a fall
    low: list[float] = field(default_factory=list)     # values[0] - values[n]: 95 % interval, low end
    high: list[float] = field(default_factory=list)
    n: int = 0                       # items the curve reads
    items: tuple = ()                # which (indices into the metric's items)
    chosen_on: tuple = ()            # the items the order was chosen on (disjoint from ``items``)

    @property
    def baseline(self) -> float:
        return self.values[0]

    def removable(self, drop: float) -> int:
        """The most heads that can be removed, in this order, before the metric first falls by
        ``drop`` or more below the clean model's."""
        for n, value in enumerate(self.values):
            if self.baseline - value >= drop - 1e-12:
                return n - 1
        return len(self.values) - 1

    def first_distinguishable_fall(self) -> int | None:
        """The first count whose drop's interval lies above 0 (a fall beyond noise), or None."""
        return next((n for n, lo in enumerate(self.low) if n and lo > 0), None)

    def to_dict(self, drop: float | None = None) -> dict:
        out = {"metric": self.metric, "measured": self.measured, "baseline": self.baseline,
               "order": [f"{l + 1}.{h + 1}" for l, h in self.order],
               "values": self.values, "values_are": "values[n]: the metric with the first n heads of order zeroed",
               "drop_interval": [[lo, hi] for lo, hi in zip(self.low, self.high)],
               "drop_interval_is": f"95% paired bootstrap interval of values[0] - values[n] over the {self.n} items",
               "n": self.n, "curve_items": list(self.items), "order_chosen_on_items": list(self.chosen_on),
               "items_are": "0-based indices into the metric's items (its pairs, queries or texts, in order), "
                            "as the text output prints them",
               "first_distinguishable_fall": self.first_distinguishable_fall(),
               "every_count": len(self.values) == len(self.order) + 1}
        if drop is not None:
            out["drop"], out["removable"] = drop, self.removable(drop)
        return out


def held_out_halves(n_items: int, seed: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(the half the order is chosen on, the half the curve is drawn on): a seeded split of the
    items 0..n-1, each half sorted; the second gets the odd one out."""
    perm = np.random.default_rng([seed, 2]).permutation(n_items)
    half = n_items // 2
    return tuple(sorted(int(i) for i in perm[:half])), tuple(sorted(int(i) for i in perm[half:]))


def cumulative_removal(backend, order, metric: str = "spearman", seed: int = 0, texts=None, chunk: int = 8,
                       progress=None, cancel=None, stop_drop: float | None = None, items=None,
                       chosen_on=()) -> Removal:
    """The metric with the first n heads of ``order`` zeroed, n = 0 .. len(order), over ``items``
    (None: all), each with its bootstrap interval. progress(done, total) in counts; cancel()
    between chunks. stop_drop: stop after the chunk in which the metric first falls by this much."""
    m = Measure(backend, metric, seed, texts=texts, items=items)
    cfg = m.encoder.config
    order = [tuple(int(i) for i in p) for p in order]
    counts = list(range(len(order) + 1))
    per_item = []
    hidden = m.cached
    for start in range(0, len(counts), chunk):
        if cancel is not None and cancel():
            raise Cancelled(f"head removal cancelled after {start} of {len(counts)} counts")
        part = counts[start:start + chunk]
        keep = torch.ones(len(part), cfg.n_layers, cfg.n_heads, dtype=torch.bool)
        for v, n in enumerate(part):
            for layer, head in order[:n]:
                keep[v, layer, head] = False
        per_variant = [[] for _ in part]
        with torch.inference_mode(), autocast(backend.device, backend.precision):
            for b, ((_, _, mask), states) in enumerate(zip(m.batches, hidden)):
                for parts, x in zip(per_variant, heads_off_forward(m.encoder, states[0], mask, keep)):
                    parts.append(m.reduce(b, x))
        per_item += [m.finish(parts) for parts in per_variant]
        if progress is not None:
            progress(len(per_item), len(counts))
        values = [m.score(v) for v in per_item]
        if stop_drop is not None and values[0] - min(values) >= stop_drop - 1e-12:
            break
    values = [m.score(v) for v in per_item]
    resamples = U.resample_counts(m.n, seed)
    clean = m.scores(per_item[0], resamples)
    bounds = [U.interval(clean - m.scores(v, resamples)) for v in per_item]
    return Removal(metric, m.what, order, values, [lo for lo, _ in bounds], [hi for _, hi in bounds],
                   m.n, m.items, tuple(chosen_on))


def least_important_first(drops, tie_break=None) -> list[tuple[int, int]]:
    """Every (layer, head), smallest drop first; equal drops ordered by ``tie_break`` (another
    map's drops, smallest first), then by layer and head."""
    L, H = drops.shape
    heads = [(l, h) for l in range(L) for h in range(H)]
    return sorted(heads, key=lambda p: (float(drops[p]), 0.0 if tie_break is None else float(tie_break[p]), p))
