"""A format 2 FAISS store (every vector inline in its row, before the vector log) keeps working.

tests/fixtures/store_v2 was written by the format 2 code (tests/fixtures/make_store_v2.py, commit
f809474): 40 rows of 16-d fake vectors, the first 30 with metadata, row 4 removed, row 6 given a
new text. A reader opens it as it is and changes nothing on disk; a writer upgrades it (slot
column, schema 3, a format 3 manifest; the vector log comes with the first large window) and its
old rows keep reading their own vectors from the row while new rows go to the log (here every
window counts as large: LOG_MIN_ROWS is 1); damage in either kind is named by id and
set aside; a reader that knows only formats 1 and 2 refuses the upgraded store; migrate copies
every row's own vector. Fake vectors: fast.
"""
from __future__ import annotations

import json
import shutil
import sqlite3

import numpy as np
import pytest

import index.faiss.manifest as manifest_mod
from index.faiss.manifest import UnsupportedFormat, read_manifest
from index.faiss.store import VectorStore
from index.faiss.vector_log import HEADER_BYTES
from tests.support.fake_vectors import text_vector
from tests.support.paths import ROOT
from tests.support.tiny_models import run_cli as cli

FIXTURE = ROOT / "tests" / "fixtures" / "store_v2"
D = 16
EXPECTED = json.loads((FIXTURE / "expected_search.json").read_text(encoding="utf-8"))
OLD_IDS = [1, 2, 3, *range(5, 41)]           # row 4 was removed by the format 2 code
NEW_TEXTS = [f"written after the upgrade {i}" for i in range(10)]


def vec(text):
    return text_vector(text, D)


@pytest.fixture(autouse=True)
def every_window_to_the_log(monkeypatch):
    """The fixture's few rows stand for large windows: every new vector goes to the log."""
    import index.faiss.sentences as sentences_mod
    monkeypatch.setattr(sentences_mod, "LOG_MIN_ROWS", 1)


def copy_fixture(tmp_path):
    folder = tmp_path / "v2"
    shutil.copytree(FIXTURE, folder)
    (folder / "expected_search.json").unlink()
    return folder


def files_of(folder):
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def sql(folder, query, args=()):
    c = sqlite3.connect(folder / "store.db")
    try:
        return c.execute(query, args).fetchall()
    finally:
        c.close()


def meta(folder, key):
    rows = sql(folder, "SELECT value FROM meta WHERE key=?", (key,))
    return json.loads(rows[0][0]) if rows else None


def searches_as_recorded(folder, added: int = 0):
    """The format 2 code's top 3 for each recorded query (among the old rows, when `added`
    rows came after them)."""
    with VectorStore.open(folder) as s:
        for text, hits in EXPECTED.items():
            found = [[h.id, h.text] for h in s.search(vec(text)[None], k=3 + added)[0]]
            assert [h for h in found if h[0] in OLD_IDS][:3] == hits, text


def own_vectors(store):
    """Every row's vector as the store reads it, and its text's fake vector, in id order."""
    ids, vecs = store.vectors()
    texts = {r["id"]: r["text"] for r in store.iter()}
    assert list(ids) == sorted(texts)
    return ids, vecs, np.stack([vec(texts[int(i)]) for i in ids])


def assert_own_vectors_and_found(store):
    ids, vecs, want = own_vectors(store)
    np.testing.assert_array_equal(vecs, want)            # bit for bit: the stored float32
    for i, v in zip(ids, vecs):
        hit = store.search(v[None], k=1)[0][0]
        assert hit.id == int(i) and hit.score == pytest.approx(1, abs=1e-5)
    return ids


def upgraded_with_new_rows(tmp_path):
    """The fixture opened by a writer (upgraded) and given NEW_TEXTS (ids 41..50, in the log)."""
    folder = copy_fixture(tmp_path)
    with VectorStore.open(folder, writable=True) as s:
        r = s.add(NEW_TEXTS, np.stack([vec(t) for t in NEW_TEXTS]),
                  metadata=[{"source": "new.txt", "row": i} if i % 2 else None
                            for i in range(len(NEW_TEXTS))])
    assert r.ids == list(range(41, 51))
    return folder


