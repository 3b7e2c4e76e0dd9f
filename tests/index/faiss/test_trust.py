"""Issue 16 on the FAISS store: no silent wrong data, no traceback, no hang.

A foreign or older index + manifest is refused and repair rebuilds from the database (item 2);
bit flips inside store.db that SQLite's quick_check does not see are found by the row
checksums and named by id (item 3); a full disk gives one error line and loses nothing
(item 6); manifests that are damaged, without checksum, a folder or a FIFO give an error, never
a traceback or a hang (item 7); stores written before these changes keep opening and are
upgraded (tests/fixtures/store_v1, written by the format 1 code). Fake vectors: fast.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from index.faiss.manifest import CHECKSUM_KEY, read_manifest
from index.faiss.store import VectorStore
from index.store.errors import StoreCorrupted, StoreWriteFailed
from tests.support.fake_vectors import text_vector
from tests.support.paths import ROOT, child_env
from tests.support.tiny_models import run_cli as cli

FIXTURE = ROOT / "tests" / "fixtures" / "store_v1"
D = 16
FP = {"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D, "normalized": True}


def vec(text):
    return text_vector(text, D)


def make(folder, texts, kind="flat"):
    s = VectorStore.open(folder, writable=True, create=True, fingerprint=FP, index=kind)
    s.add(texts, np.stack([vec(t) for t in texts]))
    s.close()
    return folder


def texts_of(prefix, n=40):
    return [f"{prefix} text number {i:03d}" for i in range(n)]


def assert_verified(folder):
    """Every row's vector is its text's vector, and searching it finds that row at 1.0."""
    with VectorStore.open(folder) as s:
        recs = {r["id"]: r["text"] for r in s.iter()}
        ids, vecs = s.vectors()
        for i, v in zip(ids, vecs):
            np.testing.assert_allclose(v, vec(recs[int(i)]), atol=1e-6)
            hit = s.search(v[None], k=1)[0][0]
            assert hit.text == recs[int(i)] and hit.score == pytest.approx(1, abs=1e-5)
    return recs


def swap_parts(src, dst):
    for p in dst.glob("index-*.faiss"):
        p.unlink()
    for p in src.glob("index-*.faiss"):
        shutil.copy(p, dst / p.name)
    shutil.copy(src / "manifest.json", dst / "manifest.json")


# ---------------------------------------------------------------- item 2: foreign / older parts
@pytest.mark.parametrize("legacy,kind", [(False, "flat"), (True, "hnsw"), (True, "ivf")])
def test_another_stores_index_and_manifest_are_refused_and_repair_rebuilds(tmp_path, legacy, kind, capsys):
    # ivf keeps fp16 vectors: its comparison allows fp16's rounding and no more.
    a = make(tmp_path / "a", texts_of("alpha"), kind)
    b = make(tmp_path / "b", texts_of("beta"), kind)
    if legacy:   # a format 1 manifest has no store id: the index vectors still give it away
        m = json.loads((b / "manifest.json").read_text())
        m.update(format_version=1)
        m.pop("store_id")
        m.pop(CHECKSUM_KEY)
        (b / "manifest.json").write_text(json.dumps(m))
    swap_parts(b, a)
    with pytest.raises(StoreCorrupted, match="another store" if not legacy else "other vectors") as e:
        VectorStore.open(a)
    assert e.value.remedy == "repair"
    rc, _out, err = cli(["search", "alpha", "--store", a], capsys)
    assert rc == 2 and err.count("error:") == 1 and "info --repair --store" in err
    rc, _out, err = cli(["info", "--repair", "--store", a], capsys)
    assert rc == 0, err
    recs = assert_verified(a)
    assert sorted(recs.values()) == sorted(texts_of("alpha"))      # the database's, not b's
    assert read_manifest(a).store_id not in (None, read_manifest(b).store_id)


def test_an_older_snapshot_of_the_same_store_never_gives_wrong_results(tmp_path):
    folder = make(tmp_path / "s", texts_of("alpha"))
    old = tmp_path / "old"
    old.mkdir()
    swap_parts(folder, old)
    with VectorStore.open(folder, writable=True) as s:
        s.update_text(3, "a replaced text", vec("a replaced text"))
        s.remove([5])
        s.add(["a later text"], vec("a later text")[None])
    swap_parts(old, folder)           # the snapshot from before the changes comes back
    recs = assert_verified(folder)
    assert recs[3] == "a replaced text" and 5 not in recs and "a later text" in recs.values()


def test_a_reader_sees_a_writers_update_without_a_false_alarm(tmp_path):
    """A reader opened before a writer changed a text: its next search follows the writer."""
    folder = make(tmp_path / "s", texts_of("alpha"))
    reader = VectorStore.open(folder)
    with VectorStore.open(folder, writable=True) as w:
        w.update_text(3, "a replaced text", vec("a replaced text"))
    hits = reader.search(vec("alpha text number 002")[None], k=3)[0]   # row 3's old vector is nearest
    assert all(h.text != "alpha text number 002" for h in hits)
    assert reader.search(vec("a replaced text")[None], k=1)[0][0].text == "a replaced text"
    reader.close()


def test_database_swapped_for_an_older_copy_is_caught(tmp_path):
    folder = make(tmp_path / "s", texts_of("alpha"))
    shutil.copy(folder / "store.db", tmp_path / "old.db")
    with VectorStore.open(folder, writable=True) as s:
        s.add(["newer"], vec("newer")[None])
    shutil.copy(tmp_path / "old.db", folder / "store.db")
    with pytest.raises(StoreCorrupted, match="newer than the sentence database"):
        VectorStore.open(folder)
    VectorStore.open(folder, writable=True, repair=True).close()
    assert "newer" not in assert_verified(folder).values()


# ---------------------------------------------------------------- item 3: row checksums
def _flip_in_file(path, needle: bytes, change):
    raw = bytearray(path.read_bytes())
    at = raw.find(needle)
    assert at >= 0 and raw.find(needle, at + 1) < 0, needle
    change(raw, at)
    path.write_bytes(bytes(raw))


def test_bit_flips_in_texts_and_vectors_are_found_by_id(tmp_path, capsys):
    folder = make(tmp_path / "s", texts_of("alpha"))
    db = folder / "store.db"
    # One flipped bit in a text and one in a vector's exponent, written straight into the file.
    _flip_in_file(db, b"alpha text number 007", lambda r, at: r.__setitem__(at + 1, r[at + 1] ^ 0x01))
    target = vec("alpha text number 012").tobytes()
    _flip_in_file(db, target, lambda r, at: r.__setitem__(at + 3, r[at + 3] ^ 0x40))   # 40 rows: inline
    c = sqlite3.connect(db)
    assert c.execute("PRAGMA quick_check").fetchone()[0] == "ok"     # SQLite sees nothing
    assert c.execute("SELECT text FROM sentences WHERE id=8").fetchone()[0] == "ampha text number 007"
    c.close()
    bad = [8, 13]     # ids count from 1 in insertion order
    rc, _out, err = cli(["info", "--check", "--store", folder], capsys)
    assert rc == 2 and err.count("error:") == 1
    assert f"id {bad[0]}, {bad[1]}" in err and "info --repair" in err
    # opening (its sample of rows) or the search says so
    with pytest.raises(StoreCorrupted) as e, VectorStore.open(folder) as s:
        s.search(vec("alpha text number 012"), k=3)
    assert 13 in e.value.damaged_ids
    rc, _out, err = cli(["info", "--repair", "--store", folder], capsys)
    assert rc == 0 and f"set aside 2 damaged rows (id {bad[0]}, {bad[1]})" in err, err
    recs = assert_verified(folder)
    assert len(recs) == 38
    c = sqlite3.connect(db)
    assert sorted(r[0] for r in c.execute("SELECT id FROM damaged")) == bad   # kept, not deleted
    flipped = bytearray(target)
    flipped[3] ^= 0x40
    assert c.execute("SELECT vector FROM damaged WHERE id=13").fetchone()[0] == bytes(flipped)
    c.close()
    assert cli(["info", "--check", "--store", folder], capsys)[0] == 0


def test_check_verifies_rows_even_when_there_is_no_snapshot(tmp_path, capsys):
    folder = make(tmp_path / "s", texts_of("alpha"))
    (folder / "manifest.json").unlink()
    c = sqlite3.connect(folder / "store.db")
    c.execute("UPDATE sentences SET text='changed' WHERE id=5")
    c.commit()
    c.close()
    rc, _out, err = cli(["info", "--check", "--store", folder], capsys)
    assert rc == 2 and "(id 5)" in err


def test_checksum_covers_metadata_and_hash(tmp_path):
    folder = tmp_path / "s"
    s = VectorStore.open(folder, writable=True, create=True, fingerprint=FP)
    s.add(["with meta", "plain"], np.stack([vec("with meta"), vec("plain")]),
          metadata=[{"source": "a.txt", "row": 4, "lang": "en"}, None])
    s.close()
    c = sqlite3.connect(folder / "store.db")
    c.execute("UPDATE sentences SET meta='{\"lang\": \"fr\"}' WHERE id=1")
    c.execute("UPDATE sentences SET hash=zeroblob(16) WHERE id=2")
    c.commit()
    c.close()
    with pytest.raises(StoreCorrupted) as e:
        VectorStore.open(folder, verify=True)
    assert e.value.damaged_ids == [1, 2]


# ---------------------------------------------------------------- old stores keep working
def test_format1_store_opens_searches_the_same_and_is_upgraded(tmp_path):
    folder = tmp_path / "old"
    shutil.copytree(FIXTURE, folder)
    expected = json.loads((folder / "expected_search.json").read_text())
    (folder / "expected_search.json").unlink()

    def same_results():
        with VectorStore.open(folder) as s:
            for text, hits in expected.items():
                assert [[h.id, h.text] for h in s.search(vec(text)[None], k=3)[0]] == hits

    def columns():
        c = sqlite3.connect(folder / "store.db")
        try:
            return {r[1] for r in c.execute("PRAGMA table_info(sentences)")}
        finally:
            c.close()

    same_results()                                   # read-only: opened as it is
    assert "checksum" not in columns() and read_manifest(folder).format_version == 1
    VectorStore.open(folder, writable=True).close()  # the next writer upgrades it
    assert "checksum" in columns()
    man = read_manifest(folder)
    assert man.format_version == 3 and man.store_id
    same_results()
    VectorStore.open(folder, verify=True).close()    # every row now has a checksum that holds
    c = sqlite3.connect(folder / "store.db")
    assert c.execute("SELECT COUNT(*) FROM sentences WHERE checksum IS NULL").fetchone()[0] == 0
    c.close()


# ---------------------------------------------------------------- item 6: disk full
def test_disk_full_while_saving_is_one_error_line_and_nothing_is_lost(tmp_path, monkeypatch, capsys):
    import faiss
    folder = make(tmp_path / "s", texts_of("alpha"), "hnsw")   # a kind with a snapshot file
    before = assert_verified(folder)
    real = faiss.write_index

    def full(index, path):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise RuntimeError("Error: 'ret == (n)' failed: write error in index.faiss: 7 != 64 "
                           f"({os.strerror(errno.ENOSPC)})")
    monkeypatch.setattr(faiss, "write_index", full)
    s = VectorStore.open(folder, writable=True)
    s.add(["after the disk filled"], vec("after the disk filled")[None])
    with pytest.raises(StoreWriteFailed, match=r"disk is full \(ENOSPC\).*intact") as e:
        s.save()
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(StoreWriteFailed):
        s.close()                        # close saves too: same error, lock released anyway
    assert not list(folder.glob(".*.tmp"))
    rc, _out, err = cli(["info", "--repair", "--store", folder], capsys)   # the retry
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("error:")
    assert "disk is full" in err
    monkeypatch.setattr(faiss, "write_index", real)
    recs = assert_verified(folder)       # the committed row is there, the rest untouched
    assert set(before.values()) | {"after the disk filled"} == set(recs.values())


def test_disk_full_on_a_real_small_filesystem(tmp_path):
    """A 400 KiB tmpfs (skipped where mounting is not allowed): SQLite or FAISS hits ENOSPC."""
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)],
                       capture_output=True, check=False)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        folder = mnt / "s"
        s = VectorStore.open(folder, writable=True, create=True, fingerprint=FP)
        committed = []
        with pytest.raises(StoreWriteFailed, match="disk is full") as e:
            for b in range(10_000):
                t = [f"batch {b} line {i}" for i in range(20)]
                s.add(t, np.stack([vec(x) for x in t]))
                committed += t
                if b % 5 == 4:
                    s.save()
        assert e.value.errno == errno.ENOSPC
        try:
            s.close()
        except StoreWriteFailed:
            pass
        recs = assert_verified(folder)                     # a reader needs no free space
        assert set(committed) <= set(recs.values())
        with pytest.raises(StoreWriteFailed, match="disk is full"):
            for b in range(10_000):                        # a second writer: same message
                with VectorStore.open(folder, writable=True) as w:
                    w.add([f"retry {b}"], vec(f"retry {b}")[None])
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, check=False)


# ---------------------------------------------------------------- item 7: odd manifests
def _edit_manifest(folder, **changes):
    m = json.loads((folder / "manifest.json").read_text())
    m.update(changes)
    m.pop(CHECKSUM_KEY)
    (folder / "manifest.json").write_text(json.dumps(m))


@pytest.mark.parametrize("damage", ["hnsw_no_checksum", "no_checksum", "folder", "fifo",
                                    "huge", "bad_types", "index_is_fifo", "lock_is_folder"])
def test_odd_manifests_give_one_error_never_a_traceback_or_hang(tmp_path, damage, capsys):
    folder = make(tmp_path / "s", texts_of("alpha"), "hnsw" if damage == "index_is_fifo" else "flat")
    mf = folder / "manifest.json"
    if damage == "hnsw_no_checksum":
        _edit_manifest(folder, index_kind="hnsw")
    elif damage == "no_checksum":
        _edit_manifest(folder)
    elif damage == "folder":
        mf.unlink()
        mf.mkdir()
    elif damage == "fifo":
        mf.unlink()
        os.mkfifo(mf)
    elif damage == "huge":
        mf.write_bytes(b" " * (2 << 20))
    elif damage == "bad_types":        # a valid checksum over wrong types
        from index.faiss.manifest import _self_checksum
        m = json.loads(mf.read_text())
        m.update(dim="16", count=-1)
        m[CHECKSUM_KEY] = _self_checksum(m)
        mf.write_text(json.dumps(m))
    elif damage == "index_is_fifo":
        idx = folder / read_manifest(folder).index_file
        idx.unlink()
        os.mkfifo(idx)
    elif damage == "lock_is_folder":
        (folder / "lock").unlink(missing_ok=True)
        (folder / "lock").mkdir()
        from index.store.errors import StoreError
        with pytest.raises(StoreError, match="lock.* is a folder"):    # a writer says so
            VectorStore.open(folder, writable=True)
    base = ["info", "--store", str(folder)]
    for argv in (base, base + ["--repair"]):
        if "fifo" in damage:   # in a subprocess with a timeout: a hang fails, never blocks
            r = subprocess.run([sys.executable, "-m", "app.cli", *argv], capture_output=True,
                               text=True, timeout=120, env=child_env(),
                               cwd=ROOT, check=False)
            rc, err = r.returncode, r.stderr
        else:
            rc, _, err = cli(argv, capsys)
        assert "Traceback" not in err, err
        if damage == "lock_is_folder" and "--repair" in argv:
            assert rc == 0 and "moved lock, which was not a regular file" in err, err
        if rc == 2:
            assert "--repair" not in argv and err.count("error:") == 1, err
            assert err.startswith("error:") and "info --repair" in err
        else:
            assert rc == 0, err
    assert_verified(folder)
    assert read_manifest(folder).format_version == 3


def test_the_app_words_the_repair_as_its_own_action(tmp_path, capsys):
    """The same error: the CLI says the command, the app says the menu action that repairs."""
    pytest.importorskip("PySide6")
    from app.gui.workers import readable_error
    a = make(tmp_path / "a", texts_of("alpha"))
    swap_parts(make(tmp_path / "b", texts_of("beta")), a)
    with pytest.raises(StoreCorrupted) as e:
        VectorStore.open(a)
    app_text = readable_error(e.value)
    assert "File > Open corpus folder" in app_text and "encoderscope" not in app_text
    rc, _out, err = cli(["info", "--store", a], capsys)
    assert rc == 2 and "run `encoderscope info --repair --store" in err and "File >" not in err
    from app.gui.corpus_jobs import open_store_job
    store, _ids, texts = open_store_job(a, progress=lambda *x: None)   # the app's open repairs
    store.close()
    assert sorted(texts) == sorted(texts_of("alpha"))
