"""`info --check`'s last question: do the stored vectors still mean their texts?

A store's checksums prove its rows are as written; they cannot prove that the model at hand is
the network that wrote them (a config or tokenizer file changed in place, a store written before
fingerprints covered those files). So a sample of stored texts, spread over the whole store, is
embedded again with the store's model and compared with the stored vectors.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from index.corpus.migrate_check import REEMBED_MIN_COSINE, reembedding_mismatches

SAMPLE = 64          # texts embedded again


@dataclass
class MeaningCheck:
    checked: int = 0
    mismatches: list = field(default_factory=list)   # (id, cosine) below REEMBED_MIN_COSINE

    @property
    def ok(self) -> bool:
        return not self.mismatches


def sample_rows(store, n: int = SAMPLE, batch: int = 2000) -> list:
    """(id, text, vector) of about n rows spread evenly over the store, in id order."""
    total = store.count()
    step = max(1, total // max(n, 1))
    rows, seen = [], 0
    for ids, vecs, recs in store.iter_batches(batch):
        for k, (i, rec) in enumerate(zip(ids.tolist(), recs)):
            if seen % step == 0 and len(rows) < n:
                rows.append((i, rec["text"], vecs[k]))
            seen += 1
        if len(rows) >= n:
            break
    return rows


def check_meaning(store, backend, n: int = SAMPLE) -> MeaningCheck:
    """Embed a sample of the store's texts with `backend` (pooled the store's way) again."""
    rows = sample_rows(store, n)
    return MeaningCheck(len(rows), reembedding_mismatches(rows, store.model_for_checks(backend), store.pooling))


def describe_failure(result: MeaningCheck) -> str:
    shown = ", ".join(f"id {i} ({c:.4f})" for i, c in result.mismatches[:5])
    return (f"{len(result.mismatches)} of {result.checked} sampled sentences embedded again do "
            f"not give their stored vectors (cosine below {REEMBED_MIN_COSINE}: {shown}): the "
            "model is not the network the store was built with")