# ---------------------------------------------------------------- a reader: as it is
def test_format2_store_opens_read_only_searches_as_recorded_and_nothing_changes(tmp_path):
    folder = copy_fixture(tmp_path)
    before = files_of(folder)
    searches_as_recorded(folder)
    with VectorStore.open(folder, verify=True) as s:         # every row's own checksum holds
        assert s.check_report["rows"] == len(OLD_IDS) and s.check_report["damaged"] == []
        ids = assert_own_vectors_and_found(s)
        assert list(ids) == OLD_IDS
    assert files_of(folder) == before                        # not a byte, not a new file
    assert read_manifest(folder).format_version == 2
    assert "slot" not in {r[1] for r in sql(folder, "PRAGMA table_info(sentences)")}


@pytest.mark.parametrize("state", ["as_written", "upgraded_with_new_rows"])
def test_on_read_only_media_both_kinds_read(tmp_path, monkeypatch, state):
    """A shared corpus on a read-only mount: SQLite opens it immutable, the log read-only."""
    from index.faiss import sentences
    folder = copy_fixture(tmp_path) if state == "as_written" else upgraded_with_new_rows(tmp_path)
    before = files_of(folder)
    monkeypatch.setattr(sentences, "on_read_only_media", lambda path: True)
    monkeypatch.setattr(sentences, "mounted_read_only", lambda folder: True)
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        n = len(assert_own_vectors_and_found(s))
    assert n == len(OLD_IDS) + (0 if state == "as_written" else 10)
    assert files_of(folder) == before


# ---------------------------------------------------------------- a writer: upgraded
def test_a_writer_upgrades_it_and_old_rows_keep_their_inline_vectors(tmp_path):
    folder = copy_fixture(tmp_path)
    store_id = meta(folder, "store_id")
    VectorStore.open(folder, writable=True).close()
    assert "slot" in {r[1] for r in sql(folder, "PRAGMA table_info(sentences)")}
    assert meta(folder, "schema_version") == 3 and meta(folder, "store_id") == store_id
    assert meta(folder, "vector_log") is None and not list(folder.glob("vectors-*"))   # not yet
    man = read_manifest(folder)
    assert man.format_version == 3 and man.store_id == store_id and man.count == len(OLD_IDS)
    rows = sql(folder, "SELECT id, slot, length(inline_vector) FROM sentences ORDER BY id")
    assert rows == [(i, None, 4 * D) for i in OLD_IDS]     # old rows stay where they were
    searches_as_recorded(folder)
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["rows"] == len(OLD_IDS) and s.check_report["damaged"] == []
        assert list(assert_own_vectors_and_found(s)) == OLD_IDS


def test_an_upgrade_cut_off_before_its_commit_is_done_again(tmp_path):
    """A kill after a first window made the log file, before the COMMIT naming it: the
    database names no log (a reader ignores the file), and the next writer makes it afresh."""
    folder = copy_fixture(tmp_path)
    (folder / "vectors-0000000001.f32").write_bytes(b"half-written" * 10)
    searches_as_recorded(folder)
    with VectorStore.open(folder, writable=True) as s:
        s.add(NEW_TEXTS[:2], np.stack([vec(t) for t in NEW_TEXTS[:2]]))
    assert meta(folder, "vector_log")["file"] == "vectors-0000000001.f32"
    assert (folder / "vectors-0000000001.f32").stat().st_size == HEADER_BYTES + 2 * 4 * D
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        assert list(assert_own_vectors_and_found(s)) == OLD_IDS + [41, 42]


def _commit_as_format2_code(folder, id_, text):
    """A row as the format 2 code commits it (vector inline, checksum over its bytes), with the
    generation moved on and no snapshot saved after it: that code cut off before its save."""
    from index.faiss.row_checks import row_checksum
    from index.store.text_hash import text_hash
    c = sqlite3.connect(folder / "store.db")
    try:
        one = c.execute("SELECT text, source, row, meta, vector, checksum FROM sentences "
                        "WHERE id=1").fetchone()
        assert row_checksum(1, *one[:5]) == one[5]       # the formula is the one it used
        c.execute("INSERT INTO sentences(id, hash, text, source, row, added, meta, vector, checksum) "
                  "VALUES (?, ?, ?, NULL, NULL, 0, NULL, ?, ?)",
                  (id_, text_hash(text), text, vec(text).tobytes(),
                   row_checksum(id_, text, None, None, None, vec(text).tobytes())))
        c.execute("UPDATE meta SET value=value+1 WHERE key='generation'")
        c.commit()
    finally:
        c.close()


