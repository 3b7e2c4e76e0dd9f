"""Checking a migrate copy row by row, by id (never by position).

1. The copy: after copying, the source is read again and each row's text and vector are compared
   with the destination's row for the id it was copied to (`expected_rows` then
   `compare_destination`). Vectors are compared through a small random projection (a sketch of
   16 numbers per row), so the check holds one short row per sentence in memory, not the
   vectors: the same vector (renormalised) gives the same sketch to ~1e-6, another sentence's
   vector a different one in every coordinate.
2. The meaning (`migrate --verify`): a sample of the destination's texts is embedded again with
   the store's model and compared with the stored vectors (`reembedding_mismatches`). This is
   what catches a source whose rows already held another sentence's vector (for example a Milvus
   Lite store read back after a crash recovery), which a copy check alone would faithfully
   reproduce.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from index.store.text_hash import text_hash

SKETCH = 16                 # numbers per row in the copy check
SKETCH_TOLERANCE = 1e-3     # |difference| above this in any of them: another vector
REEMBED_MIN_COSINE = 0.999  # the same text through the same model, same machine: ~1.0


def sketcher(dim: int):
    """vectors (n, dim) -> sketches (n, SKETCH): a fixed random projection."""
    proj = np.random.default_rng(20261123).standard_normal((dim, SKETCH)).astype(np.float32)

    def sketch(vectors) -> np.ndarray:
        return np.asarray(vectors, np.float32) @ proj
    return sketch


@dataclass
class Expected:
    """What the destination should hold, from a second read of the source, by destination id."""
    ids: np.ndarray              # destination ids, sorted
    digests: np.ndarray          # (n,) bytes: text_hash of each row's text
    sketches: np.ndarray         # (n, SKETCH) float32
    unmapped: list               # source ids read now that the copy never saw


def expected_rows(src, id_map: dict, batch: int) -> Expected:
    """Read the source again; for each row, what its copy (id_map[source id]) must hold."""
    sketch = sketcher(src.dim)
    ids, digests, sketches, unmapped = [], [], [], []
    for src_ids, vecs, recs in src.iter_batches(batch):
        sk = sketch(vecs)
        for k, (sid, rec) in enumerate(zip(src_ids.tolist(), recs)):
            did = id_map.get(sid)
            if did is None:
                unmapped.append(sid)
                continue
            ids.append(did)
            digests.append(text_hash(rec["text"]))
            sketches.append(sk[k])
    order = np.argsort(np.asarray(ids, np.int64), kind="stable")
    return Expected(np.asarray(ids, np.int64)[order],
                    np.asarray(digests, dtype=object)[order] if digests else np.zeros(0, object),
                    (np.stack(sketches)[order] if sketches
                     else np.zeros((0, SKETCH), np.float32)),
                    unmapped)


@dataclass
class Comparison:
    checked: int = 0                                   # destination rows compared
    wrong_text: list = field(default_factory=list)     # ids whose text is not the source's
    wrong_vector: list = field(default_factory=list)   # ids whose vector is not the source's
    missing: list = field(default_factory=list)        # ids the copy went to, not there
    sample: list = field(default_factory=list)         # (id, text, vector) to re-embed


def compare_destination(dst, exp: Expected, batch: int, sample_ids=()) -> Comparison:
    """Read the destination; compare every row that is a copy with what exp says."""
    sketch = sketcher(dst.dim)
    cmp = Comparison()
    found = np.zeros(len(exp.ids), bool)
    sample_ids = {int(i) for i in sample_ids}
    for ids, vecs, recs in dst.iter_batches(batch):
        pos = np.searchsorted(exp.ids, ids)
        pos[pos >= len(exp.ids)] = 0
        hit = (exp.ids[pos] == ids) if len(exp.ids) else np.zeros(len(ids), bool)
        if not hit.any():
            continue
        sk = sketch(vecs[hit])
        for k, (p, i, rec) in enumerate(zip(pos[hit], ids[hit].tolist(),
                                            [r for r, h in zip(recs, hit) if h])):
            found[p] = True
            cmp.checked += 1
            if text_hash(rec["text"]) != exp.digests[p]:
                cmp.wrong_text.append(i)
            elif np.max(np.abs(sk[k] - exp.sketches[p])) > SKETCH_TOLERANCE:
                cmp.wrong_vector.append(i)
            if i in sample_ids:
                cmp.sample.append((i, rec["text"], vecs[hit][k]))
    cmp.missing = exp.ids[~found].tolist()
    return cmp


def reembedding_mismatches(rows, backend, pooling: str, batch_size: int = 32):
    """(id, cosine) of each sampled row whose stored vector is not its text's embedding."""
    if not rows:
        return []
    ids = [i for i, _, _ in rows]
    ref = np.asarray(backend.embed([t for _, t, _ in rows], pooling=pooling,
                                   batch_size=batch_size), np.float32)
    ref /= np.maximum(np.linalg.norm(ref, axis=1, keepdims=True), 1e-12)
    stored = np.stack([v for _, _, v in rows]).astype(np.float32)
    stored /= np.maximum(np.linalg.norm(stored, axis=1, keepdims=True), 1e-12)
    cos = np.einsum("ij,ij->i", ref, stored)
    return [(i, float(c)) for i, c in zip(ids, cos) if c < REEMBED_MIN_COSINE]
