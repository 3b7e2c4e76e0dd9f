"""The encoder's sites: every place a technique reads or writes an activation, named once.

A site is named as ``encoderscope patch --site`` spells it, layers and heads counted from 1:

    name          shape         what                                          reached by (a hook on)
    words         (B, T, D)     the word vectors, before positions            post  embeddings.word_embeddings
    positions     (1, T, D)     the position vectors                          post  embeddings.position_embeddings
    embed         (B, T, D)     the embeddings' output = residual before L1   post  embeddings
    L3.resid_pre  (B, T, D)     the residual stream entering block 3          pre   block 3, its input x
    L3.q|k|v      (B, T, D)     the query, key, value projections             post  attention.q_lin | k_lin | v_lin
    L3.bias       (B|1, 1|H, 1|T, T) the additive mask the scores get         pre   block 3's attention, its mask
    L3.pattern    (B, H, T, T)  the attention weights (read only)             post  block 3's attention (its inputs)
    L3.heads      (B, T, D)     every head's output side by side              pre   attention.out_lin, its input
    L3.H5         (B, T, Dh)    head 5's output: columns 4*Dh .. 5*Dh - 1      pre   attention.out_lin, its input
    L3.attn       (B, T, D)     the attention branch (after out_lin)          post  block 3's attention
    L3.ffn        (B, T, D)     the FFN's output, before its residual add     post  block 3's ffn
    L3.resid      (B, T, D)     the residual stream after block 3             post  block 3, its output

Every hook goes through core/encoder/scoped_hooks.py: it acts only on the thread that opened the
block, and is gone when the block ends. The batched techniques (sweeps, tracing, importance) do
not hook: they call the seams of core/encoder/model.py (``attention.heads``, ``block.finish``,
``embeddings.from_words``, ``encoder.run_from``) on their own stacked tensors.

Reading and adding at the residual stream, every token (what a feature dictionary needs):

    with sites.hooks(model) as at:
        seen = at.capture("L3.resid")          # (B, T, D) after the forward: seen.value
        at.add("L3.resid", direction)          # direction (D,): added at every token
        model(input_ids, attention_mask)

``at.edit(name, fn)`` is the general write (fn(value) -> new value, same shape); ``replace`` and
``add`` take a tensor and an optional token position. Hooks run in the order they are added.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from core.encoder.model import Encoder
from core.encoder.scoped_hooks import scoped_hooks
from core.errors import InputError


@dataclass(frozen=True)
class Kind:
    """One kind of site: where its hook sits and how its value is read from and put back into
    what the hook sees (a pre-hook's args, a post-hook's args and output)."""
    key: str
    shape: str
    what: str
    hook: str                                    # "pre" or "post"
    module: Callable                             # (encoder, layer) -> the module hooked
    get: Callable                                # (module, args, out) -> the value
    put: Callable | None                         # (args, out, value) -> new args (pre) | new out (post)
    per_layer: bool = True


def _pre_first(args, out, value):
    return (value, *args[1:])


def _post_whole(args, out, value):
    return value


def _post_first(args, out, value):
    return (value, *out[1:])


def _bias(module, args, out=None):
    x, mask = args[0], args[1]
    if mask is None:          # nothing masked: the zeros a cut or a read can start from
        return torch.zeros(1, 1, 1, x.shape[1], dtype=torch.float32, device=x.device)
    return mask


def _pattern(module, args, out):
    return out[1] if out[1] is not None else module.pattern(args[0], args[1])


def _block(encoder, layer):
    return encoder.transformer.layer[layer]


def _att(encoder, layer):
    return encoder.transformer.layer[layer].attention


KINDS = {k.key: k for k in (
    Kind("words", "(B, T, D)", "the word vectors, before positions", "post",
         lambda e, _: e.embeddings.word_embeddings, lambda m, a, o: o, _post_whole, per_layer=False),
    Kind("positions", "(1, T, D)", "the position vectors", "post",
         lambda e, _: e.embeddings.position_embeddings, lambda m, a, o: o, _post_whole, per_layer=False),
    Kind("embed", "(B, T, D)", "the embeddings' output: the residual stream before block 1", "post",
         lambda e, _: e.embeddings, lambda m, a, o: o, _post_whole, per_layer=False),
    Kind("resid_pre", "(B, T, D)", "the residual stream entering the block", "pre",
         _block, lambda m, a, o=None: a[0], _pre_first),
    Kind("q", "(B, T, D)", "the query projection", "post",
         lambda e, l: _att(e, l).q_lin, lambda m, a, o: o, _post_whole),
    Kind("k", "(B, T, D)", "the key projection", "post",
         lambda e, l: _att(e, l).k_lin, lambda m, a, o: o, _post_whole),
    Kind("v", "(B, T, D)", "the value projection", "post",
         lambda e, l: _att(e, l).v_lin, lambda m, a, o: o, _post_whole),
    Kind("bias", "(B|1, 1|H, 1|T, T)", "the additive mask the attention scores get (0 or -inf)", "pre",
         _att, _bias, lambda args, out, value: (args[0], value, *args[2:])),
    Kind("pattern", "(B, H, T, T)", "the attention weights (read only)", "post", _att, _pattern, None),
    Kind("heads", "(B, T, D)", "every head's output side by side: out_lin's input", "pre",
         lambda e, l: _att(e, l).out_lin, lambda m, a, o=None: a[0], _pre_first),
    Kind("head", "(B, T, Dh)", "one head's output: its columns of out_lin's input", "pre",
         lambda e, l: _att(e, l).out_lin, lambda m, a, o=None: a[0], _pre_first),
    Kind("attn", "(B, T, D)", "the attention branch's output (after out_lin)", "post",
         _att, lambda m, a, o: o[0], _post_first),
    Kind("ffn", "(B, T, D)", "the FFN's output, before its residual add", "post",
         lambda e, l: _block(e, l).ffn, lambda m, a, o: o, _post_whole),
    Kind("resid", "(B, T, D)", "the residual stream after the block", "post",
         _block, lambda m, a, o: o[0], _post_first),
)}

_LAYER_KINDS = "|".join(k for k, v in KINDS.items() if v.per_layer and k != "head")
_NAME = re.compile(rf"(?:L(\d+)\.(?:H(\d+)|({_LAYER_KINDS})))|(words|positions|embed)", re.IGNORECASE)


@dataclass(frozen=True)
class Where:
    """A site, 0-based inside: kind (a key of KINDS), layer and head (None where it has none)."""
    kind: str
    layer: int | None = None
    head: int | None = None

    @property
    def name(self) -> str:
        if not KINDS[self.kind].per_layer:
            return self.kind
        return f"L{self.layer + 1}.H{self.head + 1}" if self.kind == "head" else f"L{self.layer + 1}.{self.kind}"


def where(name: str | Where) -> Where:
    """ "L3.resid" -> Where("resid", 2); "L5.H3" -> Where("head", 4, 2); "embed" -> Where("embed")."""
    if isinstance(name, Where):
        return name
    m = _NAME.fullmatch(str(name).strip())
    if not m or (m[1] is not None and int(m[1]) < 1) or (m[2] is not None and int(m[2]) < 1):
        raise InputError(f"site {name!r} is not one of embed, words, positions, L3.resid, L3.resid_pre, "
                         "L5.H3, L3.heads, L3.attn, L3.ffn, L3.q/k/v, L3.bias, L3.pattern (from 1)")
    if m[4] is not None:
        return Where(m[4].lower())
    layer = int(m[1]) - 1
    return Where("head", layer, int(m[2]) - 1) if m[2] is not None else Where(m[3].lower(), layer)


def site_name(kind: str, layer: int | None = None, head: int | None = None) -> str:
    """The name of a site from 0-based numbers: site_name("resid", 2) = "L3.resid"."""
    return Where(kind, layer, head).name


def table() -> list[dict]:
    """The table of site kinds, one row each: the name's form, the shape, what it is, its hook."""
    return [{"name": ("L3.H5" if k.key == "head" else f"L3.{k.key}" if k.per_layer else k.key),
             "shape": k.shape, "what": k.what, "hook": k.hook, "writable": k.put is not None}
            for k in KINDS.values()]


