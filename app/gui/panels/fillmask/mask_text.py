"""A fill-mask sentence as text: its words (each clickable to mask it), its [MASK]s, and a
prediction written in place of one (pure functions, no Qt)."""
from __future__ import annotations

import re

from core.names import MASK

WORD_RE = re.compile(re.escape(MASK) + r"|\w+(?:['’]\w+)*|[^\w\s]")


def words(text: str) -> list[tuple[int, int, str]]:
    """(start, end, word) for each word, punctuation mark and [MASK] of the text."""
    return [(m.start(), m.end(), m.group()) for m in WORD_RE.finditer(text)]


def mask_word(text: str, index: int) -> str:
    """The text with its ``index``-th word (see ``words``) replaced by [MASK]."""
    start, end, _ = words(text)[index]
    return text[:start] + MASK + text[end:]


def mask_spans(text: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(re.escape(MASK), text)]


def fill_mask_at(text: str, n: int, token: str) -> str:
    """Put ``token`` in place of the ``n``-th [MASK]. A WordPiece continuation ("##s") joins the
    word before it ("cat [MASK]" + "##s" -> "cats")."""
    spans = mask_spans(text)
    if not 0 <= n < len(spans):
        raise IndexError(f"the text has {len(spans)} masks, not {n + 1}")
    start, end = spans[n]
    if token.startswith("##") and len(token) > 2:
        token = token[2:]
        while start > 0 and text[start - 1] == " ":
            start -= 1
    return text[:start] + token + text[end:]
