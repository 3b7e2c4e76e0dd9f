"""Device choice, bf16 mode, and randomly initialised encoders."""
import numpy as np
import pytest
import torch

from core.backend import get_backend
from core.device import bf16_supported, describe_device, pick_device
from core.errors import InputError


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


@pytest.mark.skipif(not bf16_supported(torch.device("cpu")), reason="this CPU has no bf16 support")
def test_bf16_embeddings_keep_cosine_with_fp32():
    texts = [line for line in open("assets/sample_corpus.txt", encoding="utf-8").read().splitlines()[:64]]
    fp32 = get_backend("minilm", precision="fp32").embed(texts)
    bf16 = get_backend("minilm", precision="bf16").embed(texts)
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