def encoder_in(model) -> Encoder:
    """The Encoder inside a backend, an EncoderForMaskedLM or an Encoder."""
    if isinstance(model, Encoder):
        return model
    inner = getattr(model, "encoder", None)
    if isinstance(inner, Encoder):
        return inner
    raise InputError("sites are Encoderscope's own encoder's: load the model with the from-scratch "
                     "encoder (the default)")


@dataclass
class Captured:
    """What a capture saw: ``value`` the last forward's; ``values`` every forward's in order when
    the capture keeps them all (every=True), else the last one only (a corpus loop keeps no pile)."""
    every: bool = False
    values: list = field(default_factory=list)

    def keep(self, value: torch.Tensor) -> None:
        if not self.every:
            self.values.clear()
        self.values.append(value)

    @property
    def value(self) -> torch.Tensor:
        if not self.values:
            raise InputError("the site was not reached: run a forward inside the sites.hooks block")
        return self.values[-1]


class Hooks:
    """The sites of one encoder inside one ``sites.hooks`` block (this thread only)."""

    def __init__(self, encoder: Encoder, register):
        self.encoder = encoder
        self._register = register

    def check(self, site: Where) -> Where:
        cfg = self.encoder.config
        if site.layer is not None and not 0 <= site.layer < cfg.n_layers:
            raise InputError(f"layer {site.layer + 1} does not exist: this model has layers 1-{cfg.n_layers}")
        if site.head is not None and not 0 <= site.head < cfg.n_heads:
            raise InputError(f"head {site.head + 1} does not exist: this model has heads 1-{cfg.n_heads}")
        return site

    def _columns(self, site: Where) -> slice:
        dh = self.encoder.config.dim // self.encoder.config.n_heads
        return slice(site.head * dh, (site.head + 1) * dh)

    def read(self, name: str | Where, fn, prepend: bool = False):
        """Call fn(value) with the site's value on every forward (nothing is changed). prepend:
        before the hooks already on the module (the value before an edit made there)."""
        site = self.check(where(name))
        kind = KINDS[site.kind]
        cols = self._columns(site) if site.kind == "head" else None
        module = kind.module(self.encoder, site.layer)

        def hook(m, args, out=None):
            value = kind.get(m, args, out)
            fn(value if cols is None else value[..., cols])
        return self._register(module, kind.hook, hook, prepend)

    def capture(self, name: str | Where, detach: bool = True, prepend: bool = False,
                every: bool = False) -> Captured:
        """The site's value at the last forward (every=True: at each forward), a detached copy
        (detach=False: the tensor itself, gradients and all). For a running statistic over many
        batches, ``read`` with a function is the lighter way."""
        got = Captured(every)
        self.read(name, lambda v: got.keep(v.detach().clone() if detach else v), prepend)
        return got

    def edit(self, name: str | Where, fn):
        """Put fn(value) in place of the site's value on every forward (same shape)."""
        site = self.check(where(name))
        kind = KINDS[site.kind]
        if kind.put is None:
            raise InputError(f"site {site.name} is read only: {kind.what}")
        cols = self._columns(site) if site.kind == "head" else None
        module = kind.module(self.encoder, site.layer)

        def hook(m, args, out=None):
            value = kind.get(m, args, out)
            if cols is None:
                new = fn(value)
            else:
                new = value.clone()
                new[..., cols] = fn(value[..., cols])
            return kind.put(args, out, new)
        return self._register(module, kind.hook, hook)

    def replace(self, name: str | Where, source: torch.Tensor, token: int | None = None):
        """The site's value taken from ``source`` (the site's shape, or broadcastable to it): at
        every token, or only at position ``token``."""
        return self.edit(name, lambda v: put_at(v, source, token))

    def add(self, name: str | Where, vector: torch.Tensor, token: int | None = None):
        """``vector`` added to the site's value: (D,) at every token (or one), or the site's shape."""
        def plus(v):
            if token is None:
                return v + vector.to(v)
            out = v.clone()
            out[:, token] = v[:, token] + vector.to(v)
            return out
        return self.edit(name, plus)


def put_at(value: torch.Tensor, source: torch.Tensor, token: int | None) -> torch.Tensor:
    """``value`` with ``source``'s numbers at every token, or only at position ``token``."""
    if token is None:
        if source.dim() == value.dim() and source.shape[1] != value.shape[1]:
            raise InputError(f"the source has {source.shape[1]} tokens and this run {value.shape[1]}: a site "
                             "at every token needs two sentences of the same length (or one token, @TOKEN)")
        return source.to(value).expand_as(value).clone()
    out = value.clone()
    out[:, token] = source[:, token].to(out)
    return out


@contextmanager
def hooks(model):
    """Yields the ``Hooks`` of ``model``'s encoder: capture, read, edit, replace, add. Every hook is
    this thread's only and removed when the block ends; forwards inside take the modules' path."""
    encoder = encoder_in(model)
    with scoped_hooks() as register:
        yield Hooks(encoder, register)
