"""The inspector's attention maps: pick a head, average a layer, roll out across layers,
hide special tokens, and export them to files. Pure numpy; no Qt, no torch.

Conventions
-----------
``attentions`` is the array ``Backend.inspect(text).attentions``: shape ``(L, H, T, T)``,
``attentions[l, h, i, j]`` = how much query token ``i`` attends to key token ``j`` in head
``h`` of layer ``l`` (0-based). Every row (fixed ``l, h, i``) is a softmax, so it sums to 1.

Aggregations (``aggregate(..., mode=...)``) all return one ``(T, T)`` matrix whose rows sum
to 1:

* ``"head"``    - one head of one layer, as the model computed it.
* ``"mean"``    - the mean over the heads of one layer.
* ``"rollout"`` - attention rollout (Abnar & Zuidema, 2020, "Quantifying Attention Flow in
  Transformers"). The residual connection is modelled by adding the identity to each layer's
  head-averaged attention and renormalising the rows, ``Â_l = (A_l + I) / 2``; the layers are
  then multiplied through: ``R_l = Â_l @ Â_{l-1} @ ... @ Â_0``. ``R_l[i, j]`` estimates how much
  of token ``j``'s input reaches token ``i``'s representation after layer ``l``. A product of
  row-stochastic matrices is row-stochastic, so the rows still sum to 1.

Hiding special tokens
---------------------
``hide(matrix, keep)`` removes rows and columns (e.g. [CLS]/[SEP]/[PAD]). By default the kept
weights are shown **as they are (not renormalised)**: the rows then sum to less than 1, and
the missing mass is exactly what went to the hidden tokens - an honest picture, which matters
because heads often park most of their weight on [SEP]. ``renormalise=True`` rescales each
kept row to sum to 1 instead (the share among the visible tokens). Aggregation (mean,
rollout) always runs on the full matrices first; hiding is applied to the result.
"""
from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from core.files.atomic import atomic_write_with

MODES = ("head", "mean", "rollout")
MODE_LABELS = {"head": "Single head", "mean": "Mean over heads", "rollout": "Attention rollout"}
# Special tokens of the tokenizers Encoderscope meets (BERT/DistilBERT/MiniLM WordPiece; RoBERTa-style BPE).
SPECIAL_TOKENS = frozenset({"[CLS]", "[SEP]", "[PAD]", "<s>", "</s>", "<pad>", "<cls>", "<sep>"})
PAD_TOKENS = frozenset({"[PAD]", "<pad>"})


# ---------------------------------------------------------------------------- validation

def check_attentions(attentions) -> np.ndarray:
    """Return ``attentions`` as a float array of shape (L, H, T, T) or raise ValueError."""
    a = np.asarray(attentions)
    if a.ndim != 4 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"attentions must have shape (layers, heads, T, T), not {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float32)
    return a


def _check_index(name: str, i: int, n: int) -> int:
    i = int(i)
    if not 0 <= i < n:
        raise ValueError(f"{name} {i} is out of range: this model has {n} (0..{n - 1})")
    return i


# ---------------------------------------------------------------------------- aggregations

def head_matrix(attentions, layer: int, head: int) -> np.ndarray:
    """One head: ``attentions[layer, head]`` (T, T)."""
    a = check_attentions(attentions)
    return a[_check_index("layer", layer, a.shape[0]), _check_index("head", head, a.shape[1])]


def layer_mean(attentions, layer: int) -> np.ndarray:
    """Mean over the heads of one layer (T, T); rows still sum to 1."""
    a = check_attentions(attentions)
    return a[_check_index("layer", layer, a.shape[0])].mean(axis=0)


def add_residual(matrix: np.ndarray) -> np.ndarray:
    """``(A + I)`` with rows renormalised to 1: for a row-stochastic A this is ``(A + I) / 2``."""
    m = np.asarray(matrix, dtype=np.float64)
    m = m + np.eye(m.shape[-1])
    return m / m.sum(axis=-1, keepdims=True)


def rollout_layers(attentions, residual: bool = True) -> np.ndarray:
    """Attention rollout after every layer: (L, T, T) float64, ``out[l] = Â_l @ ... @ Â_0``.

    ``Â_l`` is the head-mean of layer ``l``, plus the identity and renormalised when
    ``residual`` (the Abnar & Zuidema recipe); without it, the raw head-means are multiplied.
    """
    a = check_attentions(attentions).astype(np.float64)
    mean = a.mean(axis=1)                                   # (L, T, T)
    out = np.empty_like(mean)
    acc = np.eye(a.shape[-1])
    for l in range(a.shape[0]):
        step = add_residual(mean[l]) if residual else mean[l]
        acc = step @ acc
        out[l] = acc
    return out


