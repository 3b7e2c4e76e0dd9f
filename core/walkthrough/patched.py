"""Step by step through sentence A patched from sentence B: where A's computation is overwritten.

Activation patching (core/intervene/patching.py) runs A with the numbers at some sites taken from
B: a head's output, an FFN's output, the residual stream after a block. The walkthrough follows it
on both of its sides, each on its own:
  * NumPy: B runs through numpy_ref (with the rest of the intervention, as capture_sites runs it)
    and its numbers at each site are put at A's aligned positions (``numpy_sources``); A's NumPy
    steps take them there (numpy_ref.patch_rows);
  * the model: capture_sites records B on the torch encoder and A runs inside ``intervene`` with
    those numbers (``model_sources``), A's own value before the patch recorded by a hook that runs
    first (capture.py).
At the drawn layer each patched value is a step of its own (PATCH_STEPS) right after A's own value,
so a learner sees where B's numbers came in; every later step is A's maths on the patched state,
and each is checked against the intervened model.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from core.errors import InputError
from core.walkthrough import numpy_ref as nr

PATCH_STEPS = ("patched_head", "patched_ffn", "patched_resid")
KIND_STEP = {"head": "patched_head", "ffn": "patched_ffn", "resid": "patched_resid"}


def with_patch_steps(order: tuple, norm: str) -> tuple:
    """A walk's step order with each patched step right after the value it replaces: the shown
    head's output, the FFN's output, the block's output (layernorm_2 post-norm, residual_2 pre)."""
    after = {"head_output": "patched_head", "ffn_output": "patched_ffn",
             ("residual_2" if norm == "pre" else "layernorm_2"): "patched_resid"}
    return tuple(n for name in order for n in (name, after.get(name)) if n is not None)


@dataclass(frozen=True)
class PatchFrom:
    """What a patch needs beyond its sites: the sentence it was aligned to (A), the sentence its
    numbers come from (B), and which of B's tokens each of A's positions takes."""
    text_a: str
    text_b: str
    alignment: object = None        # core.intervene.patching.Alignment (patched_run's); None: worked out here
    model: str = ""                 # the model it was aligned with ("": any)


@dataclass
class Plan:
    """A patch the walk follows: its sites (A's positions), their alignment, and B's token ids."""
    sites: tuple
    alignment: object
    ids_b: list
    text_b: str


def plan(ref, spec, patch_from: PatchFrom | None, text: str, pair: str | None,
         tokens_a: list) -> tuple[Plan | None, str]:
    """The patch to follow for a walk of ``text`` (None and the reason when it cannot be)."""
    sites = ", ".join(s.describe() for s in spec.patch)
    if patch_from is None:
        return None, f"patching ({sites}) is not followed step by step: no sentence B came with it"
    if pair and pair.strip():
        return None, f"patching ({sites}) is followed for one sentence, not for a pair"
    if text.strip() != patch_from.text_a.strip():
        return None, (f"patching ({sites}) is followed on its sentence A ({patch_from.text_a!r}), "
                      "not on this sentence")
    ids, _ = ref.encode_ids([patch_from.text_b])
    tokens_b = ref.tokenizer.convert_ids_to_tokens(ids[0])
    alignment = patch_from.alignment
    fits = (alignment is not None and list(alignment.tokens_a) == list(tokens_a)
            and list(alignment.tokens_b) == list(tokens_b) and all(s in alignment.pairs for s in spec.patch))
    if not fits:
        try:
            alignment = align_again(spec.patch, tokens_a, tokens_b)
        except InputError as e:
            return None, f"patching ({sites}) is not followed step by step: {e}"
    return Plan(tuple(spec.patch), alignment, ids[0], patch_from.text_b), ""


def align_again(sites, tokens_a: list, tokens_b: list):
    """The Alignment of resolved sites (A's positions): position by position when A and B have as
    many tokens, else the word at A's position found once in B (patching.resolve_token)."""
    from core.intervene.patching import align
    same = len(tokens_a) == len(tokens_b)
    typed = [(replace(s, token=None), None if s.token is None else str(s.token) if same else tokens_a[s.token])
             for s in sites]
    _, alignment = align(typed, tokens_a, tokens_b)
    return alignment


