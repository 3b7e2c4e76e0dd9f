"""New rows written to Milvus as columns: one insert request per chunk, the vectors as one block.

Why: pymilvus's row insert (MilvusClient.insert with a dict per row) packs every field of every
row in Python, through a type look-up per value, and appends each vector's floats to the
protobuf one by one: for 10,000 minilm rows into Milvus Lite that was 8.9 of 20.7 s (a profile,
2 cores, load ~6). Here pymilvus's own column path (Prepare.batch_insert_param, what its
ORM ``Collection.insert`` of columns runs) builds the scalar columns, with its checks and its
handling of nullable fields, and the vectors go in as the wire bytes of one FloatArray
(little-endian float32, packed), which protobuf parses in C. The request is the one the row path
would send, field for field (tests/index/milvus/test_columns.py reads both back).

The pieces are pymilvus internals (its column request builder, the client's connection handler):
where an installed pymilvus lacks them, ``column_writer`` returns None and the store inserts
rows through MilvusClient.insert as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# A request's size cap: far under the 64-256 MiB gRPC message limits of Milvus servers and Lite,
# and a few MB of texts on top of the vectors (a text may hold up to 64 KiB).
MAX_REQUEST_BYTES = 16 * 1024 * 1024
MAX_REQUEST_ROWS = 8192
ROW_OVERHEAD = 64            # bytes per row besides its vector and text (ids, hash, tags)


@dataclass
class Columns:
    """The new rows of one commit, a list (or array) per field, in id order."""
    ids: list
    vectors: np.ndarray      # (n, dim) float32
    texts: list
    hashes: list
    sources: list
    rows: list
    added: list
    metas: list

    def __len__(self) -> int:
        return len(self.ids)

    def part(self, start: int, end: int) -> Columns:
        return Columns(self.ids[start:end], self.vectors[start:end], self.texts[start:end],
                       self.hashes[start:end], self.sources[start:end], self.rows[start:end],
                       self.added[start:end], self.metas[start:end])

    def as_rows(self) -> list[dict]:
        """One dict per row (MilvusClient.insert's input)."""
        return [{"id": int(i), "vector": v, "text": t, "hash": h, "source": s, "row": r,
                 "added": a, "meta": m}
                for i, v, t, h, s, r, a, m in zip(self.ids, self.vectors, self.texts, self.hashes,
                                                  self.sources, self.rows, self.added, self.metas)]


def chunk_bounds(columns: Columns, max_bytes: int = MAX_REQUEST_BYTES,
                 max_rows: int = MAX_REQUEST_ROWS) -> list[tuple[int, int]]:
    """(start, end) of consecutive chunks of at most max_rows rows and, but for a single row
    larger than that, about max_bytes each (vector, text's characters x 4 at most, overhead)."""
    per_vector = columns.vectors.shape[1] * 4 + ROW_OVERHEAD
    bounds, start, size = [], 0, 0
    for i, t in enumerate(columns.texts):
        row = per_vector + 4 * len(t)
        if i > start and (size + row > max_bytes or i - start >= max_rows):
            bounds.append((start, i))
            start, size = i, 0
        size += row
    if start < len(columns):
        bounds.append((start, len(columns)))
    return bounds


def packed_float_array(vectors: np.ndarray) -> bytes:
    """A FloatArray message (``repeated float data = 1``, packed) holding `vectors` row after row."""
    raw = np.ascontiguousarray(vectors, dtype="<f4").tobytes()
    n, head = len(raw), bytearray(b"\x0a")      # field 1, length-delimited
    while True:
        byte, n = n & 0x7F, n >> 7
        head.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(head) + raw


class ColumnWriter:
    """Inserts Columns into one collection through pymilvus's column request."""

    def __init__(self, client, collection: str, schema: dict, prepare):
        self._client = client
        self._name = collection
        self._schema = schema
        self._fields = schema["fields"]
        self._prepare = prepare
        self._types = {f["name"]: f["type"] for f in self._fields}

    def request(self, cols: Columns):
        """The InsertRequest of these rows."""
        entities = [{"name": name, "type": self._types[name], "values": values}
                    for name, values in (("id", [int(i) for i in cols.ids]), ("vector", []),
                                         ("text", cols.texts), ("hash", cols.hashes),
                                         ("source", cols.sources), ("row", cols.rows),
                                         ("added", [float(a) for a in cols.added]),
                                         ("meta", cols.metas))]
        # The vector column is left empty here (no row count of its own) and filled below.
        req = self._prepare.batch_insert_param(self._name, entities, "", self._fields)
        vector = next(f for f in req.fields_data if f.field_name == "vector")
        vector.vectors.dim = int(cols.vectors.shape[1])
        vector.vectors.float_vector.MergeFromString(packed_float_array(cols.vectors))
        return req

    def insert(self, cols: Columns, timeout: float | None = None):
        """Send the rows (the store's Caller runs this: named ``insert``, it is fenced as a write)."""
        return self._client._get_connection().batch_insert(
            self._name, [], insert_param=self.request(cols), schema=self._schema,
            timeout=timeout, context=self._client._generate_call_context())


def column_writer(client, collection: str, schema: dict) -> ColumnWriter | None:
    """A ColumnWriter for `collection` (its describe_collection as `schema`), or None where this
    pymilvus has not the pieces it needs (then rows go through MilvusClient.insert)."""
    try:
        from pymilvus.client.prepare import Prepare
    except ImportError:
        return None
    names = {f.get("name") for f in schema.get("fields", [])}
    if not (hasattr(Prepare, "batch_insert_param") and hasattr(client, "_get_connection")
            and hasattr(client, "_generate_call_context")
            and {"id", "vector", "text", "hash", "source", "row", "added", "meta"} <= names):
        return None
    return ColumnWriter(client, collection, schema, Prepare)
