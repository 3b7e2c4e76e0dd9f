"""Precision "auto": bf16 where the hardware has it natively and the model's vectors pass the
check, fp32 elsewhere; fp32 and bf16 vectors of one model share a store; inspection stays fp32."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import core.encoder.backends as backend_mod
from core import device as device_mod
from core.encoder.backends import get_backend
from core.errors import InputError
from tests.support.bf16 import CPU_BF16_REFUSAL, needs_cpu_bf16
from tests.support.tiny_models import run_cli

CPU = torch.device("cpu")


@pytest.fixture
def auto_env(monkeypatch):
    """The precision a user gets by default (the suite pins fp32 in conftest)."""
    monkeypatch.delenv(device_mod.PRECISION_ENV, raising=False)
    backend_mod.clear_cache()
    yield
    backend_mod.clear_cache()


def test_auto_picks_bf16_only_where_native(monkeypatch, auto_env):
    monkeypatch.setattr(device_mod, "bf16_native", lambda dev: True)
    assert device_mod.resolve_precision(CPU) == "bf16"
    monkeypatch.setattr(device_mod, "bf16_native", lambda dev: False)
    assert device_mod.resolve_precision(CPU) == "fp32"
    assert device_mod.resolve_precision(CPU, "fp32") == "fp32"
    monkeypatch.setenv(device_mod.PRECISION_ENV, "fp32")
    assert device_mod.requested_precision() == "fp32"
    monkeypatch.setenv(device_mod.PRECISION_ENV, "fp64")
    with pytest.raises(InputError, match="ENCODERSCOPE_PRECISION"):
        device_mod.requested_precision()


def test_bf16_native_follows_the_cpu_flags():
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if not flags:
        pytest.skip("no /proc/cpuinfo")
    # native instructions, and kernels that run them (ONEDNN_MAX_CPU_ISA=AVX2 forbids them)
    native = (" avx512_bf16" in flags or " amx_bf16" in flags) and device_mod.bf16_supported(CPU)
    assert device_mod.bf16_native(CPU) == native


@needs_cpu_bf16
def test_auto_backend_checks_bf16_and_keeps_it(monkeypatch, auto_env):
    monkeypatch.setattr(backend_mod, "resolve_precision", lambda dev, asked: "bf16" if asked == "auto" else asked)
    b = get_backend("minilm")
    assert b.precision == "bf16" and "min cosine" in b.precision_note
    ref = get_backend("minilm", precision="fp32")
    texts = ["A small cat naps in the sun.", "Markets fell sharply on Monday after the report."]
    cos = (b.embed(texts) * ref.embed(texts)).sum(1)
    assert cos.min() >= backend_mod.base.BF16_MIN_COSINE
    assert np.abs(b.embed(texts) - ref.embed(texts)).max() > 0      # really another precision
    # one model, either precision: the same fingerprint, so they share a store
    assert b.fingerprint("mean") == ref.fingerprint("mean")
    # inspection runs fp32 whatever the embedding precision (bf16 would differ by ~1e-3; the two
    # loads may pick different fp32 kernels, hence the tolerance)
    np.testing.assert_allclose(b.inspect(texts[0]).attentions, ref.inspect(texts[0]).attentions, atol=1e-5)


@needs_cpu_bf16
def test_auto_falls_back_to_fp32_when_bf16_vectors_drift(monkeypatch, auto_env, caplog):
    """The fallback is logic, not hardware: it runs on every machine whose kernels run bf16 (emulated
    where it is not native) and on the CPU whatever ``auto`` would pick."""
    monkeypatch.setattr(device_mod, "bf16_supported", lambda dev: True)
    monkeypatch.setattr(backend_mod, "resolve_precision", lambda dev, asked: "bf16" if asked == "auto" else asked)
    # check_bf16 reads the threshold where it is defined; no bf16 vector can pass this one
    monkeypatch.setattr(backend_mod.base, "BF16_MIN_COSINE", 1.000001)
    with caplog.at_level("WARNING"):
        b = get_backend("random:dim=64,layers=2,heads=4,ffn=128", backend="scratch", device="cpu")
    assert b.precision == "fp32"
    assert "differed from fp32" in b.precision_note and "differed from fp32" in caplog.text
    ref = get_backend("random:dim=64,layers=2,heads=4,ffn=128", precision="fp32", device="cpu")
    np.testing.assert_allclose(b.embed(["the cat sat"]), ref.embed(["the cat sat"]), atol=1e-6)


def test_cli_reports_the_precision_it_ran(auto_env, capsys):
    rc, out, err = run_cli(["embed", "The cat sat.", "--json"], capsys)
    assert rc == 0, err
    out = json.loads(out)
    expected = "bf16" if device_mod.bf16_native(CPU) else "fp32"
    assert out["precision"] == expected and out["precision_note"]
    with pytest.raises(SystemExit) as e:         # argparse refuses an unknown choice
        run_cli(["embed", "x", "--precision", "fp64"], capsys)
    err = capsys.readouterr().err
    assert e.value.code == 2 and "fp64" in err and "Traceback" not in err


# ---- the app: Model > Precision -------------------------------------------------------------------


@needs_cpu_bf16
def test_app_precision_menu_switches_without_reembedding(qtbot, make_window, tiny_store_template):
    w = make_window(tiny_store_template)
    assert w.state.backend.precision == "fp32"              # the suite pins fp32 (conftest)
    assert "fp32" in w.device_label.text()
    asked = []
    w.service.mismatch.connect(lambda *a: asked.append(a))
    w.precision_actions["bf16"].trigger()
    qtbot.waitUntil(lambda: w.state.backend is not None and w.state.backend.precision == "bf16"
                    and not w.state.jobs.busy, timeout=60_000)
    assert w.state.choice.precision == "bf16" and "bf16" in w.device_label.text()
    assert w.precision_actions["bf16"].isChecked() and not asked   # same model: no re-embed offer
    # the corpus is searched with bf16 query vectors: the hits are the fp32 ones
    hits = w.state.store.search(w.state.backend.embed(["rain and storms"])[0], 5,
                                fingerprint=w.state.backend.fingerprint("mean"))[0]
    ref = w.state.store.search(get_backend("minilm", precision="fp32").embed(["rain and storms"])[0], 5)[0]
    assert [h.id for h in hits][:3] == [h.id for h in ref][:3]
    w.save_settings()
    assert w.settings.value("model/precision") == "bf16"


# ---- a CPU whose kernels cannot run bf16 (AVX2 only), simulated by capping oneDNN and ATen ---------

AVX2_ONLY = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}
REPO = Path(__file__).resolve().parents[2]


def _python(args, env_extra):
    env = {**os.environ, **env_extra}
    return subprocess.run([sys.executable, *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def test_a_test_forcing_bf16_skips_naming_why_where_the_kernels_cannot_pack_it():
    run = _python(["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                   f"{Path(__file__).relative_to(REPO)}::test_auto_falls_back_to_fp32_when_bf16_vectors_drift"],
                  AVX2_ONLY)
    assert "1 skipped" in run.stdout, run.stdout[-2000:]
    assert "needs bf16 on the CPU: this CPU's kernels cannot run bf16" in run.stdout
    assert "avx512bw" in run.stdout                 # torch's own reason, not a guess from CPU flags
    # and not here, where the CPU computes bf16 natively and nothing caps its kernels
    if not any(k in os.environ for k in AVX2_ONLY) and getattr(torch.cpu, "_is_avx512_bf16_supported", bool)():
        assert CPU_BF16_REFUSAL is None


def test_auto_is_fp32_and_bf16_is_refused_where_the_kernels_cannot_pack_it():
    """With oneDNN capped at AVX2 on a CPU whose flags still say avx512_bf16, "auto" must not pick bf16
    (the weights could not be packed) and an explicit bf16 is one clear refusal."""
    code = ("import torch\nfrom core.device import resolve_precision\nfrom core.errors import DeviceUnavailable\n"
            "cpu = torch.device('cpu')\nprint('auto', resolve_precision(cpu, 'auto'))\n"
            "try:\n    resolve_precision(cpu, 'bf16')\nexcept DeviceUnavailable as e:\n    print('refused', e)\n")
    run = _python(["-c", code], {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert run.returncode == 0, run.stderr
    assert "auto fp32" in run.stdout and "refused bf16 is not supported on cpu" in run.stdout
