"""Importance maps: for every head, every layer's attention and every FFN, how much a metric
drops when that part alone is switched off (a head zeroed or mean-ablated, a branch removed),
and whether that drop can be told from noise.

Beside its cells a map carries what is needed to read them: the clean value; the
**floor** of each kind (the metric with every head, every attention branch, every FFN off); the
number of items read (n: pairs, queries, texts); a seeded 95 % bootstrap interval over those
items for the clean value and for every cell's drop (core/intervene/uncertainty.py); and which
cells lie outside the interval of no change. When none does, ``verdict()`` says so in words.
Metrics: core/intervene/measure.py. Maps are cached on disk (core/intervene/map_cache.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from core.errors import Cancelled
from core.intervene import map_cache
from core.intervene import uncertainty as U
from core.intervene.measure import CEILING, METRICS, RECALL_K, Measure, measure  # noqa: F401 - re-exported
from core.intervene.spec import Intervention
from core.intervene.sweep import layer_variants

KINDS = ("heads", "attention", "ffn")


@dataclass
class ImportanceMap:
    metric: str
    baseline: float            # the metric of the clean model
    heads: np.ndarray          # (L, H): baseline - metric with that head off
    attention: np.ndarray      # (L,): ... with that layer's attention branch removed
    ffn: np.ndarray            # (L,): ... with that layer's FFN branch removed
    seed: int
    model: str                 # the weights' sha256
    corpus: str                # the sha256 of what the metric reads
    measured: str = ""         # what the metric reads, in words
    n: int = 0                 # items read (pairs, queries, texts): what the bootstrap resamples
    unit: str = ""             # "pairs", "queries", "texts"
    interval: tuple = (float("nan"), float("nan"))     # 95 % bootstrap interval of the baseline
    floors: dict = field(default_factory=dict)          # kind -> the metric with every part of it off
    floor_intervals: dict = field(default_factory=dict)  # kind -> its 95 % interval
    low: dict = field(default_factory=dict)             # kind -> each cell's drop interval, low end
    high: dict = field(default_factory=dict)            # ... high end
    head_mode: str = "zero"
    precision: str = ""
    floor_drops: dict = field(default_factory=dict)     # kind -> paired 95 % interval of baseline - floor

    def cache_data(self) -> tuple[dict, dict]:
        """(arrays, fields): the map as the cache stores it (core/intervene/map_cache.py)."""
        arrays = {"heads": self.heads, "attention": self.attention, "ffn": self.ffn}
        for kind in KINDS:
            if kind in self.low:
                arrays[f"{kind}_low"], arrays[f"{kind}_high"] = self.low[kind], self.high[kind]
        fields = {"metric": self.metric, "baseline": self.baseline, "seed": self.seed, "model": self.model,
                  "corpus": self.corpus, "measured": self.measured, "n": self.n, "unit": self.unit,
                  "interval": list(self.interval), "floors": self.floors,
                  "floor_intervals": {k: list(v) for k, v in self.floor_intervals.items()},
                  "head_mode": self.head_mode, "precision": self.precision,
                  "floor_drops": {k: list(v) for k, v in self.floor_drops.items()}}
        return arrays, fields

    @classmethod
    def from_cache(cls, arrays: dict, f: dict) -> ImportanceMap:
        return cls(
            f["metric"], float(f["baseline"]), arrays["heads"].astype(np.float64),
            arrays["attention"].astype(np.float64), arrays["ffn"].astype(np.float64), int(f["seed"]),
            str(f["model"]), str(f["corpus"]), str(f["measured"]), int(f["n"]), str(f["unit"]),
            tuple(float(x) for x in f["interval"]), {k: float(v) for k, v in f["floors"].items()},
            {k: tuple(float(x) for x in v) for k, v in f["floor_intervals"].items()},
            {k: arrays[f"{k}_low"].astype(np.float64) for k in KINDS},
            {k: arrays[f"{k}_high"].astype(np.float64) for k in KINDS},
            str(f.get("head_mode", "zero")), str(f.get("precision", "")),
            {k: tuple(float(x) for x in v) for k, v in (f.get("floor_drops") or {}).items()})

    def drops(self, kind: str) -> np.ndarray:
        return getattr(self, kind)

    def outside(self, kind: str) -> np.ndarray:
        """Cells whose drop interval leaves out 0: distinguishable from no change."""
        if kind not in self.low:
            return np.zeros(np.shape(self.drops(kind)), bool)
        return (self.low[kind] > 0) | (self.high[kind] < 0)

    def noise(self, kind: str = "heads") -> float:
        """The widest half-width of a cell's drop interval of this kind: the map's resolution
        (a drop smaller than this may be noise)."""
        if kind not in self.low:
            return float("nan")
        return float(np.max((self.high[kind] - self.low[kind]) / 2))

    def top(self, n: int = 5) -> list[tuple[tuple[int, int], float]]:
        """The n heads whose removal costs the most, 0-based (layer, head), largest drop first."""
        order = np.argsort(-self.heads, axis=None, kind="stable")[:n]
        return [(tuple(int(i) for i in np.unravel_index(k, self.heads.shape)), float(self.heads.flat[k]))
                for k in order]

    def at_ceiling(self) -> bool:
        """The clean value sits at the metric's best (its interval touches it): no part can show
        that it helps, the cells can only read 0 or fall by whole items."""
        return self.metric in CEILING and self.interval[1] >= CEILING[self.metric] - 1e-12

    def verdict(self) -> list[str]:
        """What the map lets one conclude, in words, one line per kind of part."""
        lines = []
        if self.at_ceiling():
            lines.append(f"{self.metric} is at its ceiling ({self.baseline:.4f}) on the clean model: it cannot show "
                         "what a part adds, only a fall; read a graded metric (mrr, spearman)")
        names = {"heads": ("head", "heads"), "attention": ("attention branch", "attention branches"),
                 "ffn": ("FFN", "FFNs")}
        for kind in KINDS:
            if kind not in self.low:
                continue
            one, many = names[kind]
            out = self.outside(kind)
            total = out.size
            helps = int(((self.low[kind] > 0)).sum())
            hurts = int(((self.high[kind] < 0)).sum())
            if not out.any():
                lines.append(f"no single {one} matters at this resolution: n = {self.n} {self.unit}, "
                             f"±{self.noise(kind):.3f}; the {total} {many} cannot be ranked")
            else:
                lines.append(f"{helps} of {total} {many} lower {self.metric} beyond the 95% interval when off"
                             + (f", {hurts} raise it" if hurts else "")
                             + f"; the others cannot be told from no change (intervals up to ±{self.noise(kind):.3f})")
        return lines

    def to_dict(self) -> dict:
        """1-based names for people: heads as "3.5", layers from 1."""
        L, H = self.heads.shape

        def cells(kind, values):
            if kind == "heads":
                return {f"{l + 1}.{h + 1}": float(values[l, h]) for l in range(L) for h in range(H)}
            return {str(l + 1): float(v) for l, v in enumerate(values)}

        out = {"metric": self.metric, "baseline": self.baseline, "interval": list(self.interval),
               "interval_is": f"95% bootstrap interval over the {self.n} {self.unit} ({U.ROUNDS} resamples, seeded)",
               "n": self.n, "unit": self.unit, "seed": self.seed, "precision": self.precision,
               "head_mode": self.head_mode, "model": self.model, "corpus": self.corpus, "measured": self.measured,
               "floor": dict(self.floors), "floor_interval": {k: list(v) for k, v in self.floor_intervals.items()},
               "floor_is": "the metric with every part of that kind off at once",
               "floor_drop_interval": {k: list(v) for k, v in self.floor_drops.items()},
               "drop_is": "baseline - metric with the part switched off",
               "heads": cells("heads", self.heads), "attention": cells("attention", self.attention),
               "ffn": cells("ffn", self.ffn),
               "top_heads": [{"head": f"{l + 1}.{h + 1}", "drop": d} for (l, h), d in self.top(5)],
               "verdict": self.verdict()}
        if self.low:
            out["drop_interval"] = {k: {name: [lo, hi] for (name, lo), hi in
                                        zip(cells(k, self.low[k]).items(), cells(k, self.high[k]).values())}
                                    for k in KINDS if k in self.low}
            out["outside_no_change"] = {k: [name for name, o in cells(k, self.outside(k)).items() if o]
                                        for k in KINDS if k in self.low}
        return out


def all_off(kind: str, n_layers: int, n_heads: int, head_mode: str = "zero") -> Intervention:
    """Every part of one kind off at once: what a map's floor measures."""
    if kind == "heads":
        return Intervention(heads={(l, h) for l in range(n_layers) for h in range(n_heads)}, head_mode=head_mode)
    if kind == "attention":
        return Intervention(attention_off=set(range(n_layers)))
    return Intervention(ffn_off=set(range(n_layers)))


