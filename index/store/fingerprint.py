"""Model fingerprints as the store keeps them (plain dicts on disk) and the mismatch check.

Comparison follows core.encoder.fingerprint.Fingerprint.compatible (same weights, config and tokenizer
files, pooling, dim, normalisation, precision policy; the name is only for people).
"""
from __future__ import annotations

from core.encoder.fingerprint import Fingerprint
from index.store.errors import ModelMismatch


def as_dict(fp) -> dict:
    if fp is None:
        return None
    if isinstance(fp, dict):
        return dict(fp)
    return fp.to_dict()


def from_dict(d: dict) -> Fingerprint:
    return Fingerprint.from_dict(d)


def describe(d: dict) -> str:
    try:
        return from_dict(d).describe()
    except Exception:  # a foreign or partial dict: still say something useful
        return f"{d.get('model', '?')} ({d.get('pooling', '?')} pooling, {d.get('dim', '?')}-d)"


def compatible(a: dict, b: dict) -> bool:
    return a == b or from_dict(a).compatible(from_dict(b))


def only_network_differs(a: dict, b: dict) -> bool:
    """The same weights, pooling and width, but other config or tokenizer files."""
    fa, fb = from_dict(a), from_dict(b)
    return (fa.weights_sha256, fa.pooling, fa.dim, fa.whitening) == \
        (fb.weights_sha256, fb.pooling, fb.dim, fb.whitening) and not fa.compatible(fb)


def check(store_fp: dict, other, what: str, where: str = "", hint: str = "", rebuild: dict | None = None,
          remedy=None) -> None:
    """Raise ModelMismatch unless `other` (a Fingerprint or dict) matches the store's model;
    `rebuild` (see ModelMismatch) travels with it. `remedy`, a callable giving {"hint", "rebuild"},
    is called only on a mismatch: the hint may cost a count of the store."""
    if other is None:
        return
    other = as_dict(other)
    if compatible(store_fp, other):
        return
    if remedy is not None:
        found = remedy()
        hint, rebuild = found["hint"], found["rebuild"]
    msg = (f"{what} come from {describe(other)}, but the store{(' ' + where) if where else ''} "
           f"was built with {describe(store_fp)}")
    if hint:
        msg += f"; {hint}"
    raise ModelMismatch(msg, store_model=store_fp.get("model"), other_model=other.get("model"), rebuild=rebuild)


def unchanged_since_embedding(store_fp: dict, embedded_with, where: str) -> None:
    """Before a commit, under the store's lock: the store still takes vectors of the model the
    texts were embedded with. A rebuild (another job on the same store, another writer of a
    server) may have re-embedded it with another model or pooling meanwhile; committing then
    would mix two in one store. ModelMismatch, in words, when it did."""
    other = as_dict(embedded_with)
    if compatible(store_fp, other):
        return
    raise ModelMismatch(
        f"the store {where} was re-embedded with {describe(store_fp)} while this writer embedded "
        f"texts with {describe(other)}; nothing more was written: what was added before is "
        "kept; run the command again", store_model=store_fp.get("model"),
        other_model=other.get("model"))
