"""What a file that is not readable text is, from its first bytes: a known binary format named
by its signature, or UTF-16/32 text without a byte-order mark (the one case where giving the
encoding utf-16 or utf-32 is the right advice).

UTF-16 text in a script whose letters sit below U+0100 (Latin, digits, punctuation, line
breaks) has a zero byte in one half of most of its two-byte units, always the same half. Text
in an 8-bit encoding with a stray NUL, and compressed or binary data, do not show that
pattern; advising utf-16 for them would store mojibake or repeat the refusal.
"""
from __future__ import annotations

# (leading bytes, what the file is); a compressed file is named so the user decompresses it
SIGNATURES = (
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"BZh", "bzip2-compressed data"),
    (b"\xfd7zXZ\x00", "xz-compressed data"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data"),
    (b"PK\x03\x04", "a zip archive (or an Office document)"),
    (b"%PDF-", "a PDF document"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"\x7fELF", "a program (ELF executable)"),
    (b"SQLite format 3\x00", "an SQLite database"),
)
COMPRESSED = ("gzip", "bzip2", "xz", "zstd", "zip")
ZERO_HALF_SHARE = 0.3      # units with a zero byte in one half, of all units, for UTF-16
SAME_HALF_SHARE = 0.9      # of those, how many must have it in the same half


def signature(head: bytes) -> str | None:
    """The binary format `head` starts with, in words, or None."""
    return next((what for magic, what in SIGNATURES if head.startswith(magic)), None)


def wide_encoding(head: bytes, size: int) -> str | None:
    """"utf-16" or "utf-32" when `head` (the first bytes of a file of `size` bytes) has the
    zero-byte pattern of that encoding without a byte-order mark and decodes to text without
    NUL characters; else None."""
    for name, width in (("utf-32", 4), ("utf-16", 2)):
        if size % width or len(head) < 2 * width:
            continue
        units = [head[i:i + width] for i in range(0, len(head) - width + 1, width)]
        pad = bytes(width // 2)       # the zero half of a unit of a letter below U+0100 (U+10000)
        big = sum(u.startswith(pad) and u[-1] != 0 for u in units)
        little = sum(u.endswith(pad) and u[0] != 0 for u in units)
        zero_half = big + little
        if zero_half < ZERO_HALF_SHARE * len(units) or max(big, little) < SAME_HALF_SHARE * zero_half:
            continue
        order = f"{name}-be" if big > little else f"{name}-le"
        if "\x00" not in head[:len(units) * width].decode(order, errors="replace"):
            return name
    return None


def refusal(name: str, head: bytes, size: int, encoding: str, why: str) -> str:
    """The one line refusing a file whose head is not text in `encoding` (`why`: what shows
    it), with the way out that works."""
    what = signature(head)
    if what:
        fix = "decompress it and ingest the text inside" if what.startswith(COMPRESSED) else \
            "give a text file (.txt, .csv, .tsv or .jsonl)"
        return f"{name} is {what} (a binary file), not a text file: refused; {fix}"
    wide = wide_encoding(head, size)
    if wide and not encoding.startswith(wide):
        return (f"{name} looks like {wide.upper()} text without a byte-order mark ({why}): "
                f"refused; give its encoding, {wide}")
    return f"{name} looks like a binary file, not text ({why}): refused"


def not_utf16(head: bytes) -> bool:
    """Bytes given as UTF-16 without a byte-order mark that are plainly 8-bit text: every byte
    is ASCII or zero, there are line breaks, and not one survives decoding as UTF-16 (UTF-16
    text has its line breaks as two-byte units, and most CJK text has bytes above 0x7f)."""
    if len(head) < 4 or head.count(b"\n") < 2 or any(b > 0x7F for b in head):
        return False
    order = "utf-16-be" if head[0] == 0 else "utf-16-le"
    text = head[:len(head) // 2 * 2].decode(order, errors="replace")
    return "\n" not in text and "\r" not in text
