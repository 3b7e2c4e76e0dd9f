"""Apple GPUs (MPS), simulated here by monkeypatching torch.backends.mps.is_available and the bf16
probe: auto-selection picks MPS after CUDA, `--device mps` works where it exists and is one error
line with its way out where not, bf16 only where MPS computes it (else fp32), and the device and
precision are named as the status bar and the JSON show them."""
from __future__ import annotations

import pytest
import torch

from core import device as dev
from core.errors import DeviceUnavailable
from tests.support.tiny_models import one_error, run_cli


@pytest.fixture
def mac(monkeypatch):
    """A Mac with an Apple GPU and no CUDA; `bf16` sets whether MPS computes bf16 there."""
    monkeypatch.delenv("ENCODERSCOPE_DEVICE", raising=False)
    monkeypatch.delenv("ENCODERSCOPE_PRECISION", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)

    def bf16(works: bool):
        monkeypatch.setattr(dev, "_mps_bf16", lambda: works)
    bf16(False)
    return bf16


def test_auto_picks_mps_and_names_it(mac):
    assert dev.pick_device().type == "mps" == dev.pick_device("auto").type == dev.pick_device("mps").type
    assert dev.describe_device(torch.device("mps")) == "mps (Apple GPU)"
    assert "mps" in dev.available_devices()
    assert dev.pick_device("cpu").type == "cpu"


def test_bf16_only_where_mps_computes_it(mac):
    mps = torch.device("mps")
    mac(True)
    assert dev.resolve_precision(mps, "auto") == "bf16" == dev.resolve_precision(mps, "bf16")
    assert dev.bf16_native(mps) and dev.bf16_supported(mps)
    mac(False)
    assert dev.resolve_precision(mps, "auto") == "fp32"
    with pytest.raises(DeviceUnavailable, match=r"bf16 is not supported on mps \(Apple GPU\); use fp32"):
        dev.resolve_precision(mps, "bf16")


def test_the_bf16_probe_says_no_where_mps_cannot_run_it(monkeypatch):
    dev._mps_bf16.cache_clear()
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert dev._mps_bf16() is False
    dev._mps_bf16.cache_clear()
    if not torch.backends.mps.is_built():      # a torch without MPS: the probe's tensor fails, cleanly
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        assert dev._mps_bf16() is False
    dev._mps_bf16.cache_clear()


def test_mps_asked_for_where_there_is_none_is_one_line_with_its_way_out(monkeypatch, capsys):
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(DeviceUnavailable) as e:
        dev.pick_device("mps")
    assert e.value.fix == {"kind": "settings", "settings": {"device": "cpu"}}
    code, _, err = run_cli(["embed", "hi", "--device", "mps", "--model", "random:dim=32,layers=1,heads=2,ffn=64"],
                           capsys)
    assert "Apple's Metal backend is not available here" in one_error(code, err)
    assert err.rstrip().endswith("(--device cpu)")
    code, out, err = run_cli(["embed", "hi", "--device", "cpu", "--model", "random:dim=32,layers=1,heads=2,ffn=64",
                              "--json"], capsys)
    assert code == 0, err                           # the way out it offers works
