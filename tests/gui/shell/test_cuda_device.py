"""The app's device choice on every device it offers: the model bar's pick is the device the
model runs on, and the status bar says so (the cuda case is ``needs_cuda``: tests/core/test_cuda.py)."""
import pytest


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.needs_cuda)])
def test_model_bar_device_is_the_one_used_and_reported(device, qtbot, make_window, tiny_store_template,
                                                       monkeypatch):
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu" if device == "cuda" else "auto")   # the bar beats it
    w = make_window(tiny_store_template)
    bar = w.model_bar
    index = bar.device.findData(device)
    assert index >= 0, [bar.device.itemData(i) for i in range(bar.device.count())]
    bar.device.setCurrentIndex(index)
    bar.device.activated.emit(index)
    qtbot.waitUntil(lambda: w.state.backend is not None and not w.state.jobs.busy
                    and w.state.backend.device.type == device, timeout=60_000)
    assert w.state.choice.device == device
    assert w.device_label.text().strip().startswith(f"Device: {device}")
    assert w.state.backend.embed(["a storm"]).shape == (1, w.state.backend.dim)
