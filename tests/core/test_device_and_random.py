"""Device choice, bf16 mode, and randomly initialised encoders."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from core.device import describe_device, pick_device
from core.encoder.backends import get_backend
from core.errors import DeviceUnavailable, EncoderscopeError, InputError
from tests.support.bf16 import needs_cpu_bf16
from tests.support.tiny_models import run_cli


def test_device_order_and_overrides(monkeypatch):
    monkeypatch.delenv("ENCODERSCOPE_DEVICE", raising=False)
    expected = "cuda" if torch.cuda.is_available() else (
        "mps" if torch.backends.mps.is_available() else "cpu")
    assert pick_device().type == expected == pick_device("auto").type
    assert pick_device("cpu").type == "cpu"
    monkeypatch.setenv("ENCODERSCOPE_DEVICE", "cpu")
    assert pick_device().type == "cpu"
    assert describe_device(torch.device("cpu")).startswith("cpu (")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_cuda_request_without_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        pick_device("cuda")
    with pytest.raises(RuntimeError, match="unknown device"):
        pick_device("tpu")
    # Errors worded for people (the CLI prints them as `error: ...`), not torch's own.
    for bad in ("cuda:0", "meta", "xla", "cpu:0", "cuda:", "mps"):
        if bad == "mps" and torch.backends.mps.is_available():
            continue
        with pytest.raises(DeviceUnavailable) as e:
            pick_device(bad)
        assert isinstance(e.value, EncoderscopeError) and isinstance(e.value, RuntimeError)


@pytest.fixture
def _cli(capsys, monkeypatch):
    def call(*args, **env):
        monkeypatch.delenv("ENCODERSCOPE_DEVICE", raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        rc, out, err = run_cli(args, capsys)
        return SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return call


def test_cli_device_option_env_var_and_report(_cli):
    """--device beats $ENCODERSCOPE_DEVICE, the device used is in the JSON, a bad one is a message."""
    p = _cli("embed", "hi", "--device", "cpu", "--json", ENCODERSCOPE_DEVICE="tpu")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["device"].startswith("cpu (")
    p = _cli("inspect", "hi", "--json", ENCODERSCOPE_DEVICE="tpu")
    assert p.returncode == 2 and p.stderr.startswith("error: unknown device 'tpu' (from $ENCODERSCOPE_DEVICE)")
    assert "Traceback" not in p.stderr
    if not torch.cuda.is_available():
        p = _cli("embed", "hi", "--device", "cuda", "--json")
        assert p.returncode == 2 and p.stderr.startswith("error: ") and "no CUDA GPU" in p.stderr
        assert "Traceback" not in p.stderr


@needs_cpu_bf16
def test_bf16_embeddings_keep_cosine_with_fp32():
    texts = [line for line in open("assets/sample_corpus.txt", encoding="utf-8").read().splitlines()[:64]]
    fp32 = get_backend("minilm", precision="fp32", device="cpu").embed(texts)
    bf16 = get_backend("minilm", precision="bf16", device="cpu").embed(texts)
    assert bf16.dtype == np.float32
    assert (fp32 * bf16).sum(1).min() >= 0.9999


def test_random_encoder_spec():
    b = get_backend("random:dim=32,layers=2,heads=4,ffn=64,norm=pre,positions=sinusoidal,seed=1")
    assert (b.dim, b.n_layers, b.n_heads, b.has_mlm) == (32, 2, 4, True)
    assert b.config.norm == "pre" and b.config.positions == "sinusoidal"
    v = b.embed(["a sentence", "another one"])
    assert v.shape == (2, 32)
    same = get_backend("random:dim=32,layers=2,heads=4,ffn=64,norm=pre,positions=sinusoidal,seed=1")
    assert same is b
    other = get_backend("random:dim=32,layers=2,heads=4,ffn=64,norm=pre,positions=sinusoidal,seed=2")
    assert not b.fingerprint().compatible(other.fingerprint())
    with pytest.raises(InputError, match="unknown setting"):
        get_backend("random:depth=3")
    with pytest.raises(InputError, match="divisible"):
        get_backend("random:dim=30,heads=4")
    with pytest.raises(InputError, match="scratch"):
        get_backend("random", "hf")
