"""Windows refuses to rename onto, rename, or delete a file that a handle of this process still
holds open (or maps), and to rename a folder holding such a file: `watch()` wraps os.replace,
os.rename, os.unlink and os.remove (pathlib's Path.replace/rename/unlink go through them) and
records each call whose path is open in this process, read from Linux's /proc/self/fd and
/proc/self/maps. tests/conftest.py applies it to the store, training and export tests (GUARDED
there); the test fails when anything was recorded.

One exception, where the platform allows it: a lock file that its holder deletes while still
holding it (core.files.folder_lock), which flock's lock kind declares (`removes_held_file`: that kind
never runs on Windows), allowed only when a handle of this process holds an exclusive flock on
the file (/proc/self/fdinfo) and nothing maps it. Windows' lock kind (forced by
$ENCODERSCOPE_FILE_LOCK=windows) declares no such thing, so there every such delete is recorded."""
from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

WRAPPED = ("replace", "rename", "unlink", "remove")


def open_paths() -> set[str]:
    """Files this process holds open or mapped (Linux; empty elsewhere)."""
    found = set()
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("/"):
            found.add(target)
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and parts[5].startswith("/"):
                    found.add(parts[5].rstrip("\n"))
    except OSError:
        pass
    return found


def _open_fds(full: str) -> list[str]:
    fds = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return fds
    for name in names:
        try:
            if os.readlink(f"/proc/self/fd/{name}") == full:
                fds.append(name)
        except OSError:
            continue
    return fds


def _mapped(full: str) -> bool:
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            return any(line.rstrip("\n").endswith(" " + full) for line in f)
    except OSError:
        return False


def held_lock_file(full: str) -> bool:
    """Whether deleting the open file `full` is the flock holder's own delete of its lock file:
    the lock kind allows it (it never runs on Windows), a handle of this process holds an
    exclusive flock on the file, and nothing maps it."""
    from core.files import platform_os
    if not platform_os.file_lock().removes_held_file or _mapped(full):
        return False
    for fd in _open_fds(full):
        try:
            with open(f"/proc/self/fdinfo/{fd}", encoding="ascii", errors="replace") as f:
                locks = [line.split() for line in f if line.startswith("lock:")]
        except OSError:
            continue
        if any("FLOCK" in words and "WRITE" in words for words in locks):
            return True
    return False


def _full(path, dir_fd=None) -> str | None:
    try:
        path = os.fsdecode(path)
    except TypeError:
        return None          # an fd
    if dir_fd is not None and not os.path.isabs(path):
        try:
            path = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        except OSError:
            return None
    try:
        return str(Path(path).resolve(strict=False))
    except OSError:
        return None


@contextmanager
def watch():
    """Yields the list of offending calls, as (operation, path) pairs."""
    found: list[tuple[str, str]] = []
    real = {name: getattr(os, name) for name in WRAPPED}

    def wrap(name):
        def checked(*args, **kw):
            paths = [(args[0], kw.get("src_dir_fd", kw.get("dir_fd")))]
            if name in ("replace", "rename") and len(args) > 1:
                paths.append((args[1], kw.get("dst_dir_fd")))
            held = open_paths()
            for path, dir_fd in paths:
                full = _full(path, dir_fd)
                if full is None:
                    continue
                if os.path.isfile(full) and full in held:
                    if name in ("unlink", "remove") and held_lock_file(full):
                        continue
                    found.append((name, full))
                elif os.path.isdir(full) and name in ("replace", "rename"):
                    inside = sorted(h for h in held if h.startswith(full + os.sep))
                    if inside:                     # Windows cannot move a folder with an open file
                        found.append((name, inside[0]))
            return real[name](*args, **kw)
        return checked

    for name in WRAPPED:
        setattr(os, name, wrap(name))
    try:
        yield found
    finally:
        for name, fn in real.items():
            setattr(os, name, fn)