def save_cached(folder: Path, key: str, m: ImportanceMap) -> bool:
    """Write ``m`` to the cache (best effort: False, with one warning line, when it cannot)."""
    return map_cache.save_map(folder, key, *m.cache_data())


def load_cached(folder: Path, key: str, shape: tuple[int, int], metric: str) -> ImportanceMap | None:
    """The cached map of a model of ``shape`` (L, H) for ``metric``, or None (absent or unusable)."""
    L, H = shape
    shapes = {"heads": (L, H), "attention": (L,), "ffn": (L,)}
    for kind in KINDS:
        shapes[f"{kind}_low"] = shapes[f"{kind}_high"] = shapes[kind]

    def fits(f: dict) -> bool:
        numbers = [f["baseline"], *f["interval"], *f["floors"].values(),
                   *(x for v in f["floor_intervals"].values() for x in v)]
        return (f["metric"] == metric and isinstance(f["n"], int) and f["n"] > 0
                and set(f["floors"]) == set(KINDS) and all(np.isfinite(float(x)) for x in numbers))
    got = map_cache.load_map(folder, key, shapes, fits)
    return None if got is None else ImportanceMap.from_cache(*got)


def importance_map(backend, metric: str = "spearman", seed: int = 0, progress=None, cancel=None,
                   cache_dir: Path | None = None, batched: bool = True, texts: list[str] | None = None,
                   items=None, head_mode: str = "zero", means=None) -> ImportanceMap:
    """Every part's drop in ``metric``, with its bootstrap interval, the floors and n.
    progress(done, total) in parts; cancel() between batches.
    batched: a layer's parts run as one stacked batch (core/intervene/sweep.py); False runs them
    one at a time through the hooked modules (the reference the tests compare it with).
    texts: measure over these (a sample of a store's texts) instead of the shipped data.
    items: only these items (pair, query or text indices): a half of a held-out split.
    head_mode "mean": heads are replaced by ``means`` (L, H, Dh) instead of zeroed."""
    m = Measure(backend, metric, seed, texts=texts, items=items)
    cfg = m.encoder.config
    L, H = cfg.n_layers, cfg.n_heads
    if head_mode == "mean" and means is None:
        from core.errors import InputError
        raise InputError("a mean-ablation map needs the heads' mean outputs (core.intervene.means)")
    key = map_cache.map_key(backend, metric, m.corpus_sha, head_mode)
    if cache_dir is not None:
        cached = load_cached(Path(cache_dir), key, (L, H), metric)
        if cached is not None:
            return cached
    counts = U.resample_counts(m.n, seed)
    clean = m.values(Intervention())
    baseline = m.score(clean)
    clean_scores = m.scores(clean, counts)
    heads, attention, ffn = np.zeros((L, H)), np.zeros(L), np.zeros(L)
    low = {"heads": np.zeros((L, H)), "attention": np.zeros(L), "ffn": np.zeros(L)}
    high = {k: np.zeros_like(v) for k, v in low.items()}
    total, V = L * H + 2 * L, H + 2
    reported = [0]

    def report_upto(done: int) -> None:
        # every count once, in order, as a part-by-part computation would report them
        for d in range(reported[0] + 1, done + 1):
            progress(d, total)
        reported[0] = max(reported[0], done)

    def drop_interval(values):
        return U.interval(clean_scores - m.scores(values, counts))

    for l in range(L):
        if cancel is not None and cancel():
            raise Cancelled(f"importance map cancelled after {l * V} of {total} parts")
        report = None if progress is None else (lambda f, l=l: report_upto(l * V + int(f * V)))
        fill = None if head_mode == "zero" else means[l]
        if batched:
            values = m.sweep(l, progress=report, cancel=cancel, fill=fill)
        else:       # one part at a time through the hooked modules: the reference path
            specs = layer_variants(H, l)
            specs[:H] = [Intervention(heads=s.heads, head_mode=head_mode) for s in specs[:H]]
            values = [m.values(spec, from_layer=l, means=means) for spec in specs]
            if report is not None:
                report(1.0)
        for h in range(H):
            heads[l, h] = baseline - m.score(values[h])
            low["heads"][l, h], high["heads"][l, h] = drop_interval(values[h])
        attention[l], ffn[l] = baseline - m.score(values[H]), baseline - m.score(values[H + 1])
        low["attention"][l], high["attention"][l] = drop_interval(values[H])
        low["ffn"][l], high["ffn"][l] = drop_interval(values[H + 1])
    floors, floor_intervals, floor_drops = {}, {}, {}
    for kind in KINDS:
        if cancel is not None and cancel():
            raise Cancelled("importance map cancelled while measuring its floors")
        values = m.values(all_off(kind, L, H, head_mode), means=means)
        floors[kind] = m.score(values)
        floor_intervals[kind] = U.interval(m.scores(values, counts))
        floor_drops[kind] = drop_interval(values)
    result = ImportanceMap(metric, float(baseline), heads, attention, ffn, seed,
                           getattr(backend, "weights_sha256", ""), m.corpus_sha, m.what, m.n, m.unit,
                           U.interval(clean_scores), floors, floor_intervals, low, high, head_mode,
                           getattr(backend, "precision", "fp32"), floor_drops)
    if cache_dir is not None:
        save_cached(Path(cache_dir), key, result)
    return result
