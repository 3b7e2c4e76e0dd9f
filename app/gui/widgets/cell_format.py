"""The number written in a heatmap cell, chosen for the whole matrix, not for one kind of values.

    fmt = CellFormat.for_matrix(matrix)
    fmt.text(4.5281)        # "4.53" when the matrix spans about ±6.6
    fmt.text(-np.inf)       # "−∞"      (a masked score)
    fmt.text(0.0)           # "0"       (exactly zero: a padded key's weight)

Every cell of one matrix gets the same number of decimals, chosen so that its largest finite
magnitude keeps ``SIGNIFICANT`` significant digits: attention weights (≤ 1) read ".528",
raw scores (±6) "4.53", a LayerNorm output with a 40-wide outlier "41.2". A number that rounds
to zero but is not zero keeps its decimals (".00", written like its neighbours ".04", "-.01"),
so it is never confused with an exact 0.
Magnitudes too large or too small for fixed decimals are written in e-notation. Every text is
parseable by ``float`` (after the two symbols ``−∞`` / ``∞``), within half the last digit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SIGNIFICANT = 3            # digits the largest magnitude of a matrix keeps
FIXED_RANGE = (1e-3, 1e4)  # largest magnitudes written with fixed decimals; outside: e-notation
MINUS_INF, PLUS_INF = "−∞", "∞"


@dataclass(frozen=True)
class CellFormat:
    decimals: int | None        # None: e-notation with SIGNIFICANT digits

    @classmethod
    def for_matrix(cls, matrix) -> CellFormat:
        m = np.asarray(matrix, dtype=np.float64)
        finite = np.abs(m[np.isfinite(m)])
        top = float(finite.max()) if finite.size else 0.0
        if top == 0.0:
            return cls(decimals=0)
        if not FIXED_RANGE[0] <= top < FIXED_RANGE[1]:
            return cls(decimals=None)
        return cls(decimals=max(0, SIGNIFICANT - 1 - math.floor(math.log10(top))))

    def text(self, value: float) -> str:
        v = float(value)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return MINUS_INF if v < 0 else PLUS_INF
        if v == 0.0:
            return "0"
        if self.decimals is None:
            return f"{v:.{SIGNIFICANT - 1}e}"
        text = f"{v:.{self.decimals}f}"
        if float(text) == 0.0:
            text = text.lstrip("-")          # "-0.00" would read as negative
        # a leading "0." costs a character the narrow cells do not have: ".528", "-.528"
        if text.startswith("0.") and len(text) > 2:
            text = text[1:]
        elif text.startswith("-0.") and len(text) > 3:
            text = "-" + text[2:]
        return text

    def tolerance(self, value: float) -> float:
        """How far the written number may be from ``value``: half its last digit."""
        if self.decimals is None:
            return abs(float(value)) * 0.5 * 10.0 ** -(SIGNIFICANT - 1) * (1 + 1e-9)
        return 0.5 * 10.0 ** -self.decimals * (1 + 1e-9)


def parse_cell(text: str) -> float:
    """A cell's text back to a number (the inverse of ``CellFormat.text``)."""
    return {MINUS_INF: -math.inf, PLUS_INF: math.inf}.get(text) or float(text)
