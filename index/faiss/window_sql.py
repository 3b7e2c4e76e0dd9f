"""A window's rows in one SQLite statement each way: the INSERT of the rows whose vectors are in
the vector log, and the look-up of a window's text hashes.

`executemany` binds and steps one row at a time and takes Python's GIL back for each. One
``INSERT ... SELECT ... FROM json_each(?)`` binds the window once and steps once, with the GIL
released for all of it, so the log's write, the FAISS add and the next window's Python work run
beside it: 100,000 rows went in 2x faster (docs/benchmarks.md, "One statement a window"). The
look-up reads the hashes from one blob the same way.

    if available(conn):                                             # else row by row
        sql, params = rows_json(ids, texts, sources, lines, metas_json)   # None: row by row
        conn.execute(sql, {**params, "first": ids[0], "hashes": hash_block(hashes), "sums": sums,
                           "added": time.time(), "slot": first_slot, "empty": b""})
    conn.execute(FIND_HASHES, (hash_block(hashes), len(hashes)))   # -> (hash, id) rows
"""
from __future__ import annotations

import json
import sqlite3

HASH_BYTES = 16         # index/store/text_hash.py's BLAKE2b-128 (and a log row's checksum)
INT64 = (-(1 << 63), (1 << 63) - 1)
# SQLite binds no string past SQLITE_LIMIT_LENGTH (10**9 bytes by default). A window of long
# documents could make one: past this many characters (4 UTF-8 bytes at most each) its rows go
# in row by row, each well under the limit.
MAX_JSON_CHARS = 200_000_000

# :rows is the JSON; :hashes and :sums the rows' text hashes and checksums, 16 bytes a row in row
# order; :added the time added; :slot the first row's log slot (the slots run on); :empty the
# inline vector of a log row. json_each yields the rows in array order.
_INSERT = ("INSERT INTO sentences(id, hash, text, source, row, added, meta, inline_vector, checksum, slot) "
           "SELECT :first + r.key, substr(:hashes, r.key * 16 + 1, 16), {text}, {source}, {row}, :added, {meta}, "
           ":empty, substr(:sums, r.key * 16 + 1, 16), :slot + r.key FROM json_each(:rows) AS r")
# New ids one after another (every window but a migrate copy's), from :first on. A window of
# one source (or none) and no metadata (plain texts, a file's lines) sends its texts alone: half
# the encoding time of rows. :source is that source; :lines each row's number in ROW_WIDTH ASCII
# bytes (sign and zeros, as f"{k:020d}"), NO_ROW for none: a blob, which substr cuts in constant
# time (a text's substr counts characters from its start), and CAST reads as text.
ROW_WIDTH = 20                  # any int64 in decimal, its sign included
NO_ROW = b" " * ROW_WIDTH
INSERT_TEXTS = _INSERT.format(
    text="r.value", source=":source", meta="NULL",
    row=f"CAST(NULLIF(substr(:lines, r.key * {ROW_WIDTH} + 1, {ROW_WIDTH}), X'{NO_ROW.hex()}') AS INTEGER)")
# Else [text, source, row, meta] a row; json_extract, not ->> (SQLite 3.38): a Python linked to
# an older system SQLite runs it too.
INSERT_ROWS = _INSERT.format(**{column: f"json_extract(r.value, '$[{k}]')"
                                for k, column in enumerate(("text", "source", "row", "meta"))})

# ?1 the hashes, 16 bytes each; ?2 how many. The numbers 0 .. ?2 - 1 from a recursive CTE, each
# hash cut from the blob and found through the hash column's index.
FIND_HASHES = (
    "WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?2) "
    "SELECT s.hash, s.id FROM k JOIN sentences AS s ON s.hash = substr(?1, k.i * 16 + 1, 16)")


def available(conn) -> bool:
    """Whether this SQLite has json_each (JSON1: built in since 3.38, optional before): where it
    has not, a window's rows go in row by row."""
    try:
        conn.execute("SELECT key, value FROM json_each('[\"a\"]')").fetchall()
        return True
    except sqlite3.OperationalError:
        return False


def hash_block(hashes) -> bytes:
    """The hashes end to end (each must be HASH_BYTES long: a slice of the block is one hash)."""
    if not set(map(len, hashes)) <= {HASH_BYTES}:
        raise ValueError(f"text hashes are {HASH_BYTES} bytes each")
    return b"".join(hashes)


def rows_json(ids, texts, sources, lines, metas_json) -> tuple[str, dict] | None:
    """(statement, its :rows JSON and its other parameters) for these rows, or None where they go
    row by row: ids that do not run on one after another (a migrate copy keeps its source's), a
    window too long for one string (MAX_JSON_CHARS), and what SQLite would not give back exactly
    (its JSON cuts a text at an escaped NUL, and turns an integer past 64 bits into a REAL;
    executemany keeps the first and refuses the second, as it always did)."""
    n = len(ids)
    if not n or list(ids) != list(range(ids[0], ids[0] + n)) or any("\0" in t for t in texts):
        return None
    one = _one_source(sources, lines, metas_json)
    if one is None and (any(k is not None and not INT64[0] <= k <= INT64[1] for k in lines)
                        or any(s is not None and "\0" in s for s in (*sources, *metas_json))):
        return None
    # ensure_ascii=False: the text goes to SQLite as the UTF-8 it is. A lone surrogate then fails
    # to encode, as it does when executemany binds it (with escapes, SQLite would take it in).
    rows = texts if one is not None else list(zip(texts, sources, lines, metas_json))
    body = json.dumps(rows, ensure_ascii=False)
    if len(body) > MAX_JSON_CHARS:
        return None
    if one is not None:
        return INSERT_TEXTS, {"rows": body, "source": one[0], "lines": one[1]}
    return INSERT_ROWS, {"rows": body}


def _one_source(sources, lines, metas_json) -> tuple[str | None, bytes] | None:
    """(source, :lines) where INSERT_TEXTS writes these columns exactly: no metadata, one source
    or none (without a NUL), and rows that are none or integers within 64 bits."""
    n = len(sources)
    source = sources[0]
    if metas_json.count(None) != n or sources.count(source) != n or (source is not None and "\0" in source):
        return None
    if lines.count(None) == n:
        return source, NO_ROW * n
    if not set(map(type, lines)) <= {int, type(None)}:
        return None
    present = lines if None not in lines else [k for k in lines if k is not None]
    if not INT64[0] <= min(present) <= max(present) <= INT64[1]:
        return None
    blank = NO_ROW.decode("ascii")
    return source, "".join([blank if k is None else f"{k:020d}" for k in lines]).encode("ascii")
