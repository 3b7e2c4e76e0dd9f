"""core/files/cache_file.py: a cache file is read only when regular (no link followed, a FIFO never
opened), written atomically under an unpredictable name, and pruned of its own files only."""
from __future__ import annotations

import json
import os
import stat

import pytest

from core.files import cache_file


def test_read_gives_a_regular_files_bytes_and_refuses_links_fifos_and_giants(tmp_path):
    path = tmp_path / "c.json"
    assert cache_file.read(path, 100) is None                        # absent: nothing cached yet
    path.write_bytes(b"{}")
    assert cache_file.read(path, 100) == b"{}"
    with pytest.raises(cache_file.Unusable, match="far more"):
        cache_file.read(path, 1)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    with pytest.raises(cache_file.Unusable, match="not a regular file"):
        cache_file.read(link, 100)
    if hasattr(os, "mkfifo"):
        fifo = tmp_path / "fifo.json"
        os.mkfifo(fifo)
        with pytest.raises(cache_file.Unusable, match="not a regular file"):
            cache_file.read(fifo, 100)                              # refused, not blocked on


def test_write_is_atomic_and_a_failed_one_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    path = tmp_path / "sub" / "c.json"
    assert cache_file.write(path, b"one") and path.read_bytes() == b"one"
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        monkeypatch.setattr(os, "replace", lambda *a: (_ for _ in ()).throw(PermissionError(13, "denied")))
    else:
        path.parent.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        assert cache_file.write(path, b"two") is False
    finally:
        path.parent.chmod(stat.S_IRWXU)
    assert path.read_bytes() == b"one" and os.listdir(path.parent) == ["c.json"]


def test_prune_removes_only_its_own_names_and_formats_oldest_first_never_through_a_link(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir()
    ours = [folder / f"{i:04d}.json" for i in range(4)]
    for i, p in enumerate(ours):
        p.write_text(json.dumps({"format": "ours"}))
        os.utime(p, (i + 10, i + 10))
    theirs = folder / "0099.json"                 # our name pattern, not our format
    theirs.write_text(json.dumps({"format": "theirs"}))
    os.utime(theirs, (1, 1))
    other = folder / "notes.json"
    other.write_text(json.dumps({"format": "ours"}))
    os.utime(other, (1, 1))

    def is_ours(data):
        return json.loads(data).get("format") == "ours"
    link = tmp_path / "linked"
    link.symlink_to(folder, target_is_directory=True)
    assert cache_file.prune(link, r"\d{4}\.json", 1, is_ours) == []          # through a link: nothing
    removed = cache_file.prune(folder, r"\d{4}\.json", 2, is_ours)
    assert removed == ours[:2]
    assert all(p.exists() for p in ours[2:] + [theirs, other])
