"""`info --check` / `--repair` for a Milvus store: every row read back and compared with what
the server counts, independent of how the rows got there.

Found: rows hidden behind another row's id (Milvus keeps both rows of one primary key and
counts both, but a read returns one), texts stored twice under two ids (grouped by the text's
own hash, so a copy stored under a wrong hash is found too), rows whose hash is not their
text's, and stored vectors that are not their text's embedding (every one in a store of up
to FULL_UP_TO, else a random sample sized by a stated confidence: sample_size, drawn the same
for the same rows: sample_seed).
Repaired: a hidden row is dropped (its id keeps the row a read returns; the hidden text is not
readable, so the report asks to ingest again, which adds it as new), a text stored twice keeps
its smallest id, a wrong hash is written again from the text, a wrong vector is embedded
again. The report after repairing is checked again. Everything runs under the writer lock on
a server.
"""
from __future__ import annotations

import contextlib
import math

import numpy as np

from index.milvus.calls import plain_rows
from index.store.errors import AccessRefused, StoreError

WINDOW = 10_000
FULL_UP_TO = 2_000           # a store this small has every vector checked (seconds on a CPU)
CONFIDENCE = 0.95            # a sample finds a wrong vector this often ...
SMALLEST_SHARE = 0.01        # ... in a store where this share of its vectors is wrong
MIN_COSINE = 0.99
EMBED_CHUNK = 256            # rows re-embedded per step of a full check or a repair


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


def check(store, backend=None, repair: bool = False, full: bool = False) -> dict:
    """The report: rows (server count), readable, hidden ids, duplicate texts (the text's own
    hash -> ids, whatever hash they were stored under), wrong hashes, vectors checked / off
    (every vector with full, else a sample), and with repair what it did and the report
    after it ("after"), where anything left is what repair could not fix."""
    with store._mutex, contextlib.ExitStack() as held:
        try:
            held.enter_context(store._commit_guard())
        except AccessRefused:
            if repair:
                raise
            return _findings_unlocked(store, backend, full)   # a user who may only read
        report = _findings(store, backend, full)
        if repair:
            report["repaired"] = _repair(store, report, backend)
            report["after"] = _findings(store, backend, full)
    return report


def _findings_unlocked(store, backend, full: bool, tries: int = 3) -> dict:
    """The findings without the writer lock (its user may not take it): trusted only when the
    server counts the same rows before and after them (no writer changed the store meanwhile,
    which could look like hidden rows)."""
    for _ in range(tries):
        before = _count(store, "id >= 0")
        report = _findings(store, backend, full)
        if before == report["rows"] == _count(store, "id >= 0"):
            return {**report, "unlocked": True}
    raise StoreError(f"{store.loc.describe()} changed while it was checked (a writer is at work, "
                     "and this user may not take the writer lock that keeps writers out "
                     "meanwhile): run the check again when the writers are done")


def _findings(store, backend, full: bool) -> dict:
    store._wait_next_read = True         # the first read waits for every writer's rows
    total = _count(store, "id >= 0")
    rows = list(store._scan(["hash", "text"]))
    readable = {int(r["id"]) for r in rows}
    top = max(readable, default=0) + 1
    top = store._server_top(top) if store.loc.kind == "server" else top
    hidden = []
    if total > len(readable):
        for lo in range(0, top, WINDOW):
            hidden += _crowded_ids(store, lo, min(lo + WINDOW, top), readable)
    by_text: dict[str, list[int]] = {}
    wrong_hash = []
    for r in rows:
        own = store._hash(r["text"])
        by_text.setdefault(own, []).append(int(r["id"]))
        if own != r["hash"]:
            wrong_hash.append(int(r["id"]))
    twice = {h: sorted(ids) for h, ids in by_text.items() if len(ids) > 1}
    report = {"rows": total, "readable": len(readable), "hidden_ids": hidden,
              "duplicates": twice, "wrong_hash": wrong_hash}
    report.update(_check_vectors(store, rows, backend, full))
    return report


