"""Reliability suite of the FAISS store (issue 16): damaged store copies, kill -9, disk full,
manifests from random bytes.

Fuzz: copies of a small store get one or two kinds of damage (truncate, flip bytes, zero a
range, delete, empty, append junk, a folder or a FIFO in place of a file, another store's
part swapped in) on store.db, its WAL, the manifest, the index file or the lock file. Each copy
goes through tests/support/reliability_driver.py in its own process with a timeout: `info`, searches,
`info --repair`, then a full check. Required: 0 tracebacks, 0 hangs, 0 wrong advice (an
error that says to run `info --repair` must be fixed by it), 0 wrong results (every
hit's text, embedded again, gives the hit's score; after a successful repair every row's vector
is its text's). The counts of the latest run go to docs/reliability.md.
"""
from __future__ import annotations

import collections
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from index.faiss.manifest import Manifest
from index.faiss.store import VectorStore
from index.store.errors import StoreCorrupted
from tests.support.fake_vectors import text_vector
from tests.support.paths import ROOT, child_env

D = 16
FP = {"model": "fake", "weights_sha256": "f" * 64, "pooling": "mean", "dim": D, "normalized": True}
N_ROWS = 150          # more than the 64 rows an open compares: damage can hide from the sample
TARGETS = ("db", "wal", "manifest", "index", "lock", "log")
OPS = ("truncate", "flip", "zero", "delete", "empty", "junk", "folder", "fifo", "swap")


def texts(prefix, n=N_ROWS):
    return [f"{prefix} sentence {i:04d}" for i in range(n)]


def _add(store, ts):
    store.add(ts, np.stack([text_vector(t, D) for t in ts]))


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    """closed: a saved, closed store (HNSW marks too: one removal); wal: a copy taken while the
    writer was still open, its last batch only in the WAL and past the snapshot; other: another
    store of the same model, for swaps."""
    root = tmp_path_factory.mktemp("bases")
    out = {}
    for name, prefix in (("closed", "alpha"), ("other", "beta")):
        s = VectorStore.open(root / name, writable=True, create=True, fingerprint=FP)
        _add(s, texts(prefix))
        s.remove([3])
        s.close()
        out[name] = root / name
    s = VectorStore.open(root / "live", writable=True, create=True, fingerprint=FP)
    _add(s, texts("gamma", 100))
    s.save()
    _add(s, texts("delta", 50))              # committed, not in the snapshot
    shutil.copytree(root / "live", root / "wal", ignore=shutil.ignore_patterns("lock"))
    s.close()
    out["wal"] = root / "wal"
    assert (out["wal"] / "store.db-wal").stat().st_size > 0
    return out


def _part(folder: Path, target: str) -> Path:
    if target in ("index", "log"):
        pattern, first = ("index-*.faiss", "index-0000000001.faiss") if target == "index" else \
            ("vectors-*.f32", "vectors-0000000001.f32")
        found = sorted(folder.glob(pattern))
        return found[0] if found else folder / first
    return folder / {"db": "store.db", "wal": "store.db-wal", "manifest": "manifest.json",
                     "lock": "lock"}[target]


def damage(folder: Path, other: Path, target: str, op: str, rng: random.Random) -> str:
    path = _part(folder, target)
    if path.is_dir() and op in ("truncate", "flip", "zero", "junk"):
        shutil.rmtree(path)     # a folder put there by the pair's first damage: bytes now
    raw = path.read_bytes() if path.is_file() else b""
    if op == "truncate":
        path.write_bytes(raw[:rng.randrange(len(raw))] if raw else b"")
    elif op == "flip":
        b = bytearray(raw or b"\0")
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(b))
    elif op == "zero":
        b = bytearray(raw or b"\0")
        at = rng.randrange(len(b))
        n = rng.randint(1, 4096)
        b[at:at + n] = bytes(len(b[at:at + n]))
        path.write_bytes(bytes(b))
    elif op in ("delete", "empty", "folder", "fifo"):
        if path.is_dir():
            shutil.rmtree(path)
        elif os.path.lexists(path):
            path.unlink()
        if op == "empty":
            path.write_bytes(b"")
        elif op == "folder":
            path.mkdir()
        elif op == "fifo":
            os.mkfifo(path)
    elif op == "junk":
        path.write_bytes(raw + bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))))
    elif op == "swap":
        src = _part(other, target)
        if path.exists():
            path.unlink()
        if target == "index":        # the index comes with its manifest, as a copy would
            shutil.copy(other / "manifest.json", folder / "manifest.json")
            path = folder / src.name
        if src.exists():
            shutil.copy(src, path)
    return f"{target}:{op}"


def cases(n: int, seed: int = 0):
    """n (base, [(target, op)]) cases: every target x op on both bases first, then random
    pairs of damage."""
    rng = random.Random(seed)
    grid = [(base, [(t, op)]) for base in ("closed", "wal") for t in TARGETS for op in OPS]
    rng.shuffle(grid)
    out = grid[:n]
    while len(out) < n:
        out.append((rng.choice(("closed", "wal")),
                    [(rng.choice(TARGETS), rng.choice(OPS)) for _ in range(2)]))
    return out


