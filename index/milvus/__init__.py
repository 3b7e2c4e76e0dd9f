"""Milvus as the store (embedded Milvus Lite in a folder, or a Milvus server), one module per
concept: store.py (MilvusStore: the index.store.base.Store interface, CRUD and reading), schema.py
(the collection: fields, properties, index, format checks), lite.py (the Lite folder, its
locks and embedded server), repair.py (after a killed Lite writer), rebuild.py (re-embedding,
reindexing), calls.py (pymilvus calls, their errors, reading results back).
Open a store with index.opening.open_store."""
from index.milvus.store import MilvusStore

__all__ = ["MilvusStore"]
