"""The way to B: how far patching A from B moved A's sentence vector toward B's. One measure, used by
``encoderscope patch`` (app/cli/intervene.py), the Intervene tab (effects.toward_b) and every cell
of a patching sweep (patch_sweep.py), so the three print the same number for the same site:

    moved = (cos(patched, v_B) - cos(v_A, v_B)) / (1 - cos(v_A, v_B))

0 = A unchanged, 1 = as close to B as B itself; None when A and B have one vector (no way to go).
Every cosine is of float32 unit vectors, summed in float64 by this module's one ``cosine``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NO_GAP = 1e-12      # 1 - cos(A, B) at or below this: A and B point the same way


def cosine(x, y) -> float:
    """Cosine of two unit vectors, in float64."""
    return float(np.dot(np.asarray(x, np.float64), np.asarray(y, np.float64)))


def moved_toward_b(vector_a, vector_patched, vector_b) -> float | None:
    """How far patching moved A's unit vector toward B's, in cosine with B (see the module)."""
    gap = 1.0 - cosine(vector_a, vector_b)
    if np.array_equal(vector_a, vector_b) or gap <= NO_GAP:
        return None
    if np.array_equal(vector_patched, vector_b):
        return 1.0          # B's vector itself (float32 unit vectors' cosines can read 1.0001)
    return (cosine(vector_patched, vector_b) - cosine(vector_a, vector_b)) / gap


@dataclass
class TowardB:
    """Patching A from B: where A's vector went, measured against B's (the CLI's `patch` line)."""
    cosine_a_b: float           # A's and B's vectors, clean
    cosine_patched_b: float     # patched A's and B's
    moved: float | None         # 0 = A unchanged, 1 = as close to B as B itself; None: A and B are one vector


def toward_b(vector_a, vector_patched, vector_b) -> TowardB:
    """The whole measure of one patched run: both cosines and the share of the way."""
    return TowardB(cosine(vector_a, vector_b), cosine(vector_patched, vector_b),
                   moved_toward_b(vector_a, vector_patched, vector_b))
