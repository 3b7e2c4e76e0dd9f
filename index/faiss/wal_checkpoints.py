"""SQLite's WAL checkpoints of the writer's sentence database, run on a helper thread.

In WAL mode each COMMIT appends the transaction's pages to store.db-wal; a checkpoint later
copies them into store.db. SQLite runs that checkpoint inside the COMMIT that takes the log past
1,000 pages, on the committing thread: for an ingest window of 8,192 rows it was about 40 % of
the COMMIT's time (the pages written a second time, and store.db synced). Here the writer's
connection leaves that to a second connection on a helper thread (a PASSIVE checkpoint, which
neither waits for nor blocks the writer), so the copy overlaps the next window's work; the
sqlite3 module releases the GIL while SQLite runs.

Crash safety is SQLite's own: a checkpoint only copies committed pages and the log is kept until
they are synced in store.db, so a process killed during one loses nothing committed (the next
open replays the log). A checkpoint that fails (a full disk) gives the job back to the writer's
COMMIT (SQLite's own autocheckpoint) and the log keeps everything meanwhile.

The log's size: SQLite writes a transaction's pages from the start of store.db-wal again only if,
when the transaction begins, every page in the log has been copied into store.db. So the writer
waits for the checkpoint in flight before it begins its next write (``before_write``): the
checkpoint overlaps the work between two commits (an ingest's next window is hashed and
planned), and the log stays about one window long. Without that wait the log never restarted
while an ingest ran: 365 MB for 300,000 rows of 384-d against 25 MB with it, and each new
page of it written into fresh memory.
"""
from __future__ import annotations

import logging
import sqlite3
import threading

log = logging.getLogger(__name__)

# Rows changed since the last checkpoint before the next one is started: about SQLite's own
# 1,000-page threshold (4 MB) at 384-d rows of ~1.7 kB.
CHECKPOINT_ROWS = 2048
SQLITE_AUTOCHECKPOINT = 1000     # SQLite's default (pages), restored when the helper fails


def helper_connection(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA synchronous=FULL")     # the checkpoint syncs store.db as the writer would
    return conn


class BackgroundCheckpoints:
    """Checkpoints of `conn`'s database on a helper thread with its own connection.

    ``after_commit()`` on the writer's thread after each COMMIT; ``before_write()`` before it
    begins a write transaction; ``wait()`` before the writer checkpoints or closes itself;
    ``close()`` waits and closes the helper's connection."""

    def __init__(self, conn: sqlite3.Connection, path, rows: int | None = None):
        self._writer = conn
        self._path = str(path)
        self._rows = int(CHECKPOINT_ROWS if rows is None else rows)
        self._mark = conn.total_changes
        self._conn: sqlite3.Connection | None = None
        self._thread: threading.Thread | None = None
        self._failed = False
        self.done = 0           # checkpoints completed on the helper thread
        conn.execute("PRAGMA wal_autocheckpoint=0")

    @property
    def active(self) -> bool:
        return not self._failed

    def after_commit(self) -> None:
        """Start a checkpoint once CHECKPOINT_ROWS rows changed since the last one started."""
        if self._failed:
            self.wait()
            return
        changed = self._writer.total_changes
        if changed - self._mark < self._rows:
            return
        self.wait()
        if self._failed:
            return
        self._mark = changed
        self._thread = threading.Thread(target=self._checkpoint, daemon=True,
                                        name="encoderscope-wal-checkpoint")
        self._thread.start()

    def before_write(self) -> None:
        """The checkpoint in flight finished first, so that the transaction about to begin
        writes the log from its start again (SQLite restarts a fully copied log)."""
        self.wait()

    def _checkpoint(self) -> None:
        try:
            if self._conn is None:
                self._conn = helper_connection(self._path)
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            self.done += 1
        except sqlite3.Error as e:          # the log keeps the pages: the writer takes over
            log.warning("background checkpoint of %s failed (%s): the writer checkpoints itself",
                        self._path, e)
            self._failed = True

    def wait(self) -> None:
        """Wait for the checkpoint in progress (if any); after a failure, give the job back to
        the writer's own COMMIT."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._failed and self._writer is not None:
            try:
                self._writer.execute(f"PRAGMA wal_autocheckpoint={SQLITE_AUTOCHECKPOINT}")
            except sqlite3.Error:
                pass
            self._writer = None

    def close(self) -> None:
        """Wait, close the helper's connection; the writer's checkpoints itself again."""
        self.wait()
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
        self._failed = True
        self.wait()