def test_rows_the_format2_code_committed_after_its_last_save_are_caught_up(tmp_path):
    folder = copy_fixture(tmp_path)
    _commit_as_format2_code(folder, 41, "committed, never saved")
    with VectorStore.open(folder, verify=True) as s:          # a reader catches up
        assert s.check_report["damaged"] == []
        assert list(assert_own_vectors_and_found(s)) == OLD_IDS + [41]
    VectorStore.open(folder, writable=True).close()           # a writer upgrades and saves
    man = read_manifest(folder)
    assert (man.format_version, man.count, man.max_id) == (3, len(OLD_IDS) + 1, 41)
    assert sql(folder, "SELECT slot, length(inline_vector) FROM sentences WHERE id=41") == [(None, 4 * D)]
    with VectorStore.open(folder, verify=True) as s:
        assert list(assert_own_vectors_and_found(s)) == OLD_IDS + [41]


def test_after_the_upgrade_new_rows_go_to_the_log_and_both_kinds_read_and_verify(tmp_path):
    folder = upgraded_with_new_rows(tmp_path)
    rows = dict((i, (slot, vector)) for i, slot, vector in
                sql(folder, "SELECT id, slot, inline_vector FROM sentences"))
    assert [rows[i][0] for i in range(41, 51)] == list(range(10))        # in the log, in order
    assert all(rows[i][1] == b"" for i in range(41, 51))
    assert all(rows[i][0] is None and len(rows[i][1]) == 4 * D for i in OLD_IDS)
    assert meta(folder, "vector_slots") == 10
    log = folder / meta(folder, "vector_log")["file"]
    raw = log.read_bytes()
    assert len(raw) == HEADER_BYTES + 10 * 4 * D
    np.testing.assert_array_equal(np.frombuffer(raw[HEADER_BYTES:], np.float32).reshape(10, D),
                                  np.stack([vec(t) for t in NEW_TEXTS]))
    searches_as_recorded(folder, added=10)        # the old rows' answers are still the same
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        ids = assert_own_vectors_and_found(s)
        assert list(ids) == OLD_IDS + list(range(41, 51))
        # iter_batches (what migrate reads): every row's own vector, in id order, across both kinds
        got_ids, got_vecs = [], []
        for b_ids, b_vecs, recs in s.iter_batches(batch=7):
            assert [r["id"] for r in recs] == b_ids.tolist()
            np.testing.assert_array_equal(b_vecs, np.stack([vec(r["text"]) for r in recs]))
            got_ids += b_ids.tolist()
            got_vecs.append(b_vecs)
        assert got_ids == list(ids)
        got = s.get([1, 31, 41, 42])
        assert [(got[i]["metadata"]["source"], got[i]["metadata"]["row"]) for i in (1, 31, 41, 42)] \
            == [("fixture.txt", 1), (None, None), (None, None), ("new.txt", 1)]
        assert got[1]["metadata"]["lang"] == "en"


def test_remove_and_update_text_on_old_inline_rows(tmp_path):
    folder = upgraded_with_new_rows(tmp_path)
    edited = "an old row, edited after the upgrade"
    with VectorStore.open(folder, writable=True) as s:
        assert s.remove([2, 45]) == [2, 45]          # one inline row, one in the log
        s.update_text(7, edited, vec(edited))        # an inline row: its new vector goes to the log
    assert sql(folder, "SELECT slot, inline_vector FROM sentences WHERE id=7") == [(10, b"")]
    assert sql(folder, "SELECT COUNT(*) FROM sentences WHERE id IN (2, 45)") == [(0,)]
    assert meta(folder, "vector_slots") == 11
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        ids = assert_own_vectors_and_found(s)
        assert 2 not in ids and 45 not in ids and s.get([7])[7]["text"] == edited
        hit = s.search(vec(edited)[None], k=1)[0][0]
        assert (hit.id, hit.text) == (7, edited)
        old = s.search(vec("format two sentence number 6")[None], k=3)[0]
        assert 7 not in [h.id for h in old]          # its old vector is gone from the index