def rollout(attentions, upto: int | None = None, residual: bool = True) -> np.ndarray:
    """Attention rollout through layers 0..``upto`` (default: all layers), (T, T)."""
    a = check_attentions(attentions)
    upto = a.shape[0] - 1 if upto is None else _check_index("layer", upto, a.shape[0])
    return rollout_layers(a[: upto + 1], residual=residual)[-1]


def aggregate(attentions, mode: str = "head", layer: int = 0, head: int = 0) -> np.ndarray:
    """One (T, T) matrix for the view: ``mode`` in MODES (see the module docstring).

    For "rollout", ``layer`` is the last layer rolled through (layers 0..layer).
    """
    if mode == "head":
        return head_matrix(attentions, layer, head)
    if mode == "mean":
        return layer_mean(attentions, layer)
    if mode == "rollout":
        return rollout(attentions, upto=layer)
    raise ValueError(f"unknown aggregation {mode!r}: use one of {', '.join(MODES)}")


# ---------------------------------------------------------------------------- hiding tokens

def keep_indices(tokens: Sequence[str], hide_special: bool = False, hide_padding: bool = True) -> np.ndarray:
    """Indices of the tokens to show. ``hide_special`` drops [CLS]/[SEP]/[PAD] (and the BPE
    equivalents); ``hide_padding`` drops padding alone."""
    drop = SPECIAL_TOKENS if hide_special else (PAD_TOKENS if hide_padding else frozenset())
    return np.array([i for i, t in enumerate(tokens) if t not in drop], dtype=np.int64)


def hide(matrix, keep: Sequence[int] | np.ndarray, renormalise: bool = False) -> np.ndarray:
    """Keep only the rows and columns in ``keep``; see the module docstring for ``renormalise``."""
    m = np.asarray(matrix)
    keep = np.asarray(keep, dtype=np.int64)
    sub = m[np.ix_(keep, keep)] if m.ndim == 2 else m[..., keep[:, None], keep[None, :]]
    if renormalise:
        sums = sub.sum(axis=-1, keepdims=True)
        sub = np.divide(sub, sums, out=np.zeros_like(sub, dtype=np.float64), where=sums > 0)
    return sub


# ---------------------------------------------------------------------------- summaries

def top_links(matrix, tokens: Sequence[str], k: int = 5) -> list[tuple[str, str, float]]:
    """The ``k`` largest off-diagonal weights as (query token, key token, weight)."""
    m = np.array(matrix, dtype=np.float64)
    np.fill_diagonal(m, -np.inf)
    flat = np.argsort(m, axis=None)[::-1][:k]
    out = []
    for f in flat:
        i, j = np.unravel_index(f, m.shape)
        if np.isfinite(m[i, j]):
            out.append((tokens[i], tokens[j], float(m[i, j])))
    return out


def distinct_labels(tokens: Sequence[str]) -> list[str]:
    """Tokens that occur more than once get their position (1-based), e.g. "moons@8", so a
    list of links can tell the two "moons" of a sentence pair apart; unique tokens stay as
    they are."""
    seen: dict[str, int] = {}
    for t in tokens:
        seen[t] = seen.get(t, 0) + 1
    return [f"{t}@{i + 1}" if seen[t] > 1 else t for i, t in enumerate(tokens)]


def entropy(matrix) -> np.ndarray:
    """Row entropies in nats (how spread out each query's attention is)."""
    m = np.clip(np.asarray(matrix, dtype=np.float64), 1e-12, None)
    return -(m * np.log(m)).sum(axis=-1)


# ---------------------------------------------------------------------------- export

def matrix_csv(matrix, row_labels: Sequence[str], col_labels: Sequence[str] | None = None,
               precision: int = 8) -> str:
    """A matrix as CSV text: a header row "query\\key, <col labels>", then one row per query.

    Numbers use ``repr``-exact-enough formatting (``precision`` significant digits)."""
    m = np.asarray(matrix)
    col_labels = list(row_labels if col_labels is None else col_labels)
    if m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix {m.shape} does not match {len(row_labels)} x {len(col_labels)} labels")
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["query\\key", *col_labels])
    for label, row in zip(row_labels, m):
        w.writerow([label, *(f"{float(v):.{precision}g}" for v in row)])
    return buf.getvalue()


