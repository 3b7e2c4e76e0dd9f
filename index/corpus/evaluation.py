"""Retrieval quality of a store: each query searched with the store's own search (its model, its
whitening, FAISS or Milvus alike), the rank of its relevant text among the top k, and recall@k
and MRR over the queries (core.evaluate.metrics.retrieval_scores)."""
from __future__ import annotations

from core.errors import Cancelled, InputError
from core.evaluate.metrics import retrieval_scores
from index.corpus.door import search_many
from index.store.base import Store

QUERY_BATCH = 32      # queries searched together (one embed call)


def relevant_rank(hits, relevant: str) -> int | None:
    """The 1-based rank of the hit whose text is ``relevant`` (trimmed), or None."""
    want = relevant.strip()
    for rank, hit in enumerate(hits, 1):
        if hit.text.strip() == want:
            return rank
    return None


def evaluate_queries(store: Store, queries, k: int, backend, *, progress=None, cancel=None) -> dict:
    """{"n", "recall_at_k", "mrr", "k", "not_in_store"} of (query, relevant text) pairs:
    the relevant text's rank among the store's top k hits for the query (``backend``: the
    store's model). A relevant text the store does not hold counts as a miss and is counted in
    not_in_store, so that a partial store is visible in the numbers."""
    if int(k) < 1:
        raise InputError("-k must be at least 1")
    queries = list(queries)
    if not queries:
        raise InputError("no queries to evaluate")
    if store.count() == 0:
        raise InputError(f"the store at {store.where} holds no sentences: nothing to search")
    stored = {rec["text"].strip() for rec in store.iter()}
    found = []
    for start in range(0, len(queries), QUERY_BATCH):
        if cancel is not None and cancel.is_set():
            raise Cancelled("evaluation cancelled")
        chunk = queries[start:start + QUERY_BATCH]
        results = search_many(store, [q for q, _ in chunk], int(k), backend)
        found += [relevant_rank(hits, rel) for hits, (_, rel) in zip(results, chunk)]
        if progress is not None:
            progress(start + len(chunk), len(queries))
    scores = retrieval_scores(found, int(k))
    scores["not_in_store"] = sum(rel.strip() not in stored for _, rel in queries)
    return scores
