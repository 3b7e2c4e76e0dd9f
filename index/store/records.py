"""A sentence's metadata, split into the columns both stores keep, and put back together.

A caller's metadata dict may carry "source" (file), "row" (line or record number) and "added"
(unix time); every other key is user metadata, kept as JSON. A record read back is
{"id", "text", "metadata"} with source, row and added first, then the user keys.
"""
from __future__ import annotations

from typing import NamedTuple


class SplitMeta(NamedTuple):
    source: str | None      # where the text came from
    row: int | None         # its line / record number there
    added: float | None     # unix time it was added (None: now)
    extra: dict | None      # the other keys (user metadata), None when there are none


COLUMNS = frozenset(("source", "row", "added"))    # the keys kept as columns


def split_meta(meta) -> SplitMeta:
    """A metadata dict (or None) -> its columns."""
    if not meta:
        return SplitMeta(None, None, None, None)
    if type(meta) is dict and meta.keys() <= COLUMNS:     # a reader's usual metadata: no copy
        source, row, added, extra = meta.get("source"), meta.get("row"), meta.get("added"), None
    else:
        meta = dict(meta)
        source = meta.pop("source", None)
        row = meta.pop("row", None)
        added = meta.pop("added", None)
        extra = meta or None
    try:
        added = float(added) if added is not None else None
    except (TypeError, ValueError):
        added = None        # not a time: the store stamps the row with the time it is added
    return SplitMeta(str(source) if source is not None else None,
                     int(row) if row is not None else None, added, extra)


def make_record(id_, text: str, source, row, added, extra: dict | None) -> dict:
    """The record a store returns: {"id", "text", "metadata"}."""
    md = {"source": source, "row": row, "added": added}
    if extra:
        md.update(extra)
    return {"id": int(id_), "text": text, "metadata": md}
