"""One of several processes taking and giving back the same removing lock (core.files.folder_lock's
ExclusiveFile, as an output folder's lock uses it) as fast as they can, each checking that
nobody else is inside while it holds it:

    PYTHONPATH=. python -m tests.support.lock_contender LOCK SHARED TIMES

Inside, it creates SHARED/inside exclusively (O_EXCL: a second holder inside fails to), writes
its pid there, adds one to SHARED/count by read, pause, write (a second holder inside loses an
addition), reads its pid back, and removes SHARED/inside before giving the lock back, which
deletes LOCK. Prints one JSON line: {"pid", "held": times held, "overlaps": times another was
found inside, "busy": refusals, "gone_while_held": times LOCK did not name the held file}.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from core.files.folder_lock import ExclusiveFile, LockBusy


def _inside(shared: Path) -> int:
    """The critical section; how many signs of another holder it saw (0 or more)."""
    overlaps = 0
    mine = str(os.getpid()).encode()
    try:
        fd = os.open(shared / "inside", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return 1
    try:
        os.write(fd, mine)
    finally:
        os.close(fd)
    count = shared / "count"
    before = int(count.read_text() or "0") if count.exists() else 0
    time.sleep(0.0002)
    count.write_text(str(before + 1))
    if (shared / "inside").read_bytes() != mine:
        overlaps += 1
    os.unlink(shared / "inside")
    return overlaps


def _names_held_file(lock: ExclusiveFile) -> bool:
    try:
        now = os.lstat(lock.path)
    except FileNotFoundError:
        return False
    held = os.fstat(lock._fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def main(path: str, shared: str, times: int) -> dict:
    lock = ExclusiveFile(path, remove=True)
    result = {"pid": os.getpid(), "held": 0, "overlaps": 0, "busy": 0, "gone_while_held": 0}
    while result["held"] < times:
        try:
            lock.acquire(f"{os.getpid()}".encode())
        except LockBusy:
            result["busy"] += 1
            continue
        try:
            result["overlaps"] += _inside(Path(shared))
            result["gone_while_held"] += not _names_held_file(lock)
            result["held"] += 1
        finally:
            lock.release()
    return result


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))), flush=True)
