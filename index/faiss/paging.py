"""Keyset paging over the sentence database: rows in id order, a page at a time, each page
read with ``WHERE id > (the last id seen) ORDER BY id LIMIT n`` (an index seek, never an
OFFSET that rescans what came before; rows added or removed meanwhile shift nothing)."""
from __future__ import annotations


def id_pages(query, select: str, batch: int, after: int = 0):
    """Yield lists of rows of ``select`` ("SELECT id, ... FROM table": the id first) with
    id > ``after``, in id order, at most ``batch`` rows a list. ``query(sql, args)`` runs SQL
    (SentenceDB._q)."""
    last = after
    while True:
        rows = query(f"{select} WHERE id > ? ORDER BY id LIMIT ?", (last, batch)).fetchall()
        if not rows:
            return
        yield rows
        last = int(rows[-1][0])
