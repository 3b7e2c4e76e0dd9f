"""The importance cache is data, not truth (issue 49, item 6): only regular files are read (a FIFO
or a link in the cache's place is not opened), any unreadable, foreign, wrong-shaped or
non-finite cache is computed afresh with one note line, and a cache that cannot be written is one
warning line while the result is still given."""
from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

from core.intervene import map_cache
from core.intervene.importance import ImportanceMap, load_cached, save_cached
from core.notices import listening
from tests.support.tiny_models import run_cli

TINY = "random:dim=16,layers=1,heads=2,ffn=32,seed=1"
KEY = "k" * 32
needs_fifo = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")


def a_map(L=2, H=3, value=0.01) -> ImportanceMap:
    heads, layers = np.full((L, H), value), np.full(L, value)
    return ImportanceMap("spearman", 0.5, heads, layers.copy(), layers.copy(), 0, "w" * 64, "c" * 64, "pairs",
                         10, "pairs", (0.4, 0.6), {"heads": 0.1, "attention": 0.2, "ffn": 0.3},
                         {"heads": (0.0, 0.2), "attention": (0.1, 0.3), "ffn": (0.2, 0.4)},
                         {"heads": heads - 0.01, "attention": layers - 0.01, "ffn": layers - 0.01},
                         {"heads": heads + 0.01, "attention": layers + 0.01, "ffn": layers + 0.01}, "zero", "fp32",
                         {"heads": (0.1, 0.5), "attention": (0.0, 0.4), "ffn": (-0.1, 0.3)})


def load(folder, shape=(2, 3)):
    notes = []
    with listening(notes.append):
        got = load_cached(folder, KEY, shape, "spearman")
    return got, notes


def test_a_written_map_reads_back_whole(tmp_path):
    assert save_cached(tmp_path, KEY, a_map())
    got, notes = load(tmp_path)
    assert notes == [] and got.to_dict() == a_map().to_dict()


@needs_fifo
def test_a_fifo_in_the_caches_place_is_never_opened(tmp_path):
    os.mkfifo(map_cache.map_path(tmp_path, KEY))
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("got", load(tmp_path)), daemon=True)
    t.start()
    t.join(5)
    assert not t.is_alive(), "reading the cache blocked on a FIFO"
    got, notes = result["got"]
    assert got is None and len(notes) == 1 and "not a regular file" in notes[0]


def test_a_link_is_not_followed(tmp_path):
    real = tmp_path / "elsewhere"
    real.mkdir()
    save_cached(real, KEY, a_map())
    try:
        map_cache.map_path(tmp_path, KEY).symlink_to(map_cache.map_path(real, KEY))
    except (OSError, NotImplementedError):
        pytest.skip("no symbolic links here")
    got, notes = load(tmp_path)
    assert got is None and "not a regular file" in notes[0]


