"""What the FAISS store's row format costs on the host: the SQLite side of an ingest, today's
rows against two layouts with the vectors out of the row, same run, same settings.

    python bench/store_rows.py                      # 100,000 mixed sentences of 384-d, windows of 8,192
    python bench/store_rows.py --n 50000 --dim 768 --rounds 3

Every layout uses the store's own pieces (index/faiss/sentences.py's SCHEMA and connection
settings: WAL, synchronous=FULL, a 64 MiB page cache, autocheckpoint off and one TRUNCATE
checkpoint at the end inside the clock; index/faiss/row_checks.py's checksums;
index/store/text_hash.py), one transaction a window, and differs only in where the vectors go:

  rows     format 2 (before the vector log): each row holds its vector (1.5 kB at 384-d),
           checksum over both
  blocks   the row without its vector, checksum over the rest; the window's vectors as one
           BLOB in a side table, one BLAKE2b over it (SQLite still writes them twice: WAL, then
           the checkpoint into store.db)
  file     the row without its vector; the window's vectors appended to a file and fsync'd
           before the COMMIT (written once), the block's BLAKE2b in a side table (the study
           for format 3's vector log, index/faiss/vector_log.py, which the store now writes:
           its checksums differ, and `bench/ingest_host.py` measures the store itself)
  +writer  the same, each window's transaction on a writer thread while the caller builds the
           next window's rows (hashes, checksums): how much the SQLite work can overlap

Printed: rows/s, CPU microseconds a row (all threads), and each layout's rate / rows'. Not
timed: duplicate look-ups, planning, the FAISS add and the snapshot, which every layout shares.
The text hashes are inside the clock (every layout computes them).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from index.faiss.row_checks import checksum_head, row_checksums  # noqa: E402
from index.faiss.sentences import PAGE_CACHE_KIB, SCHEMA  # noqa: E402
from index.store.text_hash import text_hash  # noqa: E402

LAYOUTS = ("rows", "rows+writer", "blocks", "file", "file+writer")
BLOCKS = "CREATE TABLE blocks (first INTEGER PRIMARY KEY, n INTEGER NOT NULL, data BLOB NOT NULL, " \
         "checksum BLOB NOT NULL)"
LOG_BLOCKS = "CREATE TABLE log_blocks (first INTEGER PRIMARY KEY, n INTEGER NOT NULL, checksum BLOB NOT NULL)"
INSERT = "INSERT INTO sentences(id, hash, text, source, row, added, meta, vector, checksum) " \
         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"


def connect(folder: Path) -> sqlite3.Connection:
    """A writer's connection as index/faiss/sentences.py opens one (checkpoints: at the end)."""
    conn = sqlite3.connect(folder / "store.db", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA cache_size=-{PAGE_CACHE_KIB}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    # The vector column as a vectors-out layout would have it: NULL when the vector is elsewhere.
    nullable = SCHEMA.replace("inline_vector BLOB NOT NULL", "vector BLOB")
    if nullable == SCHEMA:
        raise SystemExit("error: the store's schema changed: update bench/store_rows.py's layouts")
    conn.executescript(nullable)
    conn.execute(BLOCKS)
    conn.execute(LOG_BLOCKS)
    return conn


def head_checksums(ids, texts) -> list:
    """A row's checksum without its vector (sources, lines, metadata: none in this bench)."""
    b2 = hashlib.blake2b
    return [b2(checksum_head(i, t, None, None, None), digest_size=16).digest()
            for i, t in zip(ids, texts)]


def prepare(layout: str, s: int, chunk: list, vecs: np.ndarray):
    """A window's rows, as the caller's thread builds them (hashes, checksums: GIL-bound)."""
    k, width = len(chunk), vecs.shape[1] * 4
    ids = list(range(s + 1, s + 1 + k))
    hashes = [text_hash(t) for t in chunk]
    none, added = [None] * k, [time.time()] * k
    if layout.startswith("rows"):
        view = memoryview(vecs).cast("B")
        blobs = [view[j:j + width] for j in range(0, k * width, width)]
        sums = row_checksums(ids, chunk, none, none, none, blobs)
    else:
        blobs, sums = none, head_checksums(ids, chunk)
    return ids, list(zip(ids, hashes, chunk, none, none, added, none, blobs, sums)), vecs


def write(layout: str, conn, log, window) -> None:
    """One transaction: the rows, and the vectors where the layout keeps them apart."""
    ids, rows, vecs = window
    conn.execute("BEGIN")
    conn.executemany(INSERT, rows)
    if layout == "blocks":
        data = vecs.tobytes()
        conn.execute("INSERT INTO blocks VALUES (?, ?, ?, ?)",
                     (ids[0], len(ids), data, hashlib.blake2b(data, digest_size=16).digest()))
    elif layout == "file":
        data = memoryview(vecs).cast("B")
        log.write(data)
        log.flush()
        os.fsync(log.fileno())
        conn.execute("INSERT INTO log_blocks VALUES (?, ?, ?)",
                     (ids[0], len(ids), hashlib.blake2b(data, digest_size=16).digest()))
    conn.execute("COMMIT")


def ingest(layout: str, texts: list, vectors: np.ndarray, window: int,
           folder: Path | None = None) -> tuple[float, float]:
    """(wall s, CPU s) of writing every row in `layout`, windows of `window` rows. A layout
    ending in "+writer" runs each window's transaction on a writer thread while the caller
    builds the next window's rows (the SQLite calls release the GIL). Into a new temporary
    folder, deleted afterwards, or into `folder` (kept: what the layout wrote)."""
    keep = folder is not None
    folder = Path(folder) if keep else Path(tempfile.mkdtemp(prefix="encoderscope-store-rows-"))
    base = layout.removesuffix("+writer")
    try:
        conn = connect(folder)
        log = open(folder / "vectors.f32", "ab") if base == "file" else None
        pool = ThreadPoolExecutor(1) if layout.endswith("+writer") else None
        wall, cpu = time.perf_counter(), time.process_time()
        pending = None
        for s in range(0, len(texts), window):
            rows = prepare(base, s, texts[s:s + window], vectors[s:s + window])
            if pool is None:
                write(base, conn, log, rows)
                continue
            if pending is not None:
                pending.result()
            pending = pool.submit(write, base, conn, log, rows)
        if pending is not None:
            pending.result()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if pool is not None:
            pool.shutdown()
        if log is not None:
            log.close()
        conn.close()
        return wall, cpu
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--window", type=int, default=8192, help="rows a transaction (add_stream's largest window)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, layouts taking turns; best of each")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from ingest_host import cpu_name, load_average, mixed_unique
    texts = mixed_unique(args.n)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    print(f"{cpu_name()}, {os.cpu_count()} cores, load {load_average()}; {args.n:,} mixed sentences, "
          f"{args.dim}-d, windows of {args.window:,}, best of {args.rounds}")
    best = {}
    for _ in range(args.rounds):
        for layout in LAYOUTS:
            wall, cpu = ingest(layout, texts, vectors, args.window)
            if layout not in best or wall < best[layout][0]:
                best[layout] = (wall, cpu)
    base = args.n / best["rows"][0]
    for layout in LAYOUTS:
        wall, cpu = best[layout]
        print(f"  {layout:11s} {args.n / wall:9,.0f} rows/s  {cpu / args.n * 1e6:5.1f} us CPU a row  "
              f"x rows {args.n / wall / base:4.2f}")
    print(f"load after {load_average()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