def write_matrix_csv(path, matrix, row_labels, col_labels=None) -> Path:
    text = matrix_csv(matrix, row_labels, col_labels)
    return _atomic(Path(path), lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def read_matrix_csv(path) -> tuple[np.ndarray, list[str], list[str]]:
    """Inverse of write_matrix_csv: (matrix, row labels, column labels)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    cols = rows[0][1:]
    labels = [r[0] for r in rows[1:]]
    return np.array([[float(v) for v in r[1:]] for r in rows[1:]], dtype=np.float64), labels, cols


ALL_HEADS_HEADER = "layer,head,query_index,query_token,key_index,key_token,weight\n"


def _csv_field(text: str) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow([text])
    return buf.getvalue()


def iter_all_heads_csv(attentions, tokens: Sequence[str], precision: int = 8):
    """The all-heads CSV (see ``all_heads_csv``) in chunks: the header, then one chunk per head."""
    a = check_attentions(attentions)
    L, H, T, _ = a.shape
    if len(tokens) != T:
        raise ValueError(f"{len(tokens)} tokens for attentions over {T} positions")
    q = [_csv_field(str(t)) for t in tokens]
    # "query_index,query_token,key_index,key_token," for every (query, key), built once
    pairs = [f"{i},{q[i]},{j},{q[j]}," for i in range(T) for j in range(T)]
    fmt = f"%.{precision}g"
    yield ALL_HEADS_HEADER
    for l in range(L):
        for h in range(H):
            lead = f"{l},{h},"
            yield "".join(f"{lead}{p}{fmt % v}\n" for p, v in zip(pairs, a[l, h].ravel().tolist()))


def all_heads_csv(attentions, tokens: Sequence[str], precision: int = 8) -> str:
    """Every head as one long ("tidy") CSV: layer, head, query_index, query_token, key_index,
    key_token, weight - one line per (layer, head, query, key). Layers and heads are 0-based."""
    return "".join(iter_all_heads_csv(attentions, tokens, precision))


def _atomic(path: Path, write) -> Path:
    """Write through a temporary file next to ``path`` and rename it into place (core.files.atomic):
    a failed or cancelled export never leaves a half-written file (nor clobbers an older one).
    No fsync: an export needs no crash guarantee."""
    atomic_write_with(path, write, durable=False)
    return path


def write_all_heads_csv(path, attentions, tokens, progress=None, cancel=None) -> Path:
    """Stream the all-heads CSV to ``path`` (L*H*T*T lines: 1.2 million at 6x12 heads and 128
    tokens). ``progress(done, total, message)`` is called after each head; a set ``cancel``
    event stops it with ``core.errors.Cancelled`` and leaves no file behind."""
    path = Path(path)
    a = check_attentions(attentions)
    total = a.shape[0] * a.shape[1]

    def write(tmp):
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            for n, chunk in enumerate(iter_all_heads_csv(a, tokens)):
                if cancel is not None and cancel.is_set():
                    from core.errors import Cancelled
                    raise Cancelled("export cancelled")
                f.write(chunk)
                if progress is not None and n:
                    progress(n, total, f"head {n} of {total}")

    return _atomic(path, write)


def write_npz(path, attentions, tokens: Sequence[str], **extra) -> Path:
    """All heads as a compressed .npz: ``attentions`` (L, H, T, T) float32, ``tokens`` (T,),
    ``rollout`` (L, T, T) and any ``extra`` arrays/strings (model name, text, ...)."""
    a = check_attentions(attentions)
    path = Path(path)
    # np.savez would add ".npz" when it is missing; do the same, and report the real file.
    path = path if path.suffix == ".npz" else path.with_name(path.name + ".npz")
    arrays = {k: np.asarray(v) for k, v in extra.items()}

    def write(tmp):
        with open(tmp, "wb") as f:          # a file object: savez adds no suffix to it
            np.savez_compressed(f, attentions=a.astype(np.float32), tokens=np.array(list(tokens), dtype=str),
                                rollout=rollout_layers(a).astype(np.float32), **arrays)

    return _atomic(path, write)
