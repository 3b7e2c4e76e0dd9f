"""`encoderscope explain TEXT`: every step of the encoder on one sentence, each checked against
the model; `--notebook OUT.ipynb` writes the same walk as a self-checking Jupyter notebook."""
from __future__ import annotations

import numpy as np

from app.cli.options import add_model_options, backend_from_args, emit_json
from core.walkthrough.steps import TOLERANCE


def register(sub):
    p = sub.add_parser("explain", help="every step of the encoder on one sentence, checked against the model")
    p.add_argument("text", help="the sentence to walk through")
    p.add_argument("--pair", metavar="TEXT2", help="a second sentence: [CLS] TEXT [SEP] TEXT2 [SEP] (token types)")
    p.add_argument("--layer", type=int, default=1, help="layer to open up, 1-based (default: 1)")
    p.add_argument("--head", type=int, default=1, help="attention head to open up, 1-based (default: 1)")
    p.add_argument("--json", action="store_true", help="print JSON with every step's full values")
    p.add_argument("--notebook", metavar="OUT.ipynb",
                   help="write a Jupyter notebook that recomputes every step with NumPy and checks it, "
                        "and beside it OUT.npz (the weights and numbers it needs)")
    add_model_options(p)
    p.set_defaults(func=cmd_explain)


def cmd_explain(args) -> int:
    from core.walkthrough.steps import explain
    backend = backend_from_args(args)
    if args.notebook:
        from core.walkthrough.notebook_export import check_target
        check_target(backend, args.notebook)
    walk = explain(backend, args.text, pair=args.pair, layer=args.layer - 1, head=args.head - 1,
                   pooling=backend.choose_pooling(args.pooling))
    if args.notebook:
        from core.walkthrough.notebook_export import data_path, write_notebook
        path = write_notebook(walk, backend, args.notebook)
        data = data_path(path)
        if args.json:
            emit_json({"notebook": str(path), "data": str(data), "model": walk.model, "steps": len(walk.steps)})
        else:
            print(f"wrote {path} and beside it {data.name} (the weights and the checked numbers: hand "
                  f"out both): {len(walk.steps)} steps, each recomputed with NumPy and checked. It runs "
                  "with numpy and tokenizers (pip install numpy tokenizers); open it with Jupyter, or: "
                  f"jupyter nbconvert --to notebook --execute {path.name}")
        return 0
    if args.json:
        emit_json(walk.to_dict())
        return 0
    print(summary(walk))
    return 0


def _few(values: np.ndarray, n: int = 4) -> str:
    row = values if values.ndim == 1 else values[0]
    more = " …" if row.size > n else ""
    return "[" + ", ".join(f"{x:.4f}" for x in row[:n]) + more + "]"


def summary(walk) -> str:
    """The walk for people: one block per step (name, shape, formula, difference, a few numbers)."""
    lines = [(f"{walk.model}: {len(walk.tokens)} tokens, layer {walk.layer + 1}, head {walk.head + 1}, "
             f"{walk.pooling} pooling, {walk.norm}-norm"),
             "tokens: " + " ".join(walk.tokens)]
    if walk.token_type_ids is not None and any(walk.token_type_ids):
        lines.append("types:  " + " ".join(str(t) for t in walk.token_type_ids))
    if walk.truncated:
        lines.append(f"note: the text was cut to the model's maximum of {walk.max_length} tokens "
                     f"({walk.truncated} tokens dropped)")
    if walk.note:
        lines.append(f"note: {walk.note}")
    lines.append("max |Δ|: NumPy step vs the torch encoder's own intermediate (float64, same weights); "
                 "fp32: vs the fp32 forward pass that `embed` runs")
    for i, s in enumerate(walk.steps, 1):
        shape = " × ".join(str(n) for n in s.values.shape)
        lines.append(f"{i:2}. {s.name:<22} {shape:<12} {s.formula}")
        first = "first row " if s.values.ndim > 1 else ""
        lines.append(f"    max |Δ| {s.max_abs_diff:.1e} (fp32 {s.fp32_max_abs_diff:.1e}, "
                     f"{s.fp32_rel_diff:.0e} of max |value| {s.scale:.3g})   "
                     f"{first}{_few(s.values)}")
    if walk.worst_diff <= TOLERANCE:
        lines.append(f"every step equals the model's: largest max |Δ| {walk.worst_diff:.1e} (≤ {TOLERANCE:g})")
    else:
        lines.append(f"warning: a step differs from the model by {walk.worst_diff:.1e} (> {TOLERANCE:g})")
    return "\n".join(lines)
