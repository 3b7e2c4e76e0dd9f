"""Opening a text file: its encoding (a byte-order mark, else the encoding given, else UTF-8),
the check that refuses a binary file before anything is read, and its numbered lines (a NUL byte
further on refuses it too). core/readers.py reads every corpus format through these."""
from __future__ import annotations

import codecs
import unicodedata
from pathlib import Path

from core.errors import InputError

COMMON_ENCODINGS = ("latin-1", "cp1252", "utf-16", "utf-8")   # what a user is offered to pick
HEAD_BYTES = 8192                # the binary check and encoding sniff look at this much
BINARY_CONTROL_SHARE = 0.3       # more control characters than this in the head: binary
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_TEXT_CONTROLS = set("\t\n\r\f\v")


class BinaryFile(InputError):
    """The file looks binary (an executable, an image, a zip), not text."""


def check_encoding(encoding: str | None) -> str | None:
    """The encoding's canonical name; InputError for one Python does not know."""
    if encoding is None:
        return None
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise InputError(f"unknown encoding {encoding!r} (try {', '.join(COMMON_ENCODINGS)})") from None


OTHER_ENCODING = {"kind": "encoding", "choices": COMMON_ENCODINGS[:-1]}   # the fix of a file not in UTF-8


def _choose_encoding(head: bytes, encoding: str | None) -> str:
    """A byte-order mark of the encoding given (or of any, when none is given) wins: it is
    consumed, and UTF-16/32 learn their byte order from it; else the encoding given; else UTF-8."""
    name = check_encoding(encoding)
    bom_encoding = next((enc for bom, enc in _BOMS if head.startswith(bom)), None)
    if bom_encoding and (name is None or name.startswith(bom_encoding.removesuffix("-sig"))):
        return bom_encoding
    if name in ("utf-16", "utf-32"):
        return _byte_order(head, name)
    return name or "utf-8"


def _byte_order(head: bytes, name: str) -> str:
    """UTF-16/32 without a byte-order mark: the order its zero bytes show (text in Latin
    script has a zero in the high byte of most characters); little-endian when they don't."""
    width = 2 if name == "utf-16" else 4
    units = [head[i:i + width] for i in range(0, len(head) - width + 1, width)]
    low_zero = sum(u[0] == 0 and u[-1] != 0 for u in units)
    high_zero = sum(u[-1] == 0 and u[0] != 0 for u in units)
    return f"{name}-be" if low_zero > high_zero else f"{name}-le"


def looks_binary(head: bytes, encoding: str) -> str | None:
    """Why ``head`` (a file's first bytes) is not text in ``encoding``, or None if it is."""
    text = head.decode(encoding, errors="replace")
    if not text:
        return None
    if "\x00" in text:
        return "it holds NUL bytes"
    controls = sum(1 for c in text if unicodedata.category(c) == "Cc" and c not in _TEXT_CONTROLS)
    if controls > BINARY_CONTROL_SHARE * len(text):
        return f"{controls / len(text):.0%} of its first characters are control characters"
    return None


def open_checked(path, encoding: str | None) -> tuple[Path, str]:
    """(path, encoding to read it with), after refusing a missing or binary file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
    try:
        with open(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError as e:
        raise InputError(f"cannot open {path}: {e.strerror or e}") from None
    enc = _choose_encoding(head, encoding)
    why = looks_binary(head, enc)
    if why:
        from core.files.file_kind import refusal
        raise BinaryFile(refusal(path.name, head, path.stat().st_size, enc, why))
    if enc in ("utf-16-le", "utf-16-be"):      # given as UTF-16, no byte-order mark to confirm it
        from core.files.file_kind import not_utf16
        if not_utf16(head):
            raise InputError(f"{path.name} is not UTF-16 text: its line breaks are single bytes "
                             "(8-bit text such as ASCII or UTF-8); read it without the utf-16 encoding")
    return path, enc


def numbered_lines(stream, source: str, encoding: str):
    """(line number, line) with universal newlines; a decoder that fails outright (UTF-16 with
    an odd byte count, say) becomes one InputError naming the line."""
    n = 0
    try:
        for n, line in enumerate(stream, 1):
            if "\x00" in line:
                raise nul_refusal(source, n)
            yield n, line
    except UnicodeError as e:
        reason = getattr(e, "reason", str(e))
        raise InputError(f"{source}, line {n + 1}: cannot be read as {encoding} ({reason}); "
                         f"choose another encoding (one of {', '.join(COMMON_ENCODINGS)})") from None


def nul_refusal(source: str, row: int) -> BinaryFile:
    """A NUL byte past the head refuses the file as one in the head does."""
    return BinaryFile(f"{Path(source).name} looks like a binary file, not text (line {row} "
                      "holds a NUL byte): refused")