def drive(folders, queries, timeout):
    """Run the driver over `folders`, restarting it after a hang: {folder: report or "hang"}."""
    reports, todo = {}, list(map(str, folders))
    while todo:
        proc = subprocess.Popen([sys.executable, "-m", "tests.support.reliability_driver", str(D), queries,
                                 *todo],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
                                env=child_env(OMP_NUM_THREADS="1"))
        try:
            out, err = proc.communicate(timeout=timeout + 30 * len(todo))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        for line in out.splitlines():
            r = json.loads(line)
            reports[r["folder"]] = r
        done = [f for f in todo if f in reports]
        todo = todo[len(done):]
        if todo:       # the first folder without a report hung (or killed the driver)
            reports[todo[0]] = "hang" if proc.returncode in (-9, None) else f"died: {err[-600:]}"
            todo = todo[1:]
    return reports


def run_fuzz(tmp_path, bases, n, seed=0, timeout=120):
    queries = json.dumps(texts("alpha")[::10] + texts("beta")[::25] + texts("gamma")[::20]
                         + texts("delta", 50)[::10])
    rng = random.Random(seed)
    what = {}
    for k, (base, hits) in enumerate(cases(n, seed)):
        folder = tmp_path / f"copy{k}"
        shutil.copytree(bases[base], folder)
        what[str(folder)] = f"{base} " + ", ".join(damage(folder, bases["other"], t, op, rng)
                                                   for t, op in hits)
    tally = collections.Counter()
    failures = []
    for folder, report in drive(list(what), queries, timeout).items():
        if not isinstance(report, dict):
            tally["hang" if report == "hang" else "driver died"] += 1
            failures.append(f"{what[folder]}: {report}")
            continue
        o = report["outcome"]
        tally[f"info {o['info']}"] += 1
        tally[f"repair {o['repair']}"] += 1
        tally["copies"] += 1
        for p in report["problems"]:
            tally["traceback" if "traceback" in p else "wrong" if "WRONG" in p
                  else "wrong advice" if "advice" in p else "bad exit"] += 1
            failures.append(f"{what[folder]}: {p}")
    print("fuzz tally:", dict(sorted(tally.items())))
    assert not failures, "\n".join(failures[:20])
    return tally


def test_fuzzed_store_copies_quick(tmp_path, bases):
    """A dozen damaged copies (the full grid runs in the slow test below)."""
    tally = run_fuzz(tmp_path, bases, 12, seed=1)
    assert tally["copies"] == 12


@pytest.mark.slow
def test_fuzzed_store_copies_120(tmp_path, bases):
    tally = run_fuzz(tmp_path, bases, 120, seed=0)
    assert tally["copies"] == 120
    assert tally["hang"] == tally["traceback"] == tally["wrong"] == tally["wrong advice"] == 0


# ---------------------------------------------------------------- the manifest, property-based
_json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_fingerprints = st.fixed_dictionaries({"model": st.text(max_size=20), "dim": st.integers(1, 4096),
                                       "pooling": st.sampled_from(["mean", "cls", "max"]),
                                       "weights_sha256": st.text("0123456789abcdef", min_size=64,
                                                                 max_size=64),
                                       "normalized": st.booleans()})
_manifests = st.builds(
    Manifest, fingerprint=_fingerprints, dim=st.integers(1, 4096),
    index_kind=st.sampled_from(["flat", "hnsw", "sq8"]),
    index_params=st.dictionaries(st.text(max_size=10), _json_leaf, max_size=4),
    index_file=st.integers(0, 10**10 - 1).map(lambda g: f"index-{g:010d}.faiss"),
    index_bytes=st.integers(0, 2**40), index_sha256=st.text("0123456789abcdef", min_size=64,
                                                            max_size=64),
    count=st.integers(0, 2**40), max_id=st.integers(0, 2**62), generation=st.integers(0, 2**62),
    store_id=st.text("0123456789abcdef", min_size=32, max_size=32),
    written=st.floats(0, 2e9))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_manifests)
def test_manifest_round_trip(m):
    back = Manifest.from_json(m.to_json(), Path("/x/manifest.json"))
    assert back == m


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=2000) | _manifests.map(lambda m: m.to_json()).flatmap(
    lambda raw: st.tuples(st.just(raw), st.integers(0, len(raw) - 1), st.integers(1, 255)).map(
        lambda t: t[0][:t[1]] + bytes([t[0][t[1]] ^ t[2]]) + t[0][t[1] + 1:])))
def test_manifest_from_any_bytes_is_valid_or_a_clear_error(raw):
    """Random bytes, and real manifests with one byte changed: a Manifest whose own checksum
    holds, or StoreCorrupted with remedy repair (or UnsupportedFormat) - nothing else."""
    try:
        m = Manifest.from_json(raw, Path("/x/manifest.json"))
    except StoreCorrupted as e:
        assert str(e).startswith(("the manifest /x/manifest.json", "the store at /x"))
        return
    assert Manifest.from_json(m.to_json(), Path("/x/manifest.json")) == m