def walk_note(patch: Plan, layer: int) -> str:
    """What the walk's summary says about the patch it follows."""
    sites = ", ".join(s.describe() for s in patch.sites)
    here = [KIND_STEP[k] for k in sorted(kinds_at(patch.sites, layer))]
    where = ("the steps 'Patched from B' show where" if here else
             f"layer {layer + 1} has no patched site: choose layer "
             f"{', '.join(sorted({str(s.layer + 1) for s in patch.sites}))} to see where")
    return (f"patched from sentence B ({patch.text_b!r}) at {sites}: {where} A's numbers are replaced by B's; "
            "every step is checked against the model patched the same way")


# ---------------------------------------------------------------------------------- B's numbers

def model_sources(encoder, patch: Plan, n_tokens_a: int, rest, means):
    """{site: (1, T_A, D)} B's numbers from the torch ``encoder`` (capture_sites), for intervene."""
    import torch

    from core.intervene.patching import capture_sites
    from core.intervene.spec import NOTHING
    device = next(encoder.parameters()).device
    return capture_sites(encoder, torch.tensor([patch.ids_b], device=device), patch.alignment, n_tokens_a,
                         NOTHING if rest is None else rest, means)


def numpy_sources(p: dict, cfg, patch: Plan, n_tokens_a: int, rest, means) -> dict:
    """{site: (T_A, D)} B's numbers at each site, computed in NumPy: B runs through every block
    with ``rest`` (the intervention without its patches) and each site's value, as the block
    computed it, is put at A's aligned positions."""
    ids = np.asarray(patch.ids_b)
    seen = nr.attention_keep(np.ones(len(ids), bool), cfg.attention == "causal")
    dh = cfg.dim // cfg.n_heads
    x = nr.embed(p, cfg, ids, switch=rest)
    raw = {}
    for i in range(cfg.n_layers):
        switched = {} if rest is None else nr.switch_arguments(rest, i, dh, means)
        s = nr.block_steps(x, p, f"transformer.layer.{i}", cfg, nr.layer_keep(seen, rest, i, cfg.n_heads),
                           **switched)
        raw["head", i] = nr.merge_heads(s["computed_head_outputs"])
        raw["ffn", i] = s["computed_ffn_output"]
        raw["resid", i] = s["output"]
        x = x if rest is not None and i in rest.skip else s["output"]
    out = {}
    for site, mapping in patch.alignment.pairs.items():
        b = raw[site.kind, site.layer]
        placed = np.zeros((n_tokens_a, b.shape[-1]))
        for pa, pb in mapping.items():
            placed[pa] = b[pb]
        out[site] = placed
    return out


# ---------------------------------------------------------------------------------- the steps

def shown_head(sites, layer: int, head: int) -> int | None:
    """The head whose patched output the walk shows at ``layer``: the chosen one when it is
    patched, else the first patched head there (None: no head patched there)."""
    heads = sorted({s.head for s in sites if s.layer == layer and s.kind == "head"})
    return None if not heads else head if head in heads else heads[0]


def kinds_at(sites, layer: int) -> set:
    return {s.kind for s in sites if s.layer == layer}


def numpy_patched_steps(v: dict, sites, layer: int, head: int, dh: int) -> dict:
    """The head-patch steps of the drawn layer from block_steps' values: patched_head (the shown
    head's columns of the patched concatenation), and head_output as A computed it."""
    h = shown_head(sites, layer, head)
    if h is None:
        return {}
    out = {"patched_head": v["heads_concat"][:, h * dh:(h + 1) * dh]}
    if h == head:
        out["head_output"] = v["computed_head_outputs"][head]
    return out


