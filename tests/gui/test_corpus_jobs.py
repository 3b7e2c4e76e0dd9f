"""The app's ingest job: a bulk import's rows are frozen out of the cyclic GC's full collections
(they would stall the UI thread), a few typed sentences are not."""
from __future__ import annotations

import gc
import threading

from app.gui.corpus_jobs import FREEZE_FROM, create_store_job, ingest_job
from tests.support.app_fixtures import noop_progress


def _ingest(folder, minilm, n):
    store, _ = create_store_job(folder, minilm, "mean", sample=None, progress=noop_progress,
                                cancel=threading.Event())
    try:
        result = ingest_job(store, minilm, "mean", [f"Sentence number {i}." for i in range(n)],
                            progress=noop_progress, cancel=threading.Event())
    finally:
        store.close()
    assert result.added == n


def test_a_bulk_import_freezes_what_is_alive_and_a_few_sentences_do_not(tmp_path, minilm):
    gc.unfreeze()       # whatever an earlier test's threads froze: this test starts from nothing frozen
    _ingest(tmp_path / "few", minilm, 3)
    assert gc.get_freeze_count() == 0, "a typed sentence's add must not freeze the app's objects"
    _ingest(tmp_path / "bulk", minilm, FREEZE_FROM)
    assert gc.get_freeze_count() > 0
