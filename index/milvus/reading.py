"""Reading a Milvus store: search, count, and every row in id order a window at a time (what
iter, get, migrate and the checks read). MilvusStore inherits these."""
from __future__ import annotations

import json

import numpy as np

from core.errors import InputError
from index.milvus.calls import plain_rows
from index.milvus.ids import MARK_ID, QUERY_CHUNK
from index.milvus.schema import FIELDS, NO_ROW
from index.store.base import Hit
from index.store.records import make_record

SCAN_WINDOW = 10_000         # ids per query while iterating (Milvus caps a query at 16384)
MAX_TOPK = 16_384            # Milvus's limit on k


def _record(ent: dict, placeholders: bool = False) -> dict:
    """A row read from Milvus -> {"id", "text", "metadata"} (placeholders: "", -1 and {} stand
    for a missing source, row and meta on servers without nullable fields)."""
    extra = ent.get("meta")
    if isinstance(extra, str):
        extra = json.loads(extra) if extra else None
    source, row = ent.get("source"), ent.get("row")
    if placeholders:
        source = source or None
        row = None if row == NO_ROW else row
        extra = extra or None
    return make_record(ent["id"], ent["text"], source, row, ent.get("added"), extra)


class MilvusReading:
    """The reading half of MilvusStore (its client, collection, lock and placeholders)."""

    def search(self, vectors, k: int = 10, *, fingerprint=None):
        """Nearest sentences by cosine similarity (see Store.search)."""
        self._need_open()
        q = self._query_vectors(vectors, fingerprint)
        k = int(k)
        if k < 1:
            raise InputError("k must be at least 1")
        with self._mutex:
            if self.loc.kind == "lite":
                self._flush()     # Lite scans unflushed rows in Python: ~30x slower
            limit = min(k + (self.loc.kind == "server"), MAX_TOPK)   # + the id mark row
            params = {"metric_type": "COSINE", "params": dict(self._index.get("search", {}))}
            if "ef" in params["params"]:
                params["params"]["ef"] = max(int(params["params"]["ef"]), limit)
            res = self._call(self._client.search, self._name, data=list(q), limit=limit,
                             output_fields=FIELDS, search_params=params, anns_field="vector",
                             what="search", **self._read_kw())
        out = []
        for row in res:
            hits = []
            for r in row:
                if int(r["id"]) == MARK_ID:
                    continue
                ent = dict(r.get("entity") or {})
                ent["id"] = r["id"]
                rec = _record(ent, self._placeholders)
                hits.append(Hit(float(r["distance"]), rec["id"], rec["text"], rec["metadata"]))
            hits.sort(key=lambda h: (-h.score, h.id))
            out.append(hits[:k])
        return out

    def count(self) -> int:
        self._need_open()
        with self._mutex:
            if self.loc.kind == "lite":
                self._flush()
            rows = self._call(self._client.query, self._name,
                              filter="id >= 0" if self.loc.kind == "server" else "",
                              output_fields=["count(*)"], what="count sentences",
                              **self._read_kw())
        return int(rows[0]["count(*)"]) if rows else 0

    def _scan(self, fields, window: int = SCAN_WINDOW, dedupe: bool = True):
        """Rows (dicts with "id" + fields) in id order, a window of ids per query."""
        self._need_open()
        if self.loc.kind == "lite":
            with self._mutex:
                self._flush()
        lo = 0
        top = self._next_id
        fields = ["id"] + [f for f in fields if f != "id"]
        while lo < top:
            hi = lo + window
            rows = plain_rows(self._call(self._client.query, self._name,
                                         filter=f"id >= {lo} and id < {hi}",
                                         output_fields=fields, limit=window,
                                         what="read sentences", **self._read_kw()))
            rows.sort(key=lambda r: int(r["id"]))
            if dedupe:     # an id twice only after an interrupted Lite write (see above)
                rows = [r for k, r in enumerate(rows) if k == 0 or rows[k - 1]["id"] != r["id"]]
            yield from rows
            lo = hi
            if lo >= top and self.loc.kind == "server":
                top = self._server_top(top)

    def iter(self):
        """Every sentence as {"id", "text", "metadata"}, in id order."""
        return (_record(r, self._placeholders) for r in self._scan(FIELDS))

    def iter_batches(self, batch: int = 2000, vectors: bool = True):
        """(ids int64, vectors float32 (n, dim) or None, records) in id order, `batch` ids'
        worth at a time (what migrate reads)."""
        fields = FIELDS + (["vector"] if vectors else [])
        for rows in _chunks(self._scan(fields, window=min(max(batch, 1), SCAN_WINDOW)), batch):
            ids = np.fromiter((int(r["id"]) for r in rows), np.int64, len(rows))
            vecs = (np.asarray([r["vector"] for r in rows], dtype=np.float32).reshape(-1, self._dim)
                    if vectors else None)
            yield ids, vecs, [_record(r, self._placeholders) for r in rows]

    def vectors(self):
        """(ids, vectors) of the whole store, as stored (like VectorStore.vectors)."""
        parts = list(self.iter_batches(SCAN_WINDOW))
        if not parts:
            return np.zeros(0, np.int64), np.zeros((0, self._dim), np.float32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _records(self, ids, fields) -> dict[int, dict]:
        out = {}
        ids = [int(i) for i in ids if int(i) >= 0]
        for s in range(0, len(ids), QUERY_CHUNK):
            part = ids[s:s + QUERY_CHUNK]
            rows = plain_rows(self._call(self._client.get, self._name, ids=part,
                                         output_fields=["id"] + fields, what="read sentences",
                                         **self._read_kw()))
            for r in rows:
                out[int(r["id"])] = dict(r)
        return out

    def get(self, ids) -> dict:
        self._need_open()
        return {i: _record(r, self._placeholders) for i, r in self._records(ids, FIELDS).items()}



def _chunks(it, n):
    buf = []
    for x in it:
        buf.append(x)
        if len(buf) >= n:
            yield buf
            buf = []
    if buf:
        yield buf
