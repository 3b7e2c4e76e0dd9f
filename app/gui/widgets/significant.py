"""Numbers in sentences, in significant digits, never contradicting themselves.

    sig(0.000312)                 # "0.000312"   (not "0.0003")
    sig(0.9996)                   # "0.9996"     (3 digits would round up to "1.00": a change of 1)
    before_after(0.000312, 0.000298) -> ("0.000312", "0.000298", "−1.4e-05")
    change_words(0.0)             # "no change"

Rules: a number keeps ``DIGITS`` significant digits, more when fewer would round it across a power
of ten (0.9996 is not "1") or make two different numbers read the same; a difference that is not
zero is never written as zero; an exact zero (or one under ``NO_CHANGE``) is said in words.
"""
from __future__ import annotations

import math

DIGITS = 3
MAX_DIGITS = 9
FIXED = (1e-4, 1e6)          # magnitudes written with fixed decimals; outside: e-notation
NO_CHANGE = 1e-7             # below float32 noise on values of order 1: nothing changed


def _text(x: float, digits: int) -> str:
    a = abs(x)
    if not FIXED[0] <= a < FIXED[1]:
        return f"{x:.{digits - 1}e}".replace("e-0", "e-").replace("e+0", "e")
    decimals = max(0, digits - 1 - math.floor(math.log10(a)))
    return f"{x:.{decimals}f}"


def sig(x: float, digits: int = DIGITS) -> str:
    """``x`` in at least ``digits`` significant digits, more where rounding would cross a power of ten."""
    x = float(x)
    if x == 0.0 or not math.isfinite(x):
        return "0" if x == 0.0 else str(x)
    text = _text(x, digits)
    while digits < MAX_DIGITS and math.floor(math.log10(abs(float(text)) or 1e-300)) != math.floor(math.log10(abs(x))):
        digits += 1
        text = _text(x, digits)
    return text


def signed(x: float, digits: int = DIGITS) -> str:
    """A difference: "+0.0134", "−1.4e-05"; never "+0" for a value that is not zero."""
    x = float(x)
    if x == 0.0:
        return "0"
    text = sig(abs(x), digits)
    return ("+" if x > 0 else "−") + text


def before_after(before: float, after: float, digits: int = DIGITS) -> tuple[str, str, str]:
    """(before, after, signed difference): as many digits as it takes for different values to
    read differently."""
    b, a = float(before), float(after)
    while digits < MAX_DIGITS and b != a and sig(b, digits) == sig(a, digits):
        digits += 1
    return sig(b, digits), sig(a, digits), signed(a - b)


def change_words(x: float) -> str:
    """The size of a change: "no change" at (about) zero, else its significant digits."""
    return "no change" if abs(float(x)) < NO_CHANGE else sig(x)
