"""The rows one commit adds to the sentence database, as columns: what add_stream's window
hands SentenceDB.insert (index/faiss/sentences.py) in one piece.

Columns rather than a tuple per row, so the text hashes computed once for the duplicate check
are the ones stored, the vectors stay one float32 array (FAISS adds it as it is, SQLite binds
each row's slice of it without a copy) and the metadata is encoded only for rows that carry
user keys.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from index.store.records import COLUMNS, split_meta


@dataclass
class NewRows:
    texts: list            # str
    hashes: list           # text_hash of each text (16 bytes)
    sources: list          # str or None
    lines: list            # int or None
    metas_json: list       # the user keys as JSON, or None
    vectors: np.ndarray    # (n, dim) float32, C-contiguous, unit rows

    def __len__(self) -> int:
        return len(self.texts)

    def blobs(self) -> list:
        """Each row's vector bytes: zero-copy slices of the one array."""
        v = np.ascontiguousarray(self.vectors, dtype=np.float32)
        self.vectors = v
        if not len(v):
            return []
        view, width = memoryview(v).cast("B"), v.shape[1] * 4
        return [view[k:k + width] for k in range(0, len(v) * width, width)]


def planned_rows(plan, texts, hashes, metas, vectors) -> NewRows:
    """The rows of texts[i] for i in plan (vectors: theirs, in plan order)."""
    if len(plan) == len(texts):       # plan is increasing: every index, the usual window
        chosen_texts, chosen_hashes, chosen_metas = list(texts), list(hashes), metas
    else:
        chosen_texts, chosen_hashes = [texts[i] for i in plan], [hashes[i] for i in plan]
        chosen_metas = [metas[i] for i in plan]
    if not any(chosen_metas):         # no metadata: no per-row work
        none = [None] * len(plan)
        return NewRows(chosen_texts, chosen_hashes, none, list(none), list(none),
                       np.ascontiguousarray(vectors, dtype=np.float32))
    columns = _reader_columns(chosen_metas)
    if columns is not None:
        return NewRows(chosen_texts, chosen_hashes, *columns, np.ascontiguousarray(vectors, dtype=np.float32))
    sources, lines, metas_json = [], [], []
    for meta in chosen_metas:
        if not meta:
            sources.append(None)
            lines.append(None)
            metas_json.append(None)
            continue
        source, line, _added, extra = split_meta(meta)    # this store stamps `added` itself
        sources.append(source)
        lines.append(line)
        metas_json.append(json.dumps(extra) if extra else None)
    return NewRows(chosen_texts, chosen_hashes, sources, lines, metas_json,
                   np.ascontiguousarray(vectors, dtype=np.float32))


def _reader_columns(metas) -> tuple[list, list, list] | None:
    """(sources, lines, metas_json) without a call per row where every row's metadata is what a
    reader gives (a dict of a str source and an int row, `added` at most, which this store
    stamps itself): split_meta's columns for them; else None."""
    if not set(map(type, metas)) <= {dict} or not all(m.keys() <= COLUMNS for m in metas):
        return None
    sources = [m.get("source") for m in metas]
    lines = [m.get("row") for m in metas]
    if not set(map(type, sources)) <= {str, type(None)} or not set(map(type, lines)) <= {int, type(None)}:
        return None
    return sources, lines, [None] * len(metas)
