"""Read plain-text files one text per line: UTF-8 (with or without BOM), blank lines skipped,
undecodable lines reported by number instead of failing the whole file."""
from __future__ import annotations

from pathlib import Path

from .errors import InputError


def read_lines(path, on_bad_line=None):
    """Yield (line_number, text) for each non-blank line. on_bad_line(line_number, reason) is
    called for lines that are not valid UTF-8; without it such a line raises InputError."""
    path = Path(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror}") from None
    with f:
        for number, raw in enumerate(f, start=1):
            if number == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8").strip()
            except UnicodeDecodeError as e:
                reason = f"not valid UTF-8 (byte {raw[e.start]:#04x} at column {e.start + 1})"
                if on_bad_line is None:
                    raise InputError(f"{path}, line {number}: {reason}") from None
                on_bad_line(number, reason)
                continue
            if text:
                yield number, text