def model_patched_steps(vals: dict, sites, layer: int, head: int, dh: int) -> dict:
    """The same steps from the intervened torch run (capture.py's names): the value after the
    patch hook, and A's own value before it (the hooks that ran first)."""
    kinds, out = kinds_at(sites, layer), {}
    h = shown_head(sites, layer, head)
    if h is not None:
        out["patched_head"] = vals["heads_concat"][:, h * dh:(h + 1) * dh]
        if h == head:
            out["head_output"] = vals["heads_concat_own"][:, h * dh:(h + 1) * dh]
    if "ffn" in kinds:
        out.update(patched_ffn=vals["ffn_output"], ffn_output=vals["ffn_output_own"])
    if "resid" in kinds:
        out["patched_resid"] = vals["layer_output"]
    return out


def patched_rows(name: str, patch: Plan, layer: int, head: int) -> dict:
    """{A's position: B's position} of the rows B's numbers replace in step ``name``."""
    kind = {v: k for k, v in KIND_STEP.items()}[name]
    h = shown_head(patch.sites, layer, head) if kind == "head" else None
    rows = {}
    for site, mapping in patch.alignment.pairs.items():
        if site.layer == layer and site.kind == kind and (h is None or site.head == h):
            rows.update(mapping)
    return rows


def row_labels(name: str, patch: Plan, layer: int, head: int, tokens_a: list) -> list:
    """A's tokens, the patched ones marked with B's token: "cat ← dog (B)"."""
    rows = patched_rows(name, patch, layer, head)
    tokens_b = patch.alignment.tokens_b
    return [f"{t} ← {tokens_b[rows[i]]} (B)" if i in rows else t for i, t in enumerate(tokens_a)]


def describe_patch(name: str, patch: Plan, layer: int, head: int, tokens_a: list, cfg) -> dict:
    """Title, formula, description and shapes of a patched step, in the walkthrough's words."""
    rows = patched_rows(name, patch, layer, head)
    tokens_b = patch.alignment.tokens_b
    T, D, dh = len(tokens_a), cfg.dim, cfg.dim // cfg.n_heads
    every = len(rows) == T and all(a == b for a, b in rows.items())
    where = ("at every token (B's token at the same position)" if every else
             "at " + ", ".join(f"token {a} {tokens_a[a]!r} (B's {tokens_b[b]!r})" for a, b in sorted(rows.items())))
    L = layer + 1
    if name == "patched_head":
        h = shown_head(patch.sites, layer, head) + 1
        what, symbol, shape = f"head {L}.{h}'s output", f"O_{h}", f"{T} × {dh}"
        others = sorted({s.head + 1 for s in patch.sites if s.layer == layer and s.kind == "head"} - {h})
        after = ("It goes into the heads' concatenation in place of A's" +
                 (f" (heads {', '.join(map(str, others))} of this layer are patched too)" if others else "") + ".")
    elif name == "patched_ffn":
        what, symbol, shape = f"the FFN's output, layer {L}", "FFN(x)", f"{T} × {D}"
        after = "The residual add below adds B's numbers there instead of A's."
    else:
        what, symbol, shape = f"layer {L}'s output (the residual stream)", f"h_{L}", f"{T} × {D}"
        after = "The next layer (or the pooling) reads B's numbers there instead of A's."
    return {"title": f"Patched from B: {what}",
            "formula": f"{symbol}[t] ← {symbol}ᴮ[t′] at the patched tokens t (B's aligned t′); A's own elsewhere",
            "description": (f"Activation patching: sentence B ({patch.text_b!r}) ran through the same model, and "
                            f"{what} {where} is B's, not A's: this value is B's there. {after} Every step after "
                            "this one is A's maths on the patched state."),
            "shape_text": f"{shape} (the rows marked ← are B's)"}


def patched_mark(name: str, patch: Plan, layer: int, head: int, n_tokens: int) -> np.ndarray:
    """1 for each row B's numbers replaced, 0 elsewhere (the step view's per-token column)."""
    mark = np.zeros(n_tokens)
    mark[list(patched_rows(name, patch, layer, head))] = 1.0
    return mark
