"""What `encoderscope importance` prints: a map with its clean value, floors, n and intervals, and
what it lets one conclude in words; the head-removal curve with its halves and intervals."""
from __future__ import annotations

from core.intervene.uncertainty import ROUNDS


def _iv(lo: float, hi: float) -> str:
    return f"[{lo:.4f}, {hi:.4f}]"


def print_map(backend, m) -> None:
    mode = "zeroed" if m.head_mode == "zero" else "replaced by their corpus mean"
    print(f"{backend.model_name} ({m.precision}): {m.measured or m.metric}")
    print(f"clean {m.baseline:.4f}, 95% interval {_iv(*m.interval)} (bootstrap over the n = {m.n} {m.unit}, "
          f"{ROUNDS} resamples, seed {m.seed})")
    words = {"heads": f"every head {mode}", "attention": "every attention branch off", "ffn": "every FFN off"}
    for kind, value in m.floors.items():
        drop = m.floor_drops.get(kind)
        paired = "" if drop is None else f"; drop from clean {_iv(*drop)} (paired)"
        print(f"floor, {words[kind]}: {value:.4f} {_iv(*m.floor_intervals[kind])}{paired}")
    print(f"drop when one part alone is off (heads {mode}); * = its 95% interval leaves out 0:")
    outside = m.outside("heads")
    for (l, h), d in m.top(10):
        mark = "*" if outside[l, h] else " "
        print(f"  head {l + 1}.{h + 1}: {d:+.4f} {_iv(m.low['heads'][l, h], m.high['heads'][l, h])} {mark}")
    for name, kind in (("attention", "attention"), ("FFN", "ffn")):
        out = m.outside(kind)
        cells = ", ".join(f"{l + 1}: {v:+.4f}{'*' if out[l] else ''}" for l, v in enumerate(m.drops(kind)))
        print(f"  {name} by layer: {cells}")
    for line in m.verdict():
        print(line)


def print_removal(r, metric: str, drop: float) -> None:
    n = r.removable(drop)
    print(f"heads removed together, least important first: the order chosen on {len(r.chosen_on)} of the "
          f"{len(r.chosen_on) + r.n} items (a seeded half), the curve measured on the other {r.n}"
          + ("" if len(r.values) > len(r.order) else ", until the first fall") + ":")
    for start in range(0, len(r.values), 12):
        row = r.values[start:start + 12]
        print(f"  {start:>3}-{start + len(row) - 1:<3} " + " ".join(f"{v:.3f}" for v in row))
    print("  order: " + " ".join(f"{l + 1}.{h + 1}" for l, h in r.order[:len(r.values) - 1]))
    # items as in --json: 0-based indices into the metric's items (pairs, queries or texts, in order)
    print(f"  chosen on items (0-based, as in --json) {' '.join(str(i) for i in r.chosen_on)}")
    print(f"  curve on items (0-based) {' '.join(str(i) for i in r.items)}")
    fall = r.first_distinguishable_fall()
    print(f"{n} of {len(r.order)} heads can be removed before {metric} falls by {drop:g} "
          f"(to {r.baseline - drop:.4f} or below) on the held-out half (clean {r.baseline:.4f})")
    if fall is None:
        print(f"no count's fall is beyond noise on these {r.n} items (95% interval of the drop includes 0)")
    else:
        print(f"the first fall beyond noise: {fall} heads removed, drop {r.baseline - r.values[fall]:+.4f} "
              f"{_iv(r.low[fall], r.high[fall])} (each count's own 95% interval: over many counts a few "
              "cross by chance, so a fall that later counts undo is noise)")
