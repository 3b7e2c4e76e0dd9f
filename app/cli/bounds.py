"""Every numeric option of every command, bounded: refused before any work, one line naming the limit.

A count without a ceiling is work without an end (`attribute --steps 20000` ran for most of an
hour; `patch --trace --samples 100000` filled the memory), and a float of `inf` or `1e30` is a
table of NaN: so each option has a range, its own where it has a meaning (below), and otherwise
the generic one (a finite number within +-1e6; a whole number within a 32-bit range). Lower bounds
that a command already checks in its own words (at least 1 step, a drop above 0) are left to it;
what is checked here is what nothing checked: the ceiling, the seeds' range and finiteness.
"""
from __future__ import annotations

import math

from core.errors import InputError

# (command or None for any, dest) -> (lowest, highest) accepted; None: no bound on that side
LIMITS: dict[tuple[str | None, str], tuple[float | None, float | None]] = {
    ("attribute", "steps"): (None, 4096),        # Gauss-Legendre beyond a few hundred nodes adds nothing
    ("patch", "samples"): (None, 1000),          # Meng et al. average 10
    ("patch", "noise"): (None, 100.0),           # in units of the embeddings' std; 3 is the paper's
    (None, "seed"): (0, 2**32 - 1),              # numpy's seeds
    (None, "k"): (None, 10_000),
    (None, "top"): (None, 1000),
    (None, "top_k"): (None, 1000),
    (None, "sample"): (None, 100_000),
    (None, "verify_sample"): (None, 1_000_000),
    (None, "batch_size"): (None, 65_536),
    (None, "whiten_dims"): (None, 65_536),
    (None, "clusters"): (None, 10_000),
    (None, "layer"): (None, 1000),
    (None, "head"): (None, 1000),
    (None, "temperature"): (None, 1000.0),
    # train and experiment
    ("train", "steps"): (None, 10_000_000),
    ("experiment", "steps"): (None, 10_000_000),
    (None, "layers"): (None, 128),
    (None, "dim"): (None, 16_384),
    (None, "heads"): (None, 256),
    (None, "ffn"): (None, 65_536),
    (None, "max_length"): (None, 8192),
    (None, "vocab_size"): (None, 1_000_000),
    (None, "threads"): (None, 1024),
    (None, "eval_sentences"): (None, 10_000_000),
    (None, "lr"): (None, 10.0),
}
GENERIC_FLOAT = 1e6
GENERIC_INT = 2**31 - 1


def flag(dest: str) -> str:
    """How the option is typed: --top-k for top_k, -k for k."""
    return f"-{dest}" if len(dest) == 1 else f"--{dest.replace('_', '-')}"


def _bounds(command: str | None, dest: str, value) -> tuple[float | None, float | None]:
    if (command, dest) in LIMITS:
        return LIMITS[(command, dest)]
    if (None, dest) in LIMITS:
        return LIMITS[(None, dest)]
    return (-GENERIC_FLOAT, GENERIC_FLOAT) if isinstance(value, float) else (-GENERIC_INT, GENERIC_INT)


def _number(x) -> str:
    return f"{x:,}" if isinstance(x, int) else f"{x:g}"


def check_bounds(args) -> None:
    """InputError for the first numeric option outside its range (or not a finite number)."""
    command = getattr(args, "command", None)
    for dest, value in vars(args).items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        name = flag(dest)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{name} must be a finite number, not {value}")
        low, high = _bounds(command, dest, value)
        if high is not None and value > high:
            raise InputError(f"{name} is at most {_number(high)}, not {_number(value)}"
                             + (" (the limit keeps the work bounded)" if (command, dest) in LIMITS
                                or (None, dest) in LIMITS else ""))
        if low is not None and value < low:
            raise InputError(f"{name} is at least {_number(low)}, not {_number(value)}")
