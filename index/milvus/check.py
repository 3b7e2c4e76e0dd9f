"""`info --check` / `--repair` for a Milvus store: every row read back and compared with what
the server counts, independent of how the rows got there.

Found: rows hidden behind another row's id (Milvus keeps both rows of one primary key and
counts both, but a read returns one), texts stored twice under two ids, rows whose hash is not
their text's, and a sample of stored vectors that are not their text's embedding.
Repaired: a hidden row is dropped (its id keeps the row a read returns; the hidden text is not
readable, so the report asks to ingest again, which adds it as new), a text stored twice keeps
its smallest id. Everything runs under the writer lock on a server.
"""
from __future__ import annotations

import numpy as np

from index.milvus.calls import plain_rows

WINDOW = 10_000
SAMPLE = 32
MIN_COSINE = 0.99


def _count(store, expr: str) -> int:
    rows = store._call(store._client.query, store._name, filter=expr,
                       output_fields=["count(*)"], what="count sentences",
                       **store._read_kw())
    return int(rows[0]["count(*)"]) if rows else 0


def _strong(store) -> dict:
    return {"consistency_level": "Strong"} if store.loc.kind == "server" else {}


def _crowded_ids(store, lo: int, hi: int, readable: set) -> list[int]:
    """Ids in [lo, hi) that hold more than one row (halving the range while the server counts
    more rows there than reads return)."""
    n = _count(store, f"id >= {lo} and id < {hi}")
    seen = sum(1 for i in readable if lo <= i < hi)
    if n <= seen:
        return []
    if hi - lo == 1:
        return [lo]
    mid = (lo + hi) // 2
    return _crowded_ids(store, lo, mid, readable) + _crowded_ids(store, mid, hi, readable)


def check(store, backend=None, repair: bool = False) -> dict:
    """The report: rows (server count), readable, hidden ids, duplicate texts (hash -> ids),
    wrong hashes, vectors sampled / off, and what repair did."""
    with store._mutex, store._commit_guard():
        store._unseen_delete = True         # the first read waits for every writer's rows
        total = _count(store, "")
        rows = list(store._scan(["hash", "text"]))
        readable = {int(r["id"]) for r in rows}
        top = max(readable, default=0) + 1
        top = store._server_top(top) if store.loc.kind == "server" else top
        hidden = []
        if total > len(readable):
            for lo in range(0, top, WINDOW):
                hidden += _crowded_ids(store, lo, min(lo + WINDOW, top), readable)
        by_hash: dict[str, list[int]] = {}
        wrong_hash = []
        for r in rows:
            by_hash.setdefault(r["hash"], []).append(int(r["id"]))
            if store._hash(r["text"]) != r["hash"]:
                wrong_hash.append(int(r["id"]))
        twice = {h: sorted(ids) for h, ids in by_hash.items() if len(ids) > 1}
        report = {"rows": total, "readable": len(readable), "hidden_ids": hidden,
                  "duplicates": twice, "wrong_hash": wrong_hash}
        report.update(_sample_vectors(store, rows, backend))
        if repair:
            report["repaired"] = _repair(store, hidden, twice)
    return report


def _sample_vectors(store, rows, backend) -> dict:
    if backend is None or not rows:
        return {"sampled": 0, "vectors_off": []}
    pick = [rows[int(i)] for i in np.linspace(0, len(rows) - 1, min(SAMPLE, len(rows)))]
    ids = [int(r["id"]) for r in pick]
    stored = store._records(ids, ["vector", "text"])
    texts = [stored[i]["text"] for i in ids if i in stored]
    got = np.asarray([stored[i]["vector"] for i in ids if i in stored], np.float32)
    want = np.asarray(backend.embed(texts, pooling=store.pooling), np.float32)
    want /= np.linalg.norm(want, axis=1, keepdims=True)
    got /= np.linalg.norm(got, axis=1, keepdims=True)
    cos = np.sum(got * want, axis=1)
    off = [i for i, c in zip([i for i in ids if i in stored], cos) if c < MIN_COSINE]
    return {"sampled": len(texts), "vectors_off": off}


def _repair(store, hidden: list[int], twice: dict) -> dict:
    """Hidden rows dropped (the readable row of each id written back alone), duplicate texts
    cut to their smallest id."""
    c, call = store._client, store._call
    for s in range(0, len(hidden), 500):
        part = hidden[s:s + 500]
        keep = plain_rows(call(c.get, store._name, ids=part, output_fields=["*"],
                               what="read sentences", **_strong(store)))
        call(c.delete, store._name, ids=part, what="remove hidden rows")
        if keep:
            call(c.insert, store._name, data=keep, what="write the readable rows back")
    extra = [i for ids in twice.values() for i in ids[1:]]
    for s in range(0, len(extra), 500):
        call(c.delete, store._name, ids=extra[s:s + 500], what="remove duplicate texts")
    store._unseen_delete = True
    store._hash_ids = None
    return {"hidden_dropped": len(hidden), "duplicates_removed": len(extra)}
