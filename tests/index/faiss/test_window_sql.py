"""A log window's rows in one statement (index/faiss/window_sql.py): every column of every row is
what the row-by-row executemany writes for the same input, byte for byte; what SQLite's JSON
cannot carry exactly (a NUL, an integer past 64 bits), kept ids and an over-long window go row by
row; a lone surrogate fails as it did and keeps the store as it was; the one-blob hash look-up
finds what a plain query finds."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from index.faiss import window_sql
from index.faiss.store import VectorStore
from index.store.text_hash import text_hash, text_hashes
from tests.support.fake_vectors import text_vector

D = 16
FP = {"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D, "normalized": True}
NASTY = ["tab\there", 'q"uote \\back/slash', "\u2028 line\u2029seps", "émoji 😀 e\u0301", "\x01\x1f\x7f ctl",
         "\ufeffbom", "\U0010ffff top", "cr\r\nlf", "x" * 5000, "ünïcödé", "  spaced  ", "[1, 2]", "null",
         "{\"json\": true}", "\\u0000 as six characters"]
COLUMNS = "id, hash, text, source, row, meta, inline_vector, checksum, slot"


def texts_for(n=300):
    """n distinct texts, NASTY among them: a window large enough for the vector log."""
    return NASTY + [f"plain text {i}" for i in range(n - len(NASTY))]


def metadata_for(texts):
    """Every kind: none, empty, source only, row only, user keys, all of them."""
    kinds = [None, {}, {"source": "a.txt"}, {"row": 7}, {"lang": "fr", "n": [1, 2]},
             {"source": "b.csv", "row": 2 ** 62, "note": "émoji 😀", "added": 5.0}]
    return [kinds[i % len(kinds)] for i in range(len(texts))]


def rows_of(folder):
    c = sqlite3.connect(Path(folder) / "store.db")
    try:
        return c.execute(f"SELECT {COLUMNS} FROM sentences ORDER BY id").fetchall()
    finally:
        c.close()


def build(folder, texts, metadata=None, ids=None, statements=None):
    """The rows of a new store of `texts`; `statements` gets the one-statement INSERTs it ran."""
    if statements is not None:
        real = window_sql.rows_json

        def spy(*a):
            packed = real(*a)
            statements.append(packed and packed[0])
            return packed
        window_sql.rows_json = spy
    try:
        with VectorStore.open(folder, writable=True, create=True, fingerprint=FP) as s:
            s.add(texts, np.stack([text_vector(t, D) for t in texts]), metadata, ids=ids)
            s.verify()
    finally:
        if statements is not None:
            window_sql.rows_json = real
    return rows_of(folder)


def row_by_row(monkeypatch):
    """The store with one-statement windows switched off: its rows are the reference."""
    monkeypatch.setattr(window_sql, "rows_json", lambda *a: None)


@pytest.mark.parametrize("with_metadata", [False, True], ids=["plain", "metadata"])
def test_one_statement_writes_what_executemany_writes(tmp_path, monkeypatch, with_metadata):
    texts = texts_for()
    meta = metadata_for(texts) if with_metadata else None
    ran = []
    got = build(tmp_path / "one", texts, meta, statements=ran)
    assert ran == [window_sql.INSERT_ROWS if with_metadata else window_sql.INSERT_TEXTS]
    assert {r[8] is not None for r in got} == {True}        # every row's vector is in the log
    with monkeypatch.context() as m:
        row_by_row(m)
        want = build(tmp_path / "many", texts, meta)
    assert got == want
    assert [r[2] for r in got] == texts
    with VectorStore.open(tmp_path / "one") as s:
        records = list(s.iter())
    assert [r["text"] for r in records] == texts
    if with_metadata:
        assert records[5]["metadata"]["row"] == 2 ** 62 and records[4]["metadata"]["n"] == [1, 2]


def test_kept_ids_with_gaps_go_in_as_given_row_by_row(tmp_path, monkeypatch):
    texts = texts_for()
    ids = [10 + 3 * i for i in range(len(texts))]
    ran = []
    got = build(tmp_path / "one", texts, ids=ids, statements=ran)
    assert ran == [None] and [r[0] for r in got] == ids
    with monkeypatch.context() as m:
        row_by_row(m)
        assert build(tmp_path / "many", texts, ids=ids) == got


def test_what_sqlite_json_cannot_carry_goes_row_by_row(tmp_path):
    ids, n = list(range(1, 4)), 3
    none = [None] * n
    assert window_sql.rows_json(ids, ["a", "b\x00c", "d"], none, none, none) is None
    assert window_sql.rows_json(ids, ["a", "b", "c"], none, [1, 2 ** 63, None], none) is None
    assert window_sql.rows_json(ids, ["a", "b", "c"], ["s\x00", None, None], none, none) is None
    # a backslash and "u0000" in a text (or in metadata's JSON, which escapes a NUL so) is no NUL
    assert window_sql.rows_json(ids, ["\\u0000", "b", "c"], none, none, ['{"k": "\\u0000"}', None, None])
    sql, _ = window_sql.rows_json(ids, ["a", "b", "c"], none, none, none)
    assert sql == window_sql.INSERT_TEXTS
    assert window_sql.rows_json([1, 2, 4], ["a", "b", "c"], none, none, none) is None
    sql, params = window_sql.rows_json([5, 6, 7], ["a", "b", "c"], none, [1, None, 3], none)
    assert sql == window_sql.INSERT_TEXTS and params["lines"] == f"{1:020d}{' ' * 20}{3:020d}".encode()
    sql, _ = window_sql.rows_json([5, 6, 7], ["a", "b", "c"], ["x", None, None], [1, None, 3], none)
    assert sql == window_sql.INSERT_ROWS
    # and a window with a NUL in a text is stored exactly, row by row
    texts = texts_for()
    texts[7] = "before\x00after"
    got = build(tmp_path / "nul", texts)
    assert got[7][2] == "before\x00after" and got[7][8] is not None


def test_a_lone_surrogate_fails_as_it_did_and_keeps_the_store(tmp_path, monkeypatch):
    texts = texts_for()
    folder = tmp_path / "s"
    kept = build(folder, texts)
    bad = [f"second {i}" for i in range(300)]
    bad[3] = "lone \ud800 surrogate"
    vectors = np.stack([text_vector(f"v{i}", D) for i in range(len(bad))])
    errors = []
    for one_statement in (True, False):
        with monkeypatch.context() as m:
            if not one_statement:
                row_by_row(m)
            with VectorStore.open(folder, writable=True) as s:
                with pytest.raises(UnicodeEncodeError) as e:
                    s.add(bad, vectors)
                errors.append(type(e.value))
                assert s.count() == len(texts)
        assert rows_of(folder) == kept
    assert errors == [UnicodeEncodeError, UnicodeEncodeError]


def test_the_hash_look_up_finds_what_a_plain_query_finds(tmp_path):
    texts = texts_for()
    build(tmp_path / "s", texts)
    asked = text_hashes(texts[::2] + [f"absent {i}" for i in range(50)] + texts[:3])
    with VectorStore.open(tmp_path / "s") as s:
        got = s._db.existing_ids(asked)
        c = s._db.conn
        want = {h: i for h in set(asked) for (i,) in c.execute("SELECT id FROM sentences WHERE hash=?", (h,))}
        assert got == want and len(want) == len(set(texts[::2] + texts[:3]))
        assert s._db.existing_ids([]) == {}
        with pytest.raises(ValueError):
            s._db.existing_ids([b"short"])


def test_text_hashes_are_blake2b_of_the_utf8_each():
    """Stored hashes on disk depend on these bytes: checked against hashlib and one pinned digest."""
    import hashlib
    texts = NASTY + ["lone \ud800 surrogate", ""]
    want = [hashlib.blake2b(t.encode("utf-8", "surrogatepass"), digest_size=16).digest() for t in texts]
    assert text_hashes(texts) == want == [text_hash(t) for t in texts]
    assert text_hash("the cat sat").hex() == "e6e0a7cd0f71ba0a05316cbe1c0bd696"


def test_a_sqlite_without_json_each_goes_row_by_row(tmp_path, monkeypatch):
    class NoJson:
        def execute(self, sql):
            raise sqlite3.OperationalError("no such table: json_each")
    assert window_sql.available(NoJson()) is False
    assert window_sql.available(sqlite3.connect(":memory:")) is True
    texts = texts_for()
    meta = metadata_for(texts)
    want = build(tmp_path / "one", texts, meta)
    monkeypatch.setattr(window_sql, "available", lambda conn: False)
    ran = []
    assert build(tmp_path / "many", texts, meta, statements=ran) == want and ran == []


def test_a_window_too_long_for_one_string_goes_row_by_row(tmp_path, monkeypatch):
    texts = texts_for()
    want = build(tmp_path / "one", texts)
    monkeypatch.setattr(window_sql, "MAX_JSON_CHARS", sum(map(len, texts)))     # under the JSON's length
    ran = []
    assert build(tmp_path / "many", texts, statements=ran) == want and ran == [None]


def _general(monkeypatch):
    """Row by row, and the general per-row metadata split and checksum extras: the reference for
    the one-file shortcuts (new_rows._reader_columns, row_checks._one_file_extras)."""
    from index.faiss import new_rows, row_checks
    row_by_row(monkeypatch)
    monkeypatch.setattr(new_rows, "_reader_columns", lambda metas: None)
    monkeypatch.setattr(row_checks, "_one_file_extras", lambda *a: None)


FILES = {
    "one file, line by line": lambda i: {"source": "dir/corpus \"ü\".txt", "row": i + 1},
    "one file, from a large row": lambda i: {"source": "big.csv", "row": 2 ** 62 + i},
    "one file, negative rows": lambda i: {"source": "neg.txt", "row": i - 150},
    "one file, no rows": lambda i: {"source": "a.txt"},
    "one file, lines with gaps": lambda i: {"source": "gaps.txt", "row": 2 * i + 1},
    "two files": lambda i: {"source": "a.txt" if i < 150 else "b.txt", "row": i % 150 + 1},
    "rows only": lambda i: {"row": i + 1},
    "one file, added stamped": lambda i: {"source": "s.txt", "row": i + 1, "added": 1.5},
    "a row as text": lambda i: {"source": "s.txt", "row": str(i + 1)},
    "a row as bool": lambda i: {"source": "s.txt", "row": i % 2 == 0},
    "run to the last int64": lambda i: {"source": "end.txt", "row": 2 ** 63 - 300 + i},
    "from the first int64": lambda i: {"source": "start.txt", "row": -2 ** 63 + i},
    "some rows missing": lambda i: {"source": "s.txt", "row": i + 1} if i % 3 else {"source": "s.txt"},
    "an empty source": lambda i: {"source": "", "row": i + 1},
    "a source as a path": lambda i: {"source": Path("d") / "x.txt", "row": i + 1},
}
ONE_SOURCE = set(FILES) - {"two files"}     # what goes in as texts alone (INSERT_TEXTS)


@pytest.mark.parametrize("kind", list(FILES))
def test_a_files_rows_write_what_the_general_path_writes(tmp_path, monkeypatch, kind):
    texts = texts_for()
    meta = [FILES[kind](i) for i in range(len(texts))]
    ran = []
    got = build(tmp_path / "one", texts, meta, statements=ran)
    assert ran == [window_sql.INSERT_TEXTS if kind in ONE_SOURCE else window_sql.INSERT_ROWS]
    with monkeypatch.context() as m:
        _general(m)
        want = build(tmp_path / "many", texts, meta)
    assert got == want
    assert [r[4] for r in got] == [None if "row" not in x else int(x["row"]) for x in meta]


def test_the_one_file_checksum_extras_are_the_general_loops():
    from index.faiss import row_checks
    n = 40
    ids, hashes = list(range(1, n + 1)), text_hashes([f"t{i}" for i in range(n)])
    slots, digests = list(range(n)), np.arange(n * 16, dtype=np.uint8).reshape(n, 16)
    for source in ("corpus.txt", "q\"uo\\te ü 😀", ""):
        for lines in (list(range(1, n + 1)), [2 ** 63 - 1 - i for i in range(n)], [-5] * n):
            args = (ids, hashes, [source] * n, lines, [None] * n, slots, digests)
            assert row_checks._one_file_extras(*args[2:5]) is not None
            fast = row_checks.log_row_checksum_block(*args)
            real = row_checks._one_file_extras
            row_checks._one_file_extras = lambda *a: None
            try:
                assert row_checks.log_row_checksum_block(*args) == fast
            finally:
                row_checks._one_file_extras = real
    none = [None] * n
    assert row_checks._one_file_extras(none, list(range(n)), none) is None
    assert row_checks._one_file_extras(["a"] * n, [1] * (n - 1) + [None], none) is None
    assert row_checks._one_file_extras(["a"] * n, [True] * n, none) is None
    assert row_checks._one_file_extras(["a"] * (n - 1) + ["b"], list(range(n)), none) is None
    assert row_checks._one_file_extras(["a"] * n, list(range(n)), ["{}"] + none[1:]) is None
