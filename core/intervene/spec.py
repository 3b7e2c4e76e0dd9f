"""What an intervention switches off or replaces: one small frozen value, combinable with ``|``.

Indices inside are 0-based (layer 0 is the first block); ``parse_heads``/``parse_site`` read the
1-based form people type and ``describe`` writes it back, so "3.5" is layer 3, head 5 everywhere
a person looks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from core.errors import InputError

HEAD_MODES = ("zero", "mean")
POSITION_MODES = ("keep", "off", "shuffle")
SITE_KINDS = ("head", "resid", "ffn")


@dataclass(frozen=True)
class Site:
    """Where activation patching takes B's numbers into A's run (0-based layer and head).

    kind "head": the head's output (its slice of the heads' concatenation, the site Lk.heads);
    "resid": the residual stream after the block; "ffn": the FFN's output before its residual
    add. token None = every token (A and B must then have the same length); else one position."""
    kind: str
    layer: int
    head: int | None = None
    token: int | None = None

    def __post_init__(self):
        if self.kind not in SITE_KINDS:
            raise InputError(f"a patching site is one of {', '.join(SITE_KINDS)}, not {self.kind!r}")
        if (self.kind == "head") != (self.head is not None):
            raise InputError("a head site names its head (L5.H3); resid and ffn sites name none")

    def describe(self) -> str:
        where = "" if self.token is None else f"@{self.token}"
        if self.kind == "head":
            return f"L{self.layer + 1}.H{self.head + 1}{where}"
        return f"L{self.layer + 1}.{self.kind}{where}"


@dataclass(frozen=True)
class Intervention:
    """Everything switched off or replaced in one forward pass. The empty value changes nothing.

    heads: (layer, head) pairs whose output is zeroed (head_mode "zero") or replaced by its mean
    over a corpus ("mean": the rest of the network keeps seeing an output of the usual size and
    direction, so the measured drop is the head's information, not a shock to the layers after).
    attention_off / ffn_off: blocks whose attention or FFN residual branch is removed (post-norm:
    x -> LN(x + 0)); skip: blocks passed through unchanged. positions: "off" drops the position
    embeddings, "shuffle" gives the tokens a seeded permutation of their positions.
    no_scale drops the 1/sqrt(d_k) of the attention scores; temperature divides them further.
    patch: sites whose activations come from another sentence (see patching.py).
    cuts: attention edges knocked out (edges.Cut: query may not look at key; see edges.py)."""
    heads: frozenset = field(default_factory=frozenset)
    head_mode: str = "zero"
    attention_off: frozenset = field(default_factory=frozenset)
    ffn_off: frozenset = field(default_factory=frozenset)
    skip: frozenset = field(default_factory=frozenset)
    positions: str = "keep"
    shuffle_seed: int = 0
    no_scale: bool = False
    temperature: float = 1.0
    patch: tuple = ()
    cuts: frozenset = field(default_factory=frozenset)

    def __post_init__(self):
        for name in ("heads", "attention_off", "ffn_off", "skip", "cuts"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        object.__setattr__(self, "patch", tuple(self.patch))
        if self.head_mode not in HEAD_MODES:
            raise InputError(f"head ablation is 'zero' or 'mean', not {self.head_mode!r}")
        if self.positions not in POSITION_MODES:
            raise InputError(f"positions are 'keep', 'off' or 'shuffle', not {self.positions!r}")
        if not self.temperature > 0:
            raise InputError(f"a softmax temperature must be above 0, not {self.temperature!r}")

    @property
    def is_empty(self) -> bool:
        return self == Intervention()

    def score_factor(self, head_dim: int) -> float:
        """What the attention scores are multiplied by, beyond the model's own 1/sqrt(d_k)."""
        return (head_dim ** 0.5 if self.no_scale else 1.0) / self.temperature

    def check(self, n_layers: int, n_heads: int) -> None:
        """Refuse a layer or head the model does not have, in the 1-based words people use."""
        for layer, head in self.heads:
            if not (0 <= layer < n_layers and 0 <= head < n_heads):
                raise InputError(f"head {layer + 1}.{head + 1} does not exist: this model has layers "
                                 f"1-{n_layers} and heads 1-{n_heads}")
        for layer in (*self.attention_off, *self.ffn_off, *self.skip, *(s.layer for s in self.patch)):
            if not 0 <= layer < n_layers:
                raise InputError(f"layer {layer + 1} does not exist: this model has layers 1-{n_layers}")
        for s in self.patch:
            if s.head is not None and not 0 <= s.head < n_heads:
                raise InputError(f"head {s.head + 1} does not exist: this model has heads 1-{n_heads}")
        from core.intervene.edges import check_cuts
        check_cuts(self.cuts, n_layers, n_heads)

    def within(self, n_layers: int, n_heads: int) -> Intervention:
        """The same intervention without the parts a model of ``n_layers`` x ``n_heads`` lacks
        (a switch to a smaller model keeps positions, scaling and the layers it has)."""
        has = lambda layer: 0 <= layer < n_layers            # noqa: E731
        return replace(self, heads={(l, h) for l, h in self.heads if has(l) and 0 <= h < n_heads},
                       attention_off={l for l in self.attention_off if has(l)},
                       ffn_off={l for l in self.ffn_off if has(l)}, skip={l for l in self.skip if has(l)},
                       patch=tuple(s for s in self.patch if has(s.layer) and (s.head is None or s.head < n_heads)),
                       cuts={c for c in self.cuts if has(c.layer) and (c.head is None or c.head < n_heads)})

    def __or__(self, other: Intervention) -> Intervention:
        """Both interventions at once. Where both set a mode, the right one's wins."""
        d = Intervention()
        return Intervention(
            heads=self.heads | other.heads,
            head_mode=other.head_mode if other.head_mode != d.head_mode else self.head_mode,
            attention_off=self.attention_off | other.attention_off,
            ffn_off=self.ffn_off | other.ffn_off, skip=self.skip | other.skip,
            positions=other.positions if other.positions != d.positions else self.positions,
            shuffle_seed=other.shuffle_seed if other.positions == "shuffle" else self.shuffle_seed,
            no_scale=self.no_scale or other.no_scale, temperature=self.temperature * other.temperature,
            patch=self.patch + tuple(s for s in other.patch if s not in self.patch),
            cuts=self.cuts | other.cuts)

    def without_patch(self) -> Intervention:
        return replace(self, patch=())

    def describe(self) -> str:
        """One line for people, 1-based: "heads 3.5, 4.1 zeroed; FFN 2 off"."""
        parts = []
        if self.heads:
            names = ", ".join(f"{l + 1}.{h + 1}" for l, h in sorted(self.heads))
            parts.append(f"heads {names} {'zeroed' if self.head_mode == 'zero' else 'mean-ablated'}")
        for name, layers in (("attention", self.attention_off), ("FFN", self.ffn_off)):
            if layers:
                parts.append(f"{name} {', '.join(str(l + 1) for l in sorted(layers))} off")
        if self.skip:
            parts.append(f"layer {', '.join(str(l + 1) for l in sorted(self.skip))} skipped")
        if self.positions == "off":
            parts.append("positions off")
        elif self.positions == "shuffle":
            parts.append(f"positions shuffled (seed {self.shuffle_seed})")
        if self.no_scale:
            parts.append("no 1/sqrt(d_k) scaling")
        if self.temperature != 1.0:
            parts.append(f"softmax temperature {self.temperature:g}")
        if self.patch:
            parts.append("patched " + ", ".join(s.describe() for s in self.patch))
        if self.cuts:
            parts.append("attention edges cut " + ", ".join(sorted(c.describe() for c in self.cuts)))
        return "; ".join(parts) or "nothing switched off"


def parse_layers(text: str, what: str = "layer") -> frozenset:
    """ "2,4" (1-based) -> {1, 3}."""
    out = set()
    for part in _parts(text):
        if not part.isdigit() or int(part) < 1:
            raise InputError(f"{what} {part!r} is not a layer number: layers count from 1 (e.g. 2)")
        out.add(int(part) - 1)
    return frozenset(out)


def parse_heads(text: str) -> frozenset:
    """ "3.5,4.1" (layer.head, both from 1) -> {(2, 4), (3, 0)}."""
    out = set()
    for part in _parts(text):
        m = re.fullmatch(r"(\d+)\.(\d+)", part)
        if not m or int(m[1]) < 1 or int(m[2]) < 1:
            raise InputError(f"head {part!r} is not LAYER.HEAD: both count from 1, e.g. 3.5 is layer 3, head 5")
        out.add((int(m[1]) - 1, int(m[2]) - 1))
    return frozenset(out)


_SITE = re.compile(r"L(\d+)\.(?:H(\d+)|(resid|ffn))(?:@(.+))?", re.IGNORECASE)


def parse_site(text: str) -> tuple[Site, str | None]:
    """ "L5.H3", "L5.resid@cat", "L5.ffn@3" -> (Site, the token as typed or None). The token is
    resolved against sentence A's tokens by patching.align (a word or a 0-based position)."""
    m = _SITE.fullmatch(text.strip())
    if not m or int(m[1]) < 1 or (m[2] is not None and int(m[2]) < 1):
        raise InputError(f"site {text!r} is not one of L5.H3, L5.resid@TOKEN, L5.ffn (layers and heads from 1)")
    layer = int(m[1]) - 1
    if m[2] is not None:
        return Site("head", layer, int(m[2]) - 1), m[4]
    return Site(m[3].lower(), layer), m[4]


def _parts(text: str) -> list[str]:
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if not parts:
        raise InputError("give at least one number (e.g. 3.5 for layer 3, head 5)")
    return parts


def shuffled_positions(n_tokens: int, seed: int) -> list[int]:
    """The position each token gets when positions are shuffled: a permutation of 0..T-1, the
    same for the same (T, seed) in torch, NumPy and every run."""
    import numpy as np
    return np.random.default_rng(seed).permutation(n_tokens).tolist()


NOTHING = Intervention()     # the empty intervention: the model as it is
