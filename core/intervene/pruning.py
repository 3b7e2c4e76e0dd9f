"""How many heads can go: remove heads cumulatively, least important first, and re-measure.

Michel et al. (2019) pruned heads greedily by an importance score and re-measured after each
step. Here the order is given (e.g. an importance map's drops, smallest first) and the metric is
measured with the first n heads of it zeroed together, for every n from 0 to all of them: each
count is a real measurement (no extrapolation from the single-head map, whose drops do not add
up). The counts run as stacked batches (sweep.heads_off_forward), ``chunk`` variants at a time.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from core.device import autocast
from core.errors import Cancelled
from core.intervene.importance import _Measure
from core.intervene.sweep import heads_off_forward


@dataclass
class Removal:
    metric: str
    measured: str
    order: list[tuple[int, int]]     # 0-based (layer, head), removed in this order
    values: list[float]              # values[n]: the metric with order[:n] zeroed (values[0]: clean);
                                     # shorter than order + 1 when the removal stopped at a fall

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

    def to_dict(self, drop: float | None = None) -> dict:
        out = {"metric": self.metric, "measured": self.measured, "baseline": self.baseline,
               "order": [f"{l + 1}.{h + 1}" for l, h in self.order],
               "values": self.values, "values_are": "values[n]: the metric with the first n heads of order zeroed",
               "every_count": len(self.values) == len(self.order) + 1}
        if drop is not None:
            out["drop"], out["removable"] = drop, self.removable(drop)
        return out


def cumulative_removal(backend, order, metric: str = "recall", seed: int = 0, texts=None, chunk: int = 8,
                       progress=None, cancel=None, stop_drop: float | None = None) -> Removal:
    """The metric with the first n heads of ``order`` zeroed, n = 0 .. len(order).
    progress(done, total) in counts; cancel() between chunks. stop_drop: stop after the chunk in
    which the metric first falls by this much (values then ends there)."""
    m = _Measure(backend, metric, seed, texts=texts)
    cfg = m.encoder.config
    order = [tuple(int(i) for i in p) for p in order]
    counts = list(range(len(order) + 1))
    values = []
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
                    parts.append(m._reduce(b, x))
        values += [m._finish(parts) for parts in per_variant]
        if progress is not None:
            progress(len(values), len(counts))
        if stop_drop is not None and values[0] - min(values) >= stop_drop - 1e-12:
            break
    return Removal(metric, m.what, order, values)


def least_important_first(drops, tie_break=None) -> list[tuple[int, int]]:
    """Every (layer, head), smallest drop first; equal drops ordered by ``tie_break`` (another
    map's drops, smallest first), then by layer and head."""
    L, H = drops.shape
    heads = [(l, h) for l in range(L) for h in range(H)]
    return sorted(heads, key=lambda p: (float(drops[p]), 0.0 if tie_break is None else float(tie_break[p]), p))
