"""add_stream's pipeline (index/store/embed_ahead.py): window k + 1 is embedded (and k + 2 tokenised)
while window k is committed, the rows still land in input order, a cancel or an error keeps the committed prefix
with nothing twice, the duplicate check is one query per window, and kill -9 in the middle of
an overlapped ingest leaves a prefix that a second run completes without a duplicate."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

from index.faiss.store import VectorStore
from tests.support.paths import ROOT, child_env
from tests.support.store_backends import FakeBackend, text_vector

D = 16


def open_store(tmp_path, b, name="s"):
    return VectorStore.open(tmp_path / name, writable=True, create=True, fingerprint=b.fingerprint())


class HookBackend(FakeBackend):
    """FakeBackend that runs hook(call number, texts) as each embed call starts."""

    def __init__(self, *a, hook=None, **kw):
        super().__init__(*a, dim=D, **kw)
        self.hook, self.calls = hook, []

    def embed(self, texts, *a, **kw):
        texts = list(texts)
        self.calls.append(texts)
        if self.hook:
            self.hook(len(self.calls), texts)
        return super().embed(texts, *a, **kw)


def test_the_next_window_is_embedded_while_the_window_before_is_committed(tmp_path):
    second_started = threading.Event()
    b = HookBackend(hook=lambda n, texts: n == 2 and second_started.set())
    store = open_store(tmp_path, b)
    commit = store._commit_rows
    overlapped = []

    def waiting_commit(plan, rows, result):
        # Window 0's commit waits for window 1's embedding to start: it does on a helper thread.
        if len(rows) and rows.texts[0] == "t0":
            overlapped.append(second_started.wait(timeout=10))
        commit(plan, rows, result)
    store._commit_rows = waiting_commit
    r = store.add_texts([f"t{i}" for i in range(60)], b, batch_size=10, window=20)
    assert overlapped == [True]
    assert r.added == 60 and [t["text"] for t in store.iter()] == [f"t{i}" for i in range(60)]
    store.close()


def test_order_ids_and_repeats_across_overlapped_windows(tmp_path):
    b = HookBackend()
    store = open_store(tmp_path, b)
    store.add_texts(["old"], b)
    b.calls.clear()
    # a repeat of the window in flight, a repeat of a stored text, and a repeat inside a window
    texts = [f"t{i}" for i in range(25)] + ["t3", "old", "x", "x"] + [f"t{i}" for i in range(25, 50)]
    seen = []
    r = store.add_texts(texts, b, batch_size=7, window=25, progress=lambda d, t: seen.append(d))
    rows = list(store.iter())
    assert [t["text"] for t in rows] == ["old"] + [t for t in dict.fromkeys(texts) if t != "old"]
    assert sorted(t for c in b.calls for t in c) == sorted(set(texts) - {"old"})   # each once
    assert (r.added, r.duplicates) == (51, 3)
    assert r.ids[25] == r.ids[3] and r.ids[26] == rows[0]["id"] and r.ids[28] == r.ids[27]
    ids, vecs = store.vectors()
    by_id = {t["id"]: t["text"] for t in rows}
    for i, v in zip(ids, vecs):
        np.testing.assert_allclose(v, text_vector(by_id[int(i)], D, b.weights + "mean"), atol=1e-6)
    assert seen == sorted(seen) and seen[-1] == len(texts)
    store.close()


def test_a_cancel_during_a_commit_keeps_that_window_and_no_later_one(tmp_path):
    cancel = threading.Event()
    b = HookBackend()
    store = open_store(tmp_path, b)
    commit = store._commit_rows

    def cancelling_commit(plan, rows, result):
        if len(rows) and rows.texts[0] == "t20":          # window 1 is being committed, window 2 embedded
            cancel.set()
        commit(plan, rows, result)
    store._commit_rows = cancelling_commit
    r = store.add_texts([f"t{i}" for i in range(100)], b, batch_size=10, window=20, cancel=cancel)
    assert r.cancelled and r.added == 40 and store.count() == 40
    assert [t["text"] for t in store.iter()] == [f"t{i}" for i in range(40)]
    assert not any(t.name.endswith("-ahead") for t in threading.enumerate())
    # running it again adds the rest, nothing twice
    r2 = store.add_texts([f"t{i}" for i in range(100)], b, batch_size=10, window=20)
    assert (r2.added, r2.duplicates) == (60, 40) and store.count() == 100
    store.close()


def test_an_error_while_embedding_ahead_reaches_the_caller_after_the_prefix(tmp_path):
    def fail(n, texts):
        if n == 3:
            raise RuntimeError("the encoder failed")
    b = HookBackend(hook=fail)
    store = open_store(tmp_path, b)
    with pytest.raises(RuntimeError, match="the encoder failed"):
        store.add_texts([f"t{i}" for i in range(100)], b, batch_size=10, window=20)
    assert [t["text"] for t in store.iter()] == [f"t{i}" for i in range(40)]
    assert not any(t.name.endswith("-ahead") for t in threading.enumerate())
    store.close()


def test_an_interrupt_in_a_commit_stops_the_window_being_embedded(tmp_path):
    b = HookBackend(hook=lambda n, texts: time.sleep(0.2))
    store = open_store(tmp_path, b)
    commit = store._commit_rows

    def interrupted(plan, rows, result):
        if len(rows) and rows.texts[0] == "t20":
            raise KeyboardInterrupt
        commit(plan, rows, result)
    store._commit_rows = interrupted
    with pytest.raises(KeyboardInterrupt):
        store.add_texts([f"t{i}" for i in range(100)], b, batch_size=10, window=20)
    assert not any(t.name.endswith("-ahead") for t in threading.enumerate())
    assert store.count() == 20
    store.close()


def test_the_duplicate_check_is_one_query_per_window_not_one_per_text(tmp_path):
    b = HookBackend()
    store = open_store(tmp_path, b)
    texts = [f"t{i}" for i in range(600)]
    store.add_texts(texts, b, batch_size=100, window=200)
    queries = []
    store._db.conn.set_trace_callback(queries.append)
    r = store.add_texts(texts, b, batch_size=100, window=200)        # all 600 stored already
    store._db.conn.set_trace_callback(None)
    assert r.duplicates == 600 and r.added == 0
    looks = [q for q in queries if "JOIN sentences AS s ON s.hash" in q]
    # one look before a window is embedded; its commits reuse it (nothing else changed the store)
    assert len(looks) == 3, looks[:3]
    store.close()


def test_new_rows_commit_on_one_look_up_per_window_with_repeats_across_windows(tmp_path):
    b = HookBackend()
    store = open_store(tmp_path, b)
    store.add_texts(["old"], b)
    texts = [f"t{i}" for i in range(40)] + ["t3", "old", "t41"] + [f"t{i}" for i in range(40, 80)]
    queries = []
    store._db.conn.set_trace_callback(queries.append)
    r = store.add_texts(texts, b, batch_size=7, window=20)
    store._db.conn.set_trace_callback(None)
    looks = [q for q in queries if "JOIN sentences AS s ON s.hash" in q]
    assert len(looks) == 5                      # 83 texts, windows of 20: five windows, one look each
    rows = list(store.iter())
    assert [t["text"] for t in rows] == ["old"] + [t for t in dict.fromkeys(texts) if t != "old"]
    by_text = {t["text"]: t["id"] for t in rows}
    assert r.ids == [by_text[t] for t in texts] and (r.added, r.duplicates) == (80, 3)
    store.close()


def test_a_text_added_by_another_thread_after_a_windows_look_up_is_not_stored_twice(tmp_path):
    """A window looks up its duplicates before it is embedded; another thread adding one of its
    texts meanwhile moves the store's generation, so its commit looks again."""
    store = None

    def sneak_in(n, texts):
        if n == 2:        # window 1 is being embedded: its look-up is done
            other.add_texts(["t25", "t26"], FakeBackend(dim=D))
    b = HookBackend(hook=sneak_in)
    store = other = open_store(tmp_path, b)
    # The SQL is recorded in Python, not with SQLite's trace callback: that callback needs the
    # GIL inside sqlite3_step, while the other thread holds the GIL waiting for the connection
    # to bind its own statement (a deadlock of the test, not of the store).
    queries, query = [], store._db._q
    store._db._q = lambda sql, *a, **k: queries.append(sql) or query(sql, *a, **k)
    r = store.add_texts([f"t{i}" for i in range(60)], b, window=20)
    store._db._q = query
    texts = [t["text"] for t in store.iter()]
    assert sorted(texts) == sorted(f"t{i}" for i in range(60)) and len(texts) == 60
    assert (r.added, r.duplicates) == (58, 2)
    by_text = {t["text"]: t["id"] for t in store.iter()}
    assert r.ids == [by_text[f"t{i}"] for i in range(60)]
    looks = [q for q in queries if "JOIN sentences AS s ON s.hash" in q]
    assert len(looks) >= 4          # three windows' look-ups, and window 1's again at its commit
    store.close()


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    import numpy as np
    from index.faiss.store import VectorStore
    from tests.support.fake_vectors import text_vector
    from tests.support.store_backends import Fingerprint
    import index.faiss.wal_checkpoints as wal_checkpoints

    D = 16
    wal_checkpoints.CHECKPOINT_ROWS = 64      # checkpoints on the helper thread all along: killed amid them too

    class SlowFake:
        model_name, dim = "fake", D
        def fingerprint(self, pooling="mean"):
            return Fingerprint("fake", "f" * 64, pooling, D, True)
        def embed(self, texts, pooling="mean", batch_size=None, progress=None, cancel=None, stats=None):
            out = []
            for i, t in enumerate(texts):
                if i % 16 == 0:
                    time.sleep(0.002)         # an encoder's batches: the commit overlaps them
                out.append(text_vector(t, D))
            return np.stack(out)

    folder, n = sys.argv[1], int(sys.argv[2])
    store = VectorStore.open(folder, writable=True, create=True,
                             fingerprint=Fingerprint("fake", "f" * 64, "mean", D, True))
    print("READY", flush=True)
    texts = [f"sentence {{i % (n - 50)}}" for i in range(n)]     # repeats, across windows too
    store.add_stream(texts, SlowFake(), batch_size=32, window=128,
                     progress=lambda done, total: print("DONE", done, flush=True))
    store.save()
    print("FINISHED", flush=True)
