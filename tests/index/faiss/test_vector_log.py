"""The vector log (index/faiss/vector_log.py, format 3): each row's float32 vector in a file
beside store.db, one slot each.

Checked against independent references: the digest against plain Python integers; the file
byte for byte; crash safety with a real SIGKILL of a child between the log's fsync and the
COMMIT; damage (a torn append, a cut, a missing, foreign or damaged log, a folder or FIFO in its
place) through the store API and the CLI, and the files on disk before and after. Fake vectors
(tests/support/fake_vectors.py): fast.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from core.errors import Cancelled
from index.faiss.store import VectorStore
from index.faiss.vector_log import HEADER_BYTES, VectorLog, log_file_name, vector_digests
from index.store.errors import StoreCorrupted
from tests.index.faiss.test_row_path import reference_digest
from tests.support.fake_vectors import text_vector
from tests.support.paths import ROOT, child_env
from tests.support.store_backends import FakeBackend
from tests.support.tiny_models import run_cli

D = 16
WIDTH = 4 * D
FP = {"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D, "normalized": True}
POSIX_ONLY = pytest.mark.skipif(sys.platform == "win32",
                                reason="SIGKILL and FIFOs are POSIX: Windows has neither")


def vec(text, dim=D):
    return text_vector(text, dim)


# Windows of this many rows go to the log whatever the store's rule for small transactions
# (which may keep a few vectors in their rows): every test here writes at least one.
N = 300


def texts_of(prefix, n=N):
    return [f"{prefix} text number {i:03d}" for i in range(n)]


def make(folder, texts):
    with VectorStore.open(folder, writable=True, create=True, fingerprint=FP) as s:
        s.add(texts, np.stack([vec(t) for t in texts]))
    return folder


def log_path(folder) -> Path:
    (path,) = Path(folder).glob("vectors-*.f32")
    return path


def db_meta(folder, key):
    with VectorStore.open(folder) as s:      # the store's own reading of its database
        return s._db.get_meta(key)


def slots_of(folder) -> dict[int, int]:
    c = sqlite3.connect(Path(folder) / "store.db")
    try:
        return dict(c.execute("SELECT id, slot FROM sentences"))
    finally:
        c.close()


def assert_verified(folder, dim=D, embed=vec):
    """Every row verifies (checksum, slot, unit vector: verify=True), its vector is its text's,
    and searching it finds that row at 1.0: a vector paired with another sentence fails."""
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        recs = {r["id"]: r["text"] for r in s.iter()}
        ids, vecs = s.vectors()
        assert sorted(ids.tolist()) == sorted(recs)
        if len(ids):
            want = np.stack([embed(recs[int(i)]) for i in ids])
            np.testing.assert_array_equal(vecs, want)
            hits = s.search(vecs, k=1)
            assert [h[0].id for h in hits] == ids.tolist()
            assert min(h[0].score for h in hits) > 0.9999
    return recs


def cli(capsys, *argv):
    rc, out, err = run_cli([str(a) for a in argv], capsys)
    assert "Traceback" not in err, err
    return rc, out, err


def error_lines(err) -> list[str]:
    return [x for x in err.splitlines() if x.startswith("error:")]


def files_state(folder) -> dict:
    """name -> sha256 of every regular file but SQLite's side files and the lock (which readers
    may create and remove), or a marker for what is not a regular file."""
    out = {}
    for p in sorted(Path(folder).iterdir()):
        if p.name == "lock" or p.name.endswith(("-wal", "-shm", "-journal")):
            continue
        if p.is_symlink() or not p.is_file():
            out[p.name] = "dir" if p.is_dir() else "special"
        else:
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# ---------------------------------------------------------------- 1. the digest
def test_vector_digests_equal_a_plain_integer_reference():
    rng = np.random.default_rng(7)
    for dim in (1, 3, 16, 384):
        v = rng.normal(size=(6, dim)).astype(np.float32)
        # words with every high bit set (NaN payloads, -0, infinities, denormals): the products
        # overflow 64 bits, so a sum that does not wrap modulo 2**64 shows
        v.view(np.uint32)[0, :] = 0xFFFFFFFF
        v[1, 0] = -0.0
        v[2, 0] = np.inf
        v.view(np.uint32)[3, 0] = 1
        got = vector_digests(v)
        assert got.shape == (6, 16) and got.dtype == np.uint8
        for row, digest in zip(v, got):
            assert digest.tobytes() == reference_digest(row.tobytes())
    assert vector_digests(np.zeros((0, 8), np.float32)).shape == (0, 16)


def test_every_single_bit_flip_changes_the_digest():
    rng = np.random.default_rng(3)
    base = rng.normal(size=8).astype(np.float32)
    flips = np.repeat(base[None], 8 * 32, axis=0)
    words = flips.view(np.uint32)
    for i in range(8):
        for b in range(32):
            words[32 * i + b, i] ^= np.uint32(1 << b)
    assert len({r.tobytes() for r in flips}) == 256          # 256 distinct vectors
    want = vector_digests(base[None])[0].tobytes()
    got = vector_digests(flips)
    changed = [g.tobytes() != want for g in got]
    assert all(changed), [k for k, c in enumerate(changed) if not c]
    for k in (0, 31, 100, 255):                              # and each is the reference's
        assert got[k].tobytes() == reference_digest(flips[k].tobytes())


# ---------------------------------------------------------------- 2. VectorLog itself
SID = "ab" * 16


def test_log_round_trip_byte_for_byte(tmp_path):
    path = tmp_path / log_file_name(1)
    rng = np.random.default_rng(1)
    a = rng.normal(size=(3, 4)).astype(np.float32)
    b = rng.normal(size=(2, 4)).astype(np.float32)
    log = VectorLog.create(path, SID, 4)
    assert path.stat().st_size == HEADER_BYTES
    assert log.append(a) == 0 and log.pending == 3 and log.committed == 0
    vecs, missing = log.read([0, 1, 2])
    assert missing.all() and not vecs.any()                  # written, not committed: not read
    log.commit()
    assert log.append(b) == 3
    log.commit()
    raw = path.read_bytes()
    assert len(raw) == HEADER_BYTES + 5 * 16
    assert raw[:8] == b"ESVECLOG" and raw[HEADER_BYTES:] == a.tobytes() + b.tobytes()
    vecs, missing = log.read(range(5))
    assert not missing.any() and vecs.tobytes() == a.tobytes() + b.tobytes()
    log.close()
    again = VectorLog.open(path, SID, 4, committed=5, writable=False)
    all_rows = np.concatenate([a, b])
    order = [4, 0, 0, 2, 4, 1, 3, 3, 2]                       # any order, repeats
    vecs, missing = again.read(order)
    assert not missing.any() and vecs.tobytes() == all_rows[order].tobytes()
    vecs, missing = again.read([-1, 5, 99, 2, -7])            # before the start, past the end
    assert missing.tolist() == [True, True, True, False, True]
    assert vecs[3].tobytes() == all_rows[2].tobytes() and not np.delete(vecs, 3, 0).any()
    vecs, missing = again.read([])
    assert vecs.shape == (0, 4) and len(missing) == 0
    again.close()


def test_a_rolled_back_window_leaves_dead_slots_never_written_over(tmp_path):
    path = tmp_path / log_file_name(1)
    log = VectorLog.create(path, SID, 2)
    x, y = np.ones((2, 2), np.float32), np.full((1, 2), 2, np.float32)
    log.append(x)
    log.rollback()                   # a COMMIT that failed: its slots stay dead
    assert log.append(y) == 2
    log.commit()
    assert path.read_bytes()[HEADER_BYTES:] == x.tobytes() + y.tobytes()
    vecs, missing = log.read([2])
    assert not missing[0] and vecs.tobytes() == y.tobytes()
    log.close()


def test_a_file_cut_mid_slot_reads_the_slots_before_the_cut(tmp_path):
    path = tmp_path / log_file_name(1)
    rows = np.arange(20, dtype=np.float32).reshape(5, 4)
    log = VectorLog.create(path, SID, 4)
    log.append(rows)
    log.commit()
    log.close()
    with open(path, "r+b") as f:
        f.truncate(HEADER_BYTES + 2 * 16 + 7)                # slot 2 cut in its middle
    cut = VectorLog.open(path, SID, 4, committed=5, writable=False)
    assert cut.slots_on_disk() == 2 and cut.short_by() == 3
    for order in ([0, 1, 2, 3, 4], [3, 1, 4, 0, 2], [2, 0, 2, 1]):
        vecs, missing = cut.read(order)
        assert missing.tolist() == [s >= 2 for s in order]
        for k, s in enumerate(order):
            want = rows[s] if s < 2 else np.zeros(4, np.float32)
            assert vecs[k].tobytes() == want.tobytes()
    cut.close()


def test_a_log_of_another_store_or_dimension_is_refused(tmp_path):
    path = tmp_path / log_file_name(1)
    VectorLog.create(path, SID, 4).close()
    with pytest.raises(StoreCorrupted, match="another store") as e:
        VectorLog.open(path, "cd" * 16, 4, committed=0, writable=False)
    assert e.value.remedy == "restore"
    with pytest.raises(StoreCorrupted, match="4-d vectors, the database 8-d"):
        VectorLog.open(path, SID, 8, committed=0, writable=False)
    VectorLog.open(path, SID, 4, committed=0, writable=True).close()


# ---------------------------------------------------------------- 3. killed between fsync and COMMIT
KILLED_AFTER_APPEND = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from index.faiss.store import VectorStore
    from index.faiss.vector_log import VectorLog
    from tests.support.fake_vectors import text_vector

    D = {dim}
    FP = {{"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D,
           "normalized": True}}
    folder, kill_at = sys.argv[1], int(sys.argv[2])
    real_write, calls = VectorLog.write, []

    def write_then_die(self, first, vectors):
        real_write(self, first, vectors)            # written and fsync'd
        calls.append(first)
        if len(calls) == kill_at:                   # before the COMMIT that names the slots
            os.kill(os.getpid(), signal.SIGKILL)

    VectorLog.write = write_then_die
    store = VectorStore.open(folder, writable=True, create=True, fingerprint=FP)
    for w in range(kill_at):
        texts = [f"window {{w}} sentence {{j}}" for j in range({n} + w)]
        store.add(texts, np.stack([text_vector(t, D) for t in texts]))
        print("ACK", w, len(texts), flush=True)
""")


