"""The oneDNN-or-MKL timing of core.encoder.packed_forward.pack_for_cpu_inference is remembered on disk
(core/machine_cache.py): the second load of a model times nothing and uses the remembered winner."""
from __future__ import annotations

import json
import os

import pytest
import torch

import core.encoder.model as M
import core.encoder.packed_forward as P
from core import machine_cache
from tests.core.encoder.test_parts import randomised, small_config


def _packed_model(seed=3):
    model = randomised(M.EncoderForMaskedLM(small_config(activation="gelu_tanh")), seed=seed)
    if not P.pack_for_cpu_inference(model):
        pytest.skip("this torch has no oneDNN")
    return model


def test_timings_are_remembered_and_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    timed = []
    real = P._onednn_is_faster
    monkeypatch.setattr(P, "_onednn_is_faster", lambda m, gelu: timed.append(m.weight.shape) or real(m, gelu))
    first = _packed_model()
    assert timed, "the first load times the kernels"
    saved = json.loads((tmp_path / "cache" / machine_cache.KERNEL_CHOICE).read_text())
    assert len(saved) == len(timed) == len(set(timed))  # each shape timed once (fused QKV too)
    assert all(k.startswith(machine_cache.cpu_name()) and f"threads {torch.get_num_threads()}" in k
               for k in saved)
    timed.clear()
    second = _packed_model(seed=4)
    assert timed == []                                   # nothing timed again
    assert ([m.fp32_onednn for m in first.modules() if isinstance(m, M.Linear)]
            == [m.fp32_onednn for m in second.modules() if isinstance(m, M.Linear)])


def test_the_remembered_choice_is_the_one_used(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    model = _packed_model()
    path = tmp_path / "cache" / machine_cache.KERNEL_CHOICE
    flipped = {k: not v for k, v in json.loads(path.read_text()).items()}
    path.write_text(json.dumps(flipped))
    again = _packed_model()
    for a, b in zip((m for m in model.modules() if isinstance(m, M.Linear)),
                    (m for m in again.modules() if isinstance(m, M.Linear))):
        assert b.fp32_onednn is (not a.fp32_onednn)


def test_an_unreadable_cache_means_timing_again(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    path = tmp_path / "cache" / machine_cache.KERNEL_CHOICE
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert machine_cache.load(machine_cache.KERNEL_CHOICE) == {}
    _packed_model()
    assert json.loads(path.read_text())                  # rewritten whole


def test_the_bf16_check_is_remembered(tmp_path, monkeypatch):
    from core.encoder.backends import get_backend
    from tests.support.tiny_models import make_tiny_distilbert
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path / "data"))
    # what is tested is the memo, not the CPU: bf16 runs (emulated, slowly) where it is not native
    monkeypatch.setattr("core.device.bf16_supported", lambda device: True)
    backend = get_backend(model=str(make_tiny_distilbert(tmp_path / "tiny")), precision="fp32")
    embeds = []
    real_embed = backend.embed
    monkeypatch.setattr(backend, "embed", lambda texts, **kw: embeds.append(len(texts)) or real_embed(texts, **kw))
    first = backend.check_bf16(memo="tiny")
    outcome = (backend.precision, backend.precision_note)
    assert len(embeds) == 2                                   # fp32 and bf16, measured
    assert machine_cache.load(machine_cache.BF16_CHECK) == {"tiny": first}
    backend.precision = "fp32"
    assert backend.check_bf16(memo="tiny") == first
    assert len(embeds) == 2 and (backend.precision, backend.precision_note) == outcome   # not again
    # a remembered cosine below the bar: fp32, as if it had been measured now
    machine_cache.save(machine_cache.BF16_CHECK, {"poor": 0.99})
    assert backend.check_bf16(memo="poor") == 0.99 and backend.precision == "fp32"
    assert len(embeds) == 2


# ---- the cache file is data (core.files.cache_file) -----------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_fifo_in_place_of_the_cache_never_hangs(tmp_path, monkeypatch):
    import threading
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    path = machine_cache.cache_path(machine_cache.KERNEL_CHOICE)
    path.parent.mkdir(parents=True)
    os.mkfifo(path)
    got = []
    t = threading.Thread(target=lambda: got.append(machine_cache.load(machine_cache.KERNEL_CHOICE)), daemon=True)
    t.start()
    t.join(20)
    if t.is_alive():
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        t.join(10)
        pytest.fail("a FIFO in place of kernel_choice.json blocked the read")
    assert got == [{}]
    machine_cache.save(machine_cache.KERNEL_CHOICE, {"k": True})        # replaced by a regular file
    assert machine_cache.load(machine_cache.KERNEL_CHOICE) == {"k": True}


def test_a_failed_write_leaves_no_temporary_and_never_writes_through_a_planted_link(tmp_path, monkeypatch):
    import errno
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    path = machine_cache.cache_path(machine_cache.KERNEL_CHOICE)
    path.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("a user's file")
    (path.parent / f"{path.name}.{os.getpid()}.tmp").symlink_to(victim)    # the name an old writer used
    machine_cache.save(machine_cache.KERNEL_CHOICE, {"a": True})
    assert victim.read_text() == "a user's file" and machine_cache.load(machine_cache.KERNEL_CHOICE) == {"a": True}

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    machine_cache.save(machine_cache.KERNEL_CHOICE, {"b": False})         # no exception: best effort
    monkeypatch.undo()
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()] == []


def test_a_killed_writers_temporaries_are_removed_on_the_next_write(tmp_path, monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DATA_DIR", str(tmp_path))
    path = machine_cache.cache_path(machine_cache.KERNEL_CHOICE)
    path.parent.mkdir(parents=True)
    left = [path.parent / f".{path.name}.0123456789ab.tmp", path.parent / f"{path.name}.4242.tmp"]
    strangers = [path.parent / "notes.tmp", path.parent / f".{machine_cache.BF16_CHECK}.0123456789ab.tmp"]
    for p in left + strangers:
        p.write_text("{")
        os.utime(p, (1, 1))
    machine_cache.save(machine_cache.KERNEL_CHOICE, {"a": True})
    assert not any(p.exists() for p in left) and all(p.exists() for p in strangers)
