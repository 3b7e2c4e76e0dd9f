"""What a Milvus server writer is told, without a server: a writer paused past its lease is
told so (not that the server did not answer); an ingest cut off by the server says what it
kept without "right?." and without "the rest" when nothing is left; "holds 1 sentence"."""
from __future__ import annotations

import time

import pytest

from index.store.errors import WriterLockLost


def test_a_writer_paused_past_its_lease_is_told_so_not_that_the_server_did_not_answer(monkeypatch):
    pymilvus = pytest.importorskip("pymilvus")
    from index.milvus.calls import Caller
    from index.milvus.lease import ServerWriterLock
    from index.store.location import parse_location
    call = Caller(parse_location("http://127.0.0.1:1?collection=c"), 30.0)
    lock = ServerWriterLock(None, call, "c", "the server")
    lock.token, lock._valid_until = "mine", time.monotonic() + 0.05
    monkeypatch.setattr(lock, "fence", lambda write: max(lock.remaining(), 0.01))
    call.lease = lock

    def paused_past_the_deadline(**kw):       # SIGSTOP during the call: its deadline passes
        time.sleep(0.1)
        raise pymilvus.MilvusException(message="Deadline Exceeded")
    with pytest.raises(WriterLockLost) as e:
        call(paused_past_the_deadline, what="write sentences")
    said = str(e.value)
    assert "this process was paused" in said and "did not answer" not in said, said
    assert "run the command again" in said
    with pytest.raises(WriterLockLost, match="paused"):     # and every later call says why
        call(paused_past_the_deadline, what="write sentences")


def test_an_ingest_cut_off_by_the_server_says_what_it_kept_in_plain_words():
    from app.cli.store import _kept
    from index.corpus.door import Ingested
    from index.milvus.calls import unavailable
    from index.store.location import parse_location
    gone = unavailable(parse_location("http://127.0.0.1:1?collection=c"), ConnectionError("connection refused"),
                       "write sentences")
    assert str(gone).endswith("right? Nothing was changed locally.")
    some = str(_kept(gone, Ingested(ids=[1, 2], added=2), 5))
    assert "right? The 2 new sentences" in some and "?." not in some and "to add the rest" in some
    done = str(_kept(gone, Ingested(ids=[1, 2], added=2, duplicates=3), 5))
    assert "nothing is left to add" in done and "the rest" not in done, done
