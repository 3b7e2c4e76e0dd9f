"""A cache file: data, never truth. The one way every cache of the tree reads, writes and prunes.

    data = cache_file.read(path, max_bytes)      # bytes, None when absent; Unusable says why not
    cache_file.write(path, data, what="...")    # atomic, best effort: False (one log line) on failure
    cache_file.prune(folder, NAME, keep, is_ours)  # only this cache's own files, oldest first

Reading opens regular files only: a link is neither followed nor read, and a FIFO or device in a
cache file's place is refused before it is opened (and the open itself never blocks), so a cache
can never hang a command. Writing goes through core.files.atomic (an unpredictable temporary name
beside the file, renamed over it), and first removes the temporaries a killed writer of this same
file left. Pruning deletes only regular files whose name matches the cache's own pattern and whose
contents its owner recognises, never through a linked folder: a user's files that happen to sit in
a cache folder are not the cache's to delete.
"""
from __future__ import annotations

import logging
import os
import re
import stat
import time
from pathlib import Path

log = logging.getLogger(__name__)

STALE_TEMP_SECONDS = 60     # a live writer's temporary is seconds old; a killed one's is left for good


class Unusable(Exception):
    """Why a cache file is not used (said in one line by its owner)."""


def read(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file (not followed if a link); None if absent.
    Unusable for anything else. Opened without blocking, then checked again on the open file."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise Unusable(f"cannot be read ({e.strerror or e})") from None
    if not stat.S_ISREG(st.st_mode):
        raise Unusable("is not a regular file (a link, FIFO or device): not opened")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise Unusable(f"cannot be opened ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unusable("is not a regular file: not read")
        if st.st_size > max_bytes:
            raise Unusable(f"is {st.st_size:,} bytes, far more than this cache writes")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(max_bytes + 1)
    except OSError as e:
        raise Unusable(f"cannot be read ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _temp_pattern(names: str) -> re.Pattern:
    # core.files.atomic's temporaries (.<name>.<12 hex>.tmp), and <name>.<pid>.tmp that an earlier
    # version wrote with a predictable name, of the files whose names match ``names`` (a regex)
    return re.compile(rf"(\.(?:{names})\.[0-9a-f]{{12}}|(?:{names})\.\d+)\.tmp")


def remove_stale_temps(path: Path, older_than: float = STALE_TEMP_SECONDS, names: str | None = None) -> int:
    """Remove the temporaries a killed writer of ``path`` left, or of any file beside it whose name
    matches ``names`` (a regex: a cache's own file names): regular files only, older than
    ``older_than`` seconds so that a writer at work now keeps its own. -> how many."""
    path = Path(path)
    pattern, removed, now = _temp_pattern(names or re.escape(path.name)), 0, time.time()
    try:
        names = os.listdir(path.parent)
    except OSError:
        return 0
    for name in names:
        if not pattern.fullmatch(name):
            continue
        p = path.parent / name
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and now - st.st_mtime > older_than:
                p.unlink()
                removed += 1
        except OSError:
            pass
    return removed


def write(path: Path, data: bytes, what: str = "cache", durable: bool = False, warn=None,
          names: str | None = None) -> bool:
    """Write ``data`` to ``path`` atomically (never half a file, never through a predictable
    temporary name). A cache that cannot be written (read-only or full disk) is one line (a log
    line, or ``warn(line)`` for a cache the user should hear of) and False: the result it would
    have kept is computed again next time. names: the cache's own file names (a regex), whose
    killed writers' temporaries are removed too, not only this file's."""
    from core.files.atomic import atomic_write
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temps(path, names=names)
        atomic_write(path, data, durable=durable)
        return True
    except OSError as e:
        line = (f"the {what} could not be cached in {path.parent} ({e.strerror or e}); "
                "it is computed again next time")
        if warn is None:
            log.info("%s", line)
        else:
            warn(line)
        return False


def prune(folder: Path, name_pattern: str, keep: int, is_ours, max_bytes: int = 64 << 20) -> list[Path]:
    """Delete this cache's oldest files beyond the newest ``keep``: only regular files directly in
    ``folder`` whose name fully matches ``name_pattern`` (a regex) and whose bytes ``is_ours``
    accepts; nothing when ``folder`` is itself a link. -> the files deleted."""
    folder = Path(folder)
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return []
        names = os.listdir(folder)
    except OSError:
        return []
    pattern, candidates = re.compile(name_pattern), []
    for name in names:
        if not pattern.fullmatch(name):
            continue
        try:
            st = os.lstat(folder / name)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            candidates.append((st.st_mtime, folder / name))
    candidates.sort()
    removed = []
    for _, p in candidates[:max(0, len(candidates) - keep)]:
        try:
            data = read(p, max_bytes)
            if data is not None and is_ours(data):
                p.unlink()
                removed.append(p)
        except (Unusable, OSError):
            pass
    return removed