def sample_size(n: int) -> int:
    """How many of n vectors to check so that a store with SMALLEST_SHARE of them wrong shows
    at least one in the sample with CONFIDENCE (drawn with replacement: a bound that a sample
    without replacement only beats)."""
    return min(n, math.ceil(math.log(1 - CONFIDENCE) / math.log(1 - SMALLEST_SHARE)))


def _check_vectors(store, rows, backend, full: bool) -> dict:
    """Stored vectors against their texts embedded again: every one (full, or a store of at
    most FULL_UP_TO), else a random sample of sample_size() of them."""
    full = full or len(rows) <= FULL_UP_TO
    base = {"of": len(rows), "full": full, "confidence": CONFIDENCE, "share": SMALLEST_SHARE}
    if backend is None or not rows:
        return {**base, "sampled": 0, "vectors_off": []}
    if full:
        pick = rows
    else:
        chosen = np.random.default_rng(sample_seed(rows)).choice(len(rows), sample_size(len(rows)),
                                                                 replace=False)
        pick = [rows[int(i)] for i in np.sort(chosen)]
    off, checked = [], 0
    for s in range(0, len(pick), EMBED_CHUNK):
        ids = [int(r["id"]) for r in pick[s:s + EMBED_CHUNK]]
        stored = store._records(ids, ["vector", "text"])
        ids = [i for i in ids if i in stored]
        if not ids:
            continue
        got = np.asarray([stored[i]["vector"] for i in ids], np.float32)
        want = _embedded(store, backend, [stored[i]["text"] for i in ids])
        got /= np.maximum(np.linalg.norm(got, axis=1, keepdims=True), 1e-12)
        cos = np.sum(got * want, axis=1)
        off += [i for i, c in zip(ids, cos) if not c >= MIN_COSINE]
        checked += len(ids)
    return {**base, "sampled": checked, "vectors_off": off}


def sample_seed(rows) -> list[int]:
    """The sample's seed, from the store's ids (rows in id order): the same store draws the same
    sample, so the repair a sampled check suggests checks, and repairs, the very vectors that
    check named; a store whose rows changed draws afresh."""
    ids = [int(r["id"]) for r in rows]
    return [len(ids), ids[0], ids[-1], sum(ids) % 2 ** 32]


def _embedded(store, backend, texts) -> np.ndarray:
    want = np.asarray(backend.embed(texts, pooling=store.pooling), np.float32)
    return want / np.maximum(np.linalg.norm(want, axis=1, keepdims=True), 1e-12)


def _repair(store, report: dict, backend) -> dict:
    """Hidden rows dropped (the readable row of each id written back alone), duplicate texts
    cut to their smallest id, wrong hashes written again from the text, wrong vectors
    embedded again (with `backend`; without one they stay, and are reported)."""
    c, call = store._client, store._call
    hidden, twice = report["hidden_ids"], report["duplicates"]
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
    gone = set(extra)
    rehash = [i for i in report["wrong_hash"] if i not in gone]
    revector = [i for i in report["vectors_off"] if i not in gone] if backend is not None else []
    fixed = sorted(set(rehash) | set(revector))
    for s in range(0, len(fixed), EMBED_CHUNK):
        part = fixed[s:s + EMBED_CHUNK]
        rows = plain_rows(call(c.get, store._name, ids=part, output_fields=["*"],
                               what="read sentences", **_strong(store)))
        if not rows:
            continue
        again = [r for r in rows if int(r["id"]) in set(revector)]
        if again:
            vecs = _embedded(store, backend, [r["text"] for r in again])
            for r, v in zip(again, vecs):
                r["vector"] = v.tolist()
        for r in rows:
            r["hash"] = store._hash(r["text"])
        call(c.upsert, store._name, data=rows, what="write repaired sentences")
    store._wait_next_read = True
    store._hash_ids = None
    return {"hidden_dropped": len(hidden), "duplicates_removed": len(extra),
            "hashes_rewritten": len(rehash), "vectors_reembedded": len(revector)}