@pytest.mark.parametrize("fault", ["truncated", "empty json", "not ours", "garbage"])
def test_an_unreadable_or_foreign_file_is_recomputed_with_one_note(tmp_path, fault):
    path = map_cache.map_path(tmp_path, KEY)
    save_cached(tmp_path, KEY, a_map())
    data = path.read_bytes()
    if fault == "truncated":
        path.write_bytes(data[:len(data) // 2])
    elif fault == "empty json":
        path.write_text("{}")
    elif fault == "not ours":          # a valid safetensors file of something else
        from safetensors.numpy import save_file
        save_file({"heads": np.zeros((2, 3))}, str(path))
    else:
        path.write_bytes(os.urandom(300))
    got, notes = load(tmp_path)
    assert got is None and len(notes) == 1 and path.name in notes[0] and "computing it afresh" in notes[0]


@pytest.mark.parametrize("fault", ["shape", "nan", "inf interval"])
def test_a_well_formed_but_wrong_map_is_recomputed(tmp_path, fault):
    m = a_map(L=3) if fault == "shape" else a_map()
    if fault == "nan":
        m.heads[0, 1] = np.nan
    if fault == "inf interval":
        m.interval = (0.4, float("inf"))
    save_cached(tmp_path, KEY, m)
    got, notes = load(tmp_path)
    assert got is None and len(notes) == 1
    assert ("shape" in notes[0]) if fault == "shape" else ("finite" in notes[0])


def test_a_cache_that_cannot_be_written_is_one_warning(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    notes = []
    with listening(notes.append):
        assert save_cached(blocked / "cache", KEY, a_map()) is False
    assert len(notes) == 1 and "could not be cached" in notes[0]

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("core.files.atomic.atomic_write", full)
    notes.clear()
    with listening(notes.append):
        assert save_cached(tmp_path / "ok", KEY, a_map()) is False
    assert len(notes) == 1 and "No space left on device" in notes[0]


def _importance(capsys, *extra):
    return run_cli(["importance", "--model", TINY, "--metric", "spearman", "--json", *extra], capsys)


def test_the_command_recomputes_around_a_fifo_and_prints_the_map(capsys, tmp_path, monkeypatch):
    """At the command: a FIFO (elsewhere `{}`) in the cache's place gives one note line and the
    map computed afresh, equal to the first. (Every other fault: the tests above, on the cache.)"""
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    code, out, err = _importance(capsys)
    assert code == 0, err
    first = json.loads(out)
    (path,) = (tmp_path / "cache" / "importance").glob("importance-*.safetensors")
    path.unlink()
    if hasattr(os, "mkfifo"):
        os.mkfifo(path)
    else:
        path.write_bytes(b"{}")
    code, out, err = _importance(capsys)
    assert code == 0, err
    assert json.loads(out)["heads"] == first["heads"]
    assert len([line for line in err.splitlines() if line.startswith("note:")]) == 1, err


def test_a_full_disk_is_one_warning_and_the_map_is_still_printed(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))

    def full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr("core.files.atomic.atomic_write", full)
    code, out, err = _importance(capsys)
    assert code == 0 and json.loads(out)["n"] == 94
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, says", [
    (["--prune", "0"], "--prune is the fall of the metric to stop at, a number above 0"),
    (["--prune", "inf"], "not inf"),
    (["--prune", "nan"], "not nan"),
    (["--prune", "-1"], "a number above 0"),
    (["--store", "nowhere", "--metric", "recall", "--sample", "1"], "--sample must be at least 25"),
    (["--store", "nowhere", "--metric", "mrr", "--sample", "0"], "--sample must be at least 25"),
    (["--sample", "100"], "--sample goes with --store"),
])
def test_bad_prune_and_sample_are_refused_before_any_work(capsys, argv, says, monkeypatch):
    loaded = []
    monkeypatch.setattr("core.encoder.backends.get_backend", lambda *a, **k: loaded.append(a))
    code, out, err = run_cli(["importance", *argv], capsys)
    assert code == 2 and says in err and err.startswith("error:") and len(err.strip().splitlines()) == 1
    assert loaded == [] and out == ""



def test_head_means_are_cached_like_maps(tmp_path):
    """Mean ablation's means: computed once, read back, and a broken file is recomputed with a note."""
    import torch

    from core.encoder.backends import get_backend
    backend = get_backend(TINY, "scratch", device="cpu")
    calls = []

    def compute():
        calls.append(1)
        return torch.arange(16, dtype=torch.float32).view(1, 2, 8)
    texts = ["a", "b"]
    first = map_cache.cached_means(backend, texts, tmp_path, compute)
    again = map_cache.cached_means(backend, texts, tmp_path, compute)
    assert len(calls) == 1 and torch.equal(first, again)
    (path,) = tmp_path.glob("head-means-*.safetensors")
    path.write_bytes(path.read_bytes()[:40])
    notes = []
    with listening(notes.append):
        assert torch.equal(map_cache.cached_means(backend, texts, tmp_path, compute), first)
    assert len(calls) == 2 and len(notes) == 1 and "head means" in notes[0]
    map_cache.cached_means(backend, ["another corpus"], tmp_path, compute)
    assert len(calls) == 3