""")


def run_child(folder, n, kill_after=None):
    script = folder.parent / "child.py"
    script.write_text(CHILD.format(root=str(ROOT)))
    env = child_env(OMP_NUM_THREADS="1")
    proc = subprocess.Popen([sys.executable, str(script), str(folder), str(n)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout.readline().strip() == "READY", proc.stderr.read()
    if kill_after is None:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    else:
        time.sleep(kill_after)
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
    return [int(ln.split()[1]) for ln in out.splitlines() if ln.startswith("DONE")]


def stored_texts(folder):
    with VectorStore.open(folder) as s:
        rows = list(s.iter())
        ids, vecs = s.vectors()
        np.testing.assert_array_equal(s.index_ids(), np.sort(ids))
        by_id = {r["id"]: r["text"] for r in rows}
        for i, v in zip(ids, vecs):
            np.testing.assert_allclose(v, text_vector(by_id[int(i)], D), atol=1e-5)
        return [r["text"] for r in rows]


@pytest.mark.slow   # over 10 s: `make test-slow` (keeps `make test` in its budget)
def test_kill9_during_overlapped_ingest_keeps_a_prefix_and_a_rerun_adds_the_rest_once(tmp_path):
    n = 3000
    unique = list(dict.fromkeys(f"sentence {i % (n - 50)}" for i in range(n)))
    rng = random.Random(3)
    folder = tmp_path / "store"
    for _ in range(4):
        reported = run_child(folder, n, kill_after=rng.uniform(0.3, 2.5))
        texts = stored_texts(folder)
        assert len(texts) == len(set(texts)), "a text was stored twice"
        assert texts == unique[:len(texts)], "the stored rows are not a prefix of the input"
        # everything reported committed is there (a window's progress is reported once it commits)
        done = max([d for d in reported if d % 128 == 0 or d == n] or [0])
        assert len(set(texts)) >= len(dict.fromkeys(f"sentence {i % (n - 50)}" for i in range(done)))
    run_child(folder, n)
    texts = stored_texts(folder)
    assert texts == unique


def test_windows_grow_to_a_second_of_a_fast_encoder_and_stay_for_a_slow_one():
    from index.store.adding import EMBED_WINDOW, MAX_WINDOW, WINDOW_SECONDS, next_window
    assert next_window(EMBED_WINDOW, 1024, 1024 / 600) == EMBED_WINDOW          # a CPU's minilm
    assert next_window(EMBED_WINDOW, 1024, 1024 / 5000 / WINDOW_SECONDS) == 4096  # a power of two below
    assert next_window(EMBED_WINDOW, 1024, 0.0) == MAX_WINDOW                   # a null encoder
    assert next_window(4096, 0, 0.0) == 4096                 # nothing new embedded: no measurement


def test_a_fast_encoders_windows_grow_after_the_two_in_flight(tmp_path):
    b = HookBackend()
    store = open_store(tmp_path, b)
    sizes = []
    commit = store._commit_rows

    def recording(plan, rows, result):
        sizes.append(len(rows))
        commit(plan, rows, result)
    store._commit_rows = recording
    r = store.add_texts([f"t{i}" for i in range(5000)], b)       # the defaults: window None
    assert r.added == 5000
    # windows 0 and 1 are read before any rate is known; the rest is one grown window
    assert sizes == [1024, 1024, 5000 - 2048]
    store.close()


def test_a_small_input_runs_on_the_callers_thread_alone(tmp_path, monkeypatch):
    """Two sentences: nothing to overlap, so no helper thread is started (each handoff costs a
    time slice on a loaded machine); a large one uses them."""
    b = HookBackend()
    store = open_store(tmp_path, b)
    started = []
    real_start = threading.Thread.start
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self.name) or real_start(self))
    r = store.add_texts(["one sentence", "another sentence"], b)
    assert r.added == 2 and started == []
    store.add_texts([f"t{i}" for i in range(3000)], b)
    assert {"encoderscope-tokenize-ahead", "encoderscope-embed-ahead", "encoderscope-index-add"} <= set(started)
    store.close()


class TokenisingBackend(HookBackend):
    """A backend that tokenises apart (as Backend.tokenize): what reached the tokenizer."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.tokenised = []

    def tokenize(self, texts):
        self.tokenised.append(list(texts))
        return ("tokens", list(texts))

    def embed(self, texts, *a, tokens=None, **kw):
        assert tokens == ("tokens", list(texts))      # the window's own tokens
        return super().embed(texts, *a, **kw)


def test_stored_texts_and_repeats_never_reach_the_tokenizer(tmp_path):
    b = TokenisingBackend()
    store = open_store(tmp_path, b)
    store.add_texts(["old", "older"], b)
    b.tokenised.clear()
    texts = (["old"] + [f"t{i}" for i in range(30)] + ["t1", "older", "t29", "t30", "t30"]
             + [f"t{i}" for i in range(31, 60)])
    r = store.add_texts(texts, b, window=16)
    seen = [t for w in b.tokenised for t in w]
    assert sorted(seen) == sorted(f"t{i}" for i in range(60))       # each new text once
    assert (r.added, r.duplicates) == (60, 5)
    store.close()