def test_reindex_and_a_rebuild_with_another_model_over_both_kinds(tmp_path):
    """reindex reads both kinds; a rebuild with another model (another dimension) moves every
    row, old inline rows too, into a new log, and the old log goes."""
    from tests.support.store_backends import FakeBackend
    folder = upgraded_with_new_rows(tmp_path)
    with VectorStore.open(folder, writable=True) as s:
        s.reindex("hnsw")
    with VectorStore.open(folder, verify=True) as s:
        assert s.index_kind == "hnsw" and s.check_report["damaged"] == []
        assert len(assert_own_vectors_and_found(s)) == len(OLD_IDS) + 10
    other = FakeBackend(name="other", dim=24)
    with VectorStore.open(folder, writable=True) as s:
        s.rebuild(other)
    assert meta(folder, "vector_log") == {"file": "vectors-0000000002.f32", "dim": 24}
    assert sorted(p.name for p in folder.glob("vectors-*.f32")) == ["vectors-0000000002.f32"]
    assert sql(folder, "SELECT COUNT(*) FROM sentences WHERE slot IS NULL OR inline_vector != x''") == [(0,)]
    with VectorStore.open(folder, verify=True) as s:
        assert s.check_report["damaged"] == []
        ids, vecs = s.vectors()
        texts = {r["id"]: r["text"] for r in s.iter()}
        assert list(ids) == OLD_IDS + list(range(41, 51))
        np.testing.assert_array_equal(vecs, other.embed([texts[int(i)] for i in ids]))


# ---------------------------------------------------------------- damage in either kind
def _flip(path, needle: bytes, offset: int, mask: int):
    raw = bytearray(path.read_bytes())
    at = raw.find(needle)
    assert at >= 0 and raw.find(needle, at + 1) < 0, "the vector is not in the file exactly once"
    raw[at + offset] ^= mask
    path.write_bytes(bytes(raw))


def test_bit_flips_in_an_inline_vector_and_a_log_vector_are_found_by_id_and_set_aside(tmp_path, capsys):
    folder = upgraded_with_new_rows(tmp_path)
    assert not (folder / "store.db-wal").exists() or not (folder / "store.db-wal").stat().st_size
    inline_id, logged_id = 12, 44
    _flip(folder / "store.db", vec("format two sentence number 11").tobytes(), 3, 0x40)
    _flip(folder / meta(folder, "vector_log")["file"], vec(NEW_TEXTS[3]).tobytes(), 3, 0x40)
    assert sql(folder, "PRAGMA quick_check") == [("ok",)]          # SQLite sees nothing
    rc, _out, err = cli(["info", "--check", "--store", folder], capsys)
    assert rc == 2 and err.count("error:") == 1, err
    assert f"id {inline_id}, {logged_id}" in err and "info --repair" in err, err
    rc, _out, err = cli(["info", "--repair", "--store", folder], capsys)
    assert rc == 0 and f"set aside 2 damaged rows (id {inline_id}, {logged_id})" in err, err
    assert sorted(r[0] for r in sql(folder, "SELECT id FROM damaged")) == [inline_id, logged_id]
    for id_, text in ((inline_id, "format two sentence number 11"), (logged_id, NEW_TEXTS[3])):
        flipped = bytearray(vec(text).tobytes())     # kept as read, from the row or the log
        flipped[3] ^= 0x40
        assert sql(folder, "SELECT vector FROM damaged WHERE id=?", (id_,)) == [(bytes(flipped),)]
    assert cli(["info", "--check", "--store", folder], capsys)[0] == 0
    with VectorStore.open(folder, verify=True) as s:
        ids = assert_own_vectors_and_found(s)
    assert inline_id not in ids and logged_id not in ids and len(ids) == len(OLD_IDS) + 10 - 2


# ---------------------------------------------------------------- older code meets the new format
def test_a_reader_of_formats_1_and_2_refuses_the_upgraded_store(tmp_path, monkeypatch, capsys):
    """Stands in for the format 2 code opening a format 3 store: refused, never repaired."""
    folder = upgraded_with_new_rows(tmp_path)
    assert read_manifest(folder).format_version == 3
    monkeypatch.setattr(manifest_mod, "READABLE_VERSIONS", (1, 2))
    with pytest.raises(UnsupportedFormat) as e:
        VectorStore.open(folder)
    assert "format version 3" in str(e.value) and "reads versions 1, 2" in str(e.value)
    assert e.value.remedy is None
    before = files_of(folder)
    rc, _out, err = cli(["info", "--repair", "--store", folder], capsys)   # never "repaired"
    assert rc != 0 and "format version 3" in err and "Traceback" not in err, err
    assert files_of(folder) == before