@POSIX_ONLY
def test_killed_between_the_logs_fsync_and_the_commit(tmp_path, capsys):
    folder = tmp_path / "s"
    script = tmp_path / "child.py"
    script.write_text(KILLED_AFTER_APPEND.format(root=str(ROOT), dim=D, n=N))
    r = subprocess.run([sys.executable, str(script), str(folder), "4"], capture_output=True,
                       text=True, timeout=120, env=child_env(OMP_NUM_THREADS="1"), check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr
    acked = [ln.split() for ln in r.stdout.splitlines()]
    assert [int(a[1]) for a in acked] == [0, 1, 2]           # windows 0-2 committed, 3 killed
    committed = sum(int(a[2]) for a in acked)                # N, N + 1, N + 2 rows: a slot each
    want = {f"window {w} sentence {j}" for w in range(3) for j in range(N + w)}
    size = log_path(folder).stat().st_size
    assert size == HEADER_BYTES + (committed + N + 3) * WIDTH    # the killed window's slots too

    recs = assert_verified(folder)                           # a reader: acknowledged rows only
    assert set(recs.values()) == want
    assert db_meta(folder, "vector_slots") == committed
    assert log_path(folder).stat().st_size == size           # a reader leaves the tail alone
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc == 0, err

    with VectorStore.open(folder, writable=True) as w:       # the writer cuts the tail
        assert log_path(folder).stat().st_size == HEADER_BYTES + committed * WIDTH
        more = texts_of("after the kill")
        w.add(more, np.stack([vec(t) for t in more]))
    assert set(assert_verified(folder).values()) == want | set(more)
    slots = slots_of(folder)
    assert sorted(slots.values()) == list(range(committed + N))    # the cut slots taken anew
    assert log_path(folder).stat().st_size == HEADER_BYTES + (committed + N) * WIDTH


# ---------------------------------------------------------------- 4. a torn append
@pytest.mark.parametrize("garbage", [7, 2 * WIDTH + 5], ids=["part-slot", "slots-and-a-part"])
def test_a_torn_append_is_ignored_by_readers_and_cut_by_a_writer(tmp_path, capsys, garbage):
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    path = log_path(folder)
    clean = path.read_bytes()
    assert len(clean) == HEADER_BYTES + len(texts) * WIDTH
    with open(path, "ab") as f:                  # what a crash mid-write leaves at the end
        f.write(np.random.default_rng(0).bytes(garbage))
    torn = path.read_bytes()
    assert set(assert_verified(folder).values()) == set(texts)     # readers: nothing wrong
    assert path.read_bytes() == torn                                 # and nothing written
    with VectorStore.open(folder, writable=True) as w:
        assert path.read_bytes() == clean                           # the writer cuts the tail
        w.add(["one more"], vec("one more")[None])
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc == 0 and not error_lines(err), err
    assert set(assert_verified(folder).values()) == {*texts, "one more"}
    c = sqlite3.connect(folder / "store.db")
    assert c.execute("SELECT name FROM sqlite_master WHERE name='damaged'").fetchone() is None
    c.close()


# ---------------------------------------------------------------- 5. a log cut short
@pytest.mark.parametrize("extra", [0, 5], ids=["on-a-slot", "mid-slot"])
def test_a_log_cut_short_is_repaired_by_setting_the_lost_rows_aside(tmp_path, capsys, extra):
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    path = log_path(folder)
    k = 3
    kept = len(texts) - k
    with open(path, "r+b") as f:
        f.truncate(HEADER_BYTES + kept * WIDTH + extra)
    before = files_state(folder)
    with pytest.raises(StoreCorrupted, match="vector log") as e:
        VectorStore.open(folder)
    assert e.value.remedy == "repair"
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc == 2 and len(error_lines(err)) == 1 and "info --repair" in error_lines(err)[0], err
    assert files_state(folder) == before                  # a check changes nothing
    rc, _out, err = cli(capsys, "info", "--repair", "--store", folder)
    assert rc == 0, err
    lost = list(range(kept + 1, len(texts) + 1))          # ids count from 1, slots from 0
    c = sqlite3.connect(folder / "store.db")
    damaged = dict(c.execute("SELECT id, text FROM damaged"))
    c.close()
    assert damaged == {i: texts[i - 1] for i in lost}     # exactly those, their texts kept
    assert db_meta(folder, "vector_slots") == kept        # fitted to the file
    assert set(assert_verified(folder).values()) == set(texts[:kept])
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc == 0, err
    more = texts_of("after the repair") + texts[kept:]     # the lost texts ingested again
    with VectorStore.open(folder, writable=True) as w:
        assert w.add(more, np.stack([vec(t) for t in more])).added == len(more)
    assert set(assert_verified(folder).values()) == set(texts) | set(more)
    assert sorted(slots_of(folder).values()) == list(range(kept + len(more)))
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc == 0, err



@pytest.mark.parametrize("slot", ["'abc'", "X'00'", "1e30", "2.5", "-1", "NULL", "3", "99999"])
def test_a_rows_damaged_slot_names_that_row_and_repair_sets_it_aside(tmp_path, capsys, slot):
    """Text, a blob, a fraction or a huge number where a slot belongs, another row's slot, one
    past the end, none: that row is named (never a traceback), and repair sets it aside."""
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    c = sqlite3.connect(folder / "store.db")
    c.execute(f"UPDATE sentences SET slot={slot} WHERE id=5")
    c.commit()
    c.close()
    with pytest.raises(StoreCorrupted) as e:
        VectorStore.open(folder, verify=True)
    assert e.value.damaged_ids == [5] and e.value.remedy == "repair"
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    (line,) = error_lines(err)
    assert rc == 2 and re.search(r"(id|rows) \[?5\b", line) and "info --repair" in line, err
    rc, _out, err = cli(capsys, "info", "--repair", "--store", folder)
    assert rc == 0 and "set aside 1 damaged row (id 5)" in err, err
    assert set(assert_verified(folder).values()) == set(texts) - {texts[4]}
    assert cli(capsys, "info", "--check", "--store", folder)[0] == 0


@pytest.mark.parametrize("slots", [10, 0, -3], ids=["lower", "zero", "negative"])
def test_a_damaged_committed_count_never_costs_a_vector(tmp_path, capsys, slots):
    """`vector_slots` changed on disk to less than the rows name (the rows' checksums cannot
    cover it): the writer's open must not cut the vectors past it, so repair loses nothing."""
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    intact = log_path(folder).read_bytes()
    c = sqlite3.connect(folder / "store.db")
    c.execute("UPDATE meta SET value=? WHERE key='vector_slots'", (json.dumps(slots),))
    c.commit()
    c.close()
    rc, _out, err = cli(capsys, "info", "--check", "--store", folder)
    assert rc in (0, 2) and len(error_lines(err)) == rc // 2, err
    rc, _out, err = cli(capsys, "info", "--repair", "--store", folder)
    assert rc == 0 and "set aside" not in err, err
    assert log_path(folder).read_bytes() == intact                  # not one vector cut
    assert db_meta(folder, "vector_slots") == len(texts)            # what the rows name
    assert set(assert_verified(folder).values()) == set(texts)      # readers too
    assert cli(capsys, "info", "--check", "--store", folder)[0] == 0
    more = texts_of("more")
    with VectorStore.open(folder, writable=True) as w:
        w.add(more, np.stack([vec(t) for t in more]))
    slots = slots_of(folder)
    assert [slots[len(texts) + 1 + k] for k in range(N)] == list(range(len(texts), len(texts) + N))
    assert set(assert_verified(folder).values()) == {*texts, *more}     # appended after them

# ---------------------------------------------------------------- 6. a missing, foreign or damaged log
LOG_DAMAGE = ["missing", "foreign", "flip-magic", "flip-dim", "flip-store-id", "flip-digest",
              "folder", "fifo"]


def _damage_log(tmp_path, folder, damage):
    path = log_path(folder)
    if damage == "missing":
        path.unlink()
    elif damage == "foreign":            # another store's log, of the same name and size
        other = make(tmp_path / "other", texts_of("alpha"))
        shutil.copy(log_path(other), path)
    elif damage.startswith("flip-"):     # one bit of the header
        at = {"magic": 2, "dim": 12, "store-id": 30, "digest": 60}[damage[5:]]
        raw = bytearray(path.read_bytes())
        raw[at] ^= 0x04
        path.write_bytes(bytes(raw))
    elif damage == "folder":
        path.unlink()
        path.mkdir()
    elif damage == "fifo":
        path.unlink()
        os.mkfifo(path)


@contextmanager
def no_hang(seconds=60):
    """Fail, never block, where opening a FIFO would wait for a writer forever (POSIX: the
    alarm's exception ends the blocking open)."""
    if not hasattr(signal, "SIGALRM"):
        yield
        return

    def hung(*_):
        raise TimeoutError(f"hung for {seconds} s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.mark.parametrize("damage", LOG_DAMAGE)
def test_a_missing_foreign_or_damaged_log_is_one_error_and_changes_nothing(tmp_path, capsys, damage):
    if damage == "fifo" and sys.platform == "win32":
        pytest.skip("FIFOs are POSIX: Windows has none")
    folder = make(tmp_path / "s", texts_of("alpha"))
    _damage_log(tmp_path, folder, damage)
    before = files_state(folder)
    commands = [["info", "--store", folder], ["info", "--check", "--store", folder],
                ["info", "--repair", "--store", folder]]
    for writable in (False, True):
        with pytest.raises(StoreCorrupted) as e, no_hang():
            VectorStore.open(folder, writable=writable)
        assert e.value.remedy == "restore", e.value
        assert files_state(folder) == before
    for argv in commands:
        with no_hang():
            rc, _out, err = cli(capsys, *argv)
        lines = error_lines(err)
        assert rc == 2 and len(lines) == 1 and err.startswith("error:"), (argv, err)
        assert "vector log" in lines[0] and "restore" in lines[0] and "info --repair" not in lines[0]
        assert files_state(folder) == before, argv
    assert sorted(p.name for p in folder.glob("vectors-*")) == \
        ([] if damage == "missing" else [log_file_name(1)])      # no new log made either



def test_another_stores_database_in_the_logs_folder_says_restore_not_repair(tmp_path, capsys):
    """store.db swapped for another store's: the log is not the database's, which no repair can
    mend; the advice is to restore (and repair, if run, says so and changes nothing)."""
    folder = make(tmp_path / "s", texts_of("alpha"))
    other = make(tmp_path / "other", texts_of("beta"))
    for suffix in ("-wal", "-shm"):
        (folder / f"store.db{suffix}").unlink(missing_ok=True)
    shutil.copy(other / "store.db", folder / "store.db")
    before = files_state(folder)
    for argv in (["info"], ["info", "--check"], ["info", "--repair"]):
        rc, _out, err = cli(capsys, *argv, "--store", folder)
        (line,) = error_lines(err)
        assert rc == 2 and "another store" in line and "restore" in line, err
        assert "info --repair" not in line, line
        assert files_state(folder) == before


@pytest.mark.parametrize("page", [1, 3])
def test_a_zeroed_database_page_is_one_error_never_a_traceback(tmp_path, capsys, page):
    folder = make(tmp_path / "s", texts_of("alpha"))
    raw = bytearray((folder / "store.db").read_bytes())
    raw[page * 4096:(page + 1) * 4096] = bytes(4096)       # what SQLite's quick_check trips on
    (folder / "store.db").write_bytes(bytes(raw))
    with pytest.raises(StoreCorrupted) as e:
        VectorStore.open(folder)
    assert e.value.remedy == "restore"
    for argv in (["info"], ["info", "--check"], ["info", "--repair"]):
        rc, _out, err = cli(capsys, *argv, "--store", folder)
        (line,) = error_lines(err)
        assert rc == 2 and "damaged" in line and "restore" in line, err

# ---------------------------------------------------------------- 7. updates and removals
def test_an_update_leaves_its_old_slot_dead_and_a_removal_leaves_the_slots(tmp_path):
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    path = log_path(folder)
    assert slots_of(folder) == {i: i - 1 for i in range(1, N + 1)}
    before = path.read_bytes()
    with VectorStore.open(folder, writable=True) as w:
        w.update_text(3, "a replaced text", vec("a replaced text"))
        w.remove([5])
        w.update_text(7, "another replaced text", vec("another replaced text"))
    raw = path.read_bytes()
    assert raw[:len(before)] == before        # no slot written over: the old ones stay, dead
    slots = slots_of(folder)
    assert 5 not in slots and all(slots[i] == i - 1 for i in slots if i not in (3, 7))
    # An updated row takes the next slot (the log grows by one), or goes back into its row
    # where the store keeps one-row transactions there (its slot cleared).
    grown = (len(raw) - len(before)) // WIDTH
    assert len(raw) == len(before) + grown * WIDTH
    taken = [slots[3], slots[7]]
    assert [k for k in taken if k is not None] == list(range(N, N + grown))
    assert db_meta(folder, "vector_slots") == N + grown
    for k, text in zip(taken, ["a replaced text", "another replaced text"]):
        if k is not None:
            assert raw[HEADER_BYTES + k * WIDTH:HEADER_BYTES + (k + 1) * WIDTH] == vec(text).tobytes()
    recs = assert_verified(folder)
    assert recs[3] == "a replaced text" and 5 not in recs and len(recs) == N - 1


def test_a_reader_opened_before_updates_never_scores_another_rows_vector(tmp_path):
    texts = texts_of("alpha")
    folder = make(tmp_path / "s", texts)
    reader = VectorStore.open(folder)
    queries = [vec(t) for t in texts[:12]]
    with VectorStore.open(folder, writable=True) as w:
        for round_ in range(3):
            for i in range(1 + round_, 13, 3):             # rows 1..12 change texts and slots
                w.update_text(i, f"round {round_} row {i}", vec(f"round {round_} row {i}"))
            w.remove([20 + round_])
            w.add([f"added in round {round_}"], vec(f"added in round {round_}")[None])
            for q in queries:                              # the reader searches in between
                for hit in reader.search(q, k=5)[0]:
                    # the score is the query's cosine with the hit's own text's vector
                    assert hit.score == pytest.approx(float(vec(hit.text) @ q), abs=1e-5), hit
                    assert reader.get([hit.id])[hit.id]["text"] == hit.text
    for round_ in range(3):
        top = reader.search(vec(f"added in round {round_}"), k=1)[0][0]
        assert top.text == f"added in round {round_}" and top.score > 0.9999
    reader.close()
    assert_verified(folder)


# ---------------------------------------------------------------- 8. rebuild with another model
def _fake_store(folder, backend, texts):
    with VectorStore.open(folder, writable=True, create=True, fingerprint=backend.fingerprint()) as s:
        s.add_texts(texts, backend)
    return folder


def _header_dim(path) -> int:
    return int.from_bytes(path.read_bytes()[12:16], "little")


def test_a_rebuild_moves_every_vector_into_a_new_log(tmp_path):
    a, b = FakeBackend("model-a", D, "a" * 64), FakeBackend("model-b", 24, "b" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    with VectorStore.open(folder, writable=True) as w:
        w.update_text(2, "a replaced text", backend=a)       # a dead slot in the old log
        w.remove([9])
        w.rebuild(b, batch_size=16)
    path = log_path(folder)                                   # the old log is gone
    assert path.name == log_file_name(2) and _header_dim(path) == 24
    assert path.stat().st_size == HEADER_BYTES + (N - 1) * 4 * 24   # dense: a slot per row
    assert db_meta(folder, "vector_log") == {"file": log_file_name(2), "dim": 24}
    assert db_meta(folder, "vector_slots") == N - 1
    assert sorted(slots_of(folder).values()) == list(range(N - 1))
    recs = assert_verified(folder, dim=24, embed=lambda t: b.embed([t])[0])
    assert recs[2] == "a replaced text" and 9 not in recs and len(recs) == N - 1
    with VectorStore.open(folder, writable=True) as w:        # appends go on in the new log
        w.add_texts(texts_of("after the rebuild"), b)
    assert path.stat().st_size == HEADER_BYTES + (2 * N - 1) * 4 * 24
    assert_verified(folder, dim=24, embed=lambda t: b.embed([t])[0])


def test_a_cancelled_or_failed_rebuild_keeps_the_old_log(tmp_path, monkeypatch):
    from index.faiss.sentences import SentenceDB
    a, b = FakeBackend("model-a", D, "a" * 64), FakeBackend("model-b", 24, "b" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    old = log_path(folder).read_bytes()
    embed_a = lambda t: a.embed([t])[0]        # noqa: E731
    b.cancel_after = 30                        # cancelled while the second chunk is embedded
    with VectorStore.open(folder, writable=True) as w, pytest.raises(Cancelled):
        w.rebuild(b, batch_size=16)
    assert [p.name for p in folder.glob("vectors-*")] == [log_file_name(1)]
    assert log_path(folder).read_bytes() == old
    assert assert_verified(folder, embed=embed_a) and db_meta(folder, "vector_log")["dim"] == D

    b.cancel_after = None                      # a failure inside the switch's transaction
    real = SentenceDB.set_meta

    def failing(self, key, value):
        if key == "encoders":                  # after every vector went into the new log
            assert len(list(folder.glob("vectors-*"))) == 2
            raise OSError("the disk failed")
        return real(self, key, value)
    monkeypatch.setattr(SentenceDB, "set_meta", failing)
    with VectorStore.open(folder, writable=True) as w, pytest.raises(OSError, match="disk failed"):
        w.rebuild(b, batch_size=16)
    monkeypatch.setattr(SentenceDB, "set_meta", real)
    assert [p.name for p in folder.glob("vectors-*")] == [log_file_name(1)]   # the new one removed
    assert log_path(folder).read_bytes() == old
    assert set(assert_verified(folder, embed=embed_a).values()) == set(texts)


KILLED_IN_THE_SWITCH = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    import numpy as np
    from index.faiss.sentences import SentenceDB
    from index.faiss.store import VectorStore      # numpy + faiss + sqlite only: starts fast
    from tests.support.fake_vectors import text_vector

    class Model24:                         # a fake model of another dimension, without torch
        def fingerprint(self, pooling="mean"):
            return {{"model": "model-b", "weights_sha256": "b" * 64, "pooling": pooling,
                     "dim": 24, "normalized": True}}

        def embed(self, texts, pooling="mean", **_):
            return np.stack([text_vector(t, 24) for t in texts])

    real = SentenceDB.set_meta

    def die_on_encoders(self, key, value):
        if key == "encoders":              # every vector in the new log, nothing committed
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, key, value)

    SentenceDB.set_meta = die_on_encoders
    store = VectorStore.open(sys.argv[1], writable=True)
    store.rebuild(Model24(), batch_size=16)
""")


@POSIX_ONLY
def test_a_rebuild_killed_in_its_switch_leaves_the_old_log_and_no_stray_one(tmp_path):
    a = FakeBackend("model-a", D, "a" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    old = log_path(folder).read_bytes()
    script = tmp_path / "child.py"
    script.write_text(KILLED_IN_THE_SWITCH.format(root=str(ROOT)))
    r = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                       timeout=120, env=child_env(OMP_NUM_THREADS="1"), check=False)
    assert r.returncode == -signal.SIGKILL, r.stderr
    stray = folder / log_file_name(2)
    assert stray.is_file() and _header_dim(stray) == 24       # the kill left it
    embed_a = lambda t: a.embed([t])[0]        # noqa: E731
    assert set(assert_verified(folder, embed=embed_a).values()) == set(texts)   # a reader: old model
    assert stray.is_file()                                    # a reader removes nothing
    VectorStore.open(folder, writable=True).close()
    assert [p.name for p in folder.glob("vectors-*")] == [log_file_name(1)]
    assert log_path(folder).read_bytes() == old
    assert set(assert_verified(folder, embed=embed_a).values()) == set(texts)


@pytest.mark.parametrize("rows", [0, N], ids=["never-filled", "emptied"])
def test_an_empty_store_rebuilt_with_another_dimension_takes_its_texts(tmp_path, rows):
    """No staged vector tells the new log's dimension: the new model's is used."""
    a, b = FakeBackend("model-a", D, "a" * 64), FakeBackend("model-b", 24, "b" * 64)
    folder = _fake_store(tmp_path / "s", a, texts_of("alpha", rows))
    more = texts_of("after the rebuild")
    with VectorStore.open(folder, writable=True) as w:
        w.remove(list(range(1, rows + 1)))
        w.rebuild(b)
        w.add_texts(more, b)
    assert db_meta(folder, "vector_log")["dim"] == 24
    assert [_header_dim(p) for p in folder.glob("vectors-*")] == [24]
    recs = assert_verified(folder, dim=24, embed=lambda t: b.embed([t])[0])
    assert sorted(recs.values()) == sorted(more)


def test_an_old_log_a_reader_still_holds_is_removed_later(tmp_path, monkeypatch):
    """On Windows a file another process holds open cannot be deleted: the rebuild still
    succeeds, and a later writer's open removes the old log."""
    import index.faiss.sentences as sentences_mod
    a, b = FakeBackend("model-a", D, "a" * 64), FakeBackend("model-b", 24, "b" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    real = sentences_mod.remove_own

    def held_open(path):
        if Path(path).name == log_file_name(1):
            raise PermissionError(13, "The process cannot access the file because it is being "
                                      "used by another process", str(path))
        real(path)
    monkeypatch.setattr(sentences_mod, "remove_own", held_open)
    with VectorStore.open(folder, writable=True) as w:
        w.rebuild(b, batch_size=16)
        w.add_texts(["after the rebuild"], b)
    VectorStore.open(folder, writable=True).close()          # still held: kept, no error
    assert sorted(p.name for p in folder.glob("vectors-*")) == [log_file_name(1), log_file_name(2)]
    monkeypatch.setattr(sentences_mod, "remove_own", real)   # the reader let go
    VectorStore.open(folder, writable=True).close()
    assert [p.name for p in folder.glob("vectors-*")] == [log_file_name(2)]
    recs = assert_verified(folder, dim=24, embed=lambda t: b.embed([t])[0])
    assert set(recs.values()) == {*texts, "after the rebuild"}


def test_a_reader_racing_a_log_switch_reads_rows_and_log_as_one_view(tmp_path):
    """A writer's rebuild commits a new log between a reader's read of its rows (their slots in
    the old log) and its look at the log: the reader must read those slots from the log they
    name, not from the new one (a false alarm of damage, or another row's vector)."""
    a = FakeBackend("model-a", D, "a" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    with VectorStore.open(folder, writable=True) as w:
        w.remove([1])                  # slot 0 dead: in the new, dense log every slot moves
    reader = VectorStore.open(folder)
    writer = VectorStore.open(folder, writable=True)
    real, fired = reader._db.rows._log, []

    def switch_first():
        if not fired:                                     # between the rows' read and this
            fired.append(1)
            writer.rebuild(a, batch_size=16)              # the same model: a new, dense log
        return real()
    reader._db.rows._log = switch_first
    q = a.embed([texts[9]])[0]
    try:
        for _ in range(2):                                # across the switch, then after it
            hits = reader.search(q, k=5)[0]
            assert hits[0].text == texts[9] and hits[0].score > 0.9999
            for hit in hits:
                assert hit.score == pytest.approx(float(a.embed([hit.text])[0] @ q), abs=1e-5)
        assert fired and [p.name for p in folder.glob("vectors-*")] == [log_file_name(2)]
    finally:
        reader.close()
        writer.close()


def test_a_reader_open_across_a_rebuild_with_another_model_of_the_same_width_says_so(tmp_path):
    """A writer re-embeds the store with another model of the same width while a reader has it
    open: the reader's next search must not score the new vectors against the old model's query
    (wrong hits, silently); it says the store changed and to open it again."""
    from index.store.errors import ModelMismatch
    a, b = FakeBackend("model-a", D, "a" * 64), FakeBackend("model-b", D, "b" * 64)
    texts = texts_of("alpha")
    folder = _fake_store(tmp_path / "s", a, texts)
    reader = VectorStore.open(folder)
    try:
        q = a.embed([texts[9]])[0]
        assert reader.search(q, k=1)[0][0].text == texts[9]
        with VectorStore.open(folder, writable=True) as w:
            w.rebuild(b, batch_size=16)
            w.add_texts(["one more after the rebuild"], b)
        with pytest.raises(ModelMismatch, match="re-embedded with .*open the store again") as e:
            reader.search(q, k=1)
        assert e.value.again
    finally:
        reader.close()
    with VectorStore.open(folder) as again:          # opened again: the new model's store
        hit = again.search(b.embed([texts[9]])[0], k=1)[0][0]
        assert hit.text == texts[9] and hit.score > 0.9999