def test_the_format2_codes_own_queries_fail_on_an_upgraded_database(tmp_path):
    """Where no format 3 manifest stops the format 2 code (a kill between the upgrade's commit
    and its save, a manifest moved aside), its queries of a row's vector fail on the renamed
    column ("no such column": it says restore and writes nothing) instead of reading a log row's
    empty vector as damage and setting the row aside. These are f809474's SQL strings."""
    folder = upgraded_with_new_rows(tmp_path)
    old_sql = ["SELECT id, vector FROM sentences WHERE id > 0 ORDER BY id LIMIT 10",
               "SELECT id, text, source, row, added, meta, vector, checksum, hash FROM sentences "
               "WHERE id > 0 ORDER BY id LIMIT 10",
               "INSERT INTO sentences(id, hash, text, source, row, added, meta, vector, checksum) "
               "VALUES (99, x'00', 't', NULL, NULL, 0, NULL, x'00', NULL)"]
    c = sqlite3.connect(folder / "store.db")
    try:
        for q in old_sql:
            with pytest.raises(sqlite3.OperationalError, match="no such column: vector|has no column named vector"):
                c.execute(q)
    finally:
        c.close()


# ---------------------------------------------------------------- migrate
@pytest.mark.parametrize("source", ["as_written", "upgraded_with_new_rows"])
def test_migrate_from_a_format2_store_copies_every_rows_own_vector(tmp_path, source):
    from index.corpus.migrate import migrate
    src = copy_fixture(tmp_path) if source == "as_written" else upgraded_with_new_rows(tmp_path)
    before = files_of(src)
    r = migrate(src, tmp_path / "dst", batch=7)
    assert r.verified and r.wrong_ids == [] and r.ids_kept
    assert files_of(src) == before                           # the source is only read
    want = OLD_IDS + ([] if source == "as_written" else list(range(41, 51)))
    with VectorStore.open(tmp_path / "dst", verify=True) as d:
        assert list(assert_own_vectors_and_found(d)) == want
    # the copy is a format 3 store: every vector in its log
    assert sql(tmp_path / "dst", "SELECT COUNT(*) FROM sentences WHERE slot IS NULL "
                                 "OR inline_vector != x''") == [(0,)]
    assert read_manifest(tmp_path / "dst").format_version == 3


# ---------------------------------------------------------------- a reader open across the upgrade
@pytest.mark.parametrize("fixture,old_text", [("store_v2", "format two sentence number 1"),
                                              ("store_v1", "fixture sentence number 1")])
def test_a_reader_open_while_a_writer_upgrades_reads_the_new_rows(tmp_path, fixture, old_text):
    """A reader that opened a format 1 or 2 store before a writer upgraded it (a GUI left open
    during an ingest) reads the rows the writer then put in the log, and an old row the writer
    moved there: no false damage report."""
    folder = tmp_path / fixture
    shutil.copytree(FIXTURE.parent / fixture, folder)
    (folder / "expected_search.json").unlink()
    old_ids = [r[0] for r in sql(folder, "SELECT id FROM sentences ORDER BY id")]
    edited = "an old row, edited while a reader was open"
    with VectorStore.open(folder) as r:
        assert r.search(vec(old_text)[None], k=1)[0][0].id == 2
        with VectorStore.open(folder, writable=True) as w:    # upgrades, then writes to the log
            new = w.add(NEW_TEXTS, np.stack([vec(t) for t in NEW_TEXTS])).ids
            w.update_text(2, edited, vec(edited))
        # Its index still holds row 2's old vector: the hit disagrees with the database, the
        # reader loads the writer's state and searches again (as on a format 3 store).
        old = r.search(vec(old_text)[None], k=3)[0]
        assert all(h.text != old_text for h in old)
        hit = r.search(vec(edited)[None], k=1)[0][0]
        assert (hit.id, hit.text, hit.score) == (2, edited, pytest.approx(1, abs=1e-5))
        ids, vecs, want = own_vectors(r)
        np.testing.assert_allclose(vecs, want, atol=1e-6)   # store_v1's were made another way
        assert list(ids) == old_ids + new
        assert r.verify()["damaged"] == []
