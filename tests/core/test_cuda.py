"""The GPU path, run on a GPU when one is there: each test takes a device, ``cpu`` (runs on every
machine, so the code path cannot rot) and ``cuda`` (marked ``needs_cuda``: skipped with the reason
where torch sees no CUDA GPU; ``pytest -m needs_cuda -ra`` lists them). `make gpu-check` runs them.

Numbers are compared in a pinned precision: fp32 against transformers on the same device, and
against our own CPU run; bf16 only against fp32 by cosine.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core import device as device_mod
from core.encoder.backends import base as backend_base
from core.encoder.backends import get_backend
from tests.core.encoder.test_vs_transformers import FP32_VS_EXACT, TOL, compare, max_diff, run_minilm
from tests.support.tiny_models import run_cli

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.needs_cuda)]
TEXTS = ["The cat sat on the mat.", "Markets fell sharply on Monday after the report.",
         "Where is the nearest train station?", "ok"]


def test_needs_cuda_is_skipped_with_its_reason_without_a_gpu(request):
    """Where torch sees no GPU, every needs_cuda test is skipped and says why (conftest)."""
    items = [i for i in request.session.items if i.get_closest_marker("needs_cuda")]
    if not items:
        pytest.skip("the needs_cuda tests were deselected (-m) in this run")
    for item in items:
        skips = [m for m in item.iter_markers("skip")]
        if torch.cuda.is_available():
            assert not skips
        else:
            assert skips and "no CUDA GPU" in skips[0].kwargs["reason"]


@pytest.mark.parametrize("device", DEVICES)
def test_encoder_on_device_matches_transformers_and_the_cpu(device):
    """On ``device``: the same maths as transformers' BertModel (fp64 to 1e-10); our fp32 within
    FP32_VS_EXACT of that; the backends' fp32 vectors equal transformers' there and our CPU's."""
    o64, r64, mask = run_minilm(torch.float64, device)
    assert o64.last_hidden_state.device.type == device
    compare(o64, r64, mask, tol=1e-10)
    o32, r32, _ = run_minilm(torch.float32, device)
    compare(o32, r64, mask, tol=FP32_VS_EXACT)
    assert max_diff(o32.last_hidden_state, r32.last_hidden_state, mask.bool()) <= TOL
    ours = get_backend("minilm", "scratch", device=device, precision="fp32")
    theirs = get_backend("minilm", "hf", device=device, precision="fp32")
    cpu = get_backend("minilm", "scratch", device="cpu", precision="fp32")
    assert ours.device.type == device and ours.device_name.startswith(device)
    v = ours.embed(TEXTS)
    np.testing.assert_allclose(v, theirs.embed(TEXTS), atol=TOL)
    np.testing.assert_allclose(v, cpu.embed(TEXTS), atol=TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_on_device_keeps_cosine_with_fp32_and_auto_says_what_it_chose(device, monkeypatch):
    dev = torch.device(device)
    if not device_mod.bf16_supported(dev):
        pytest.skip(f"{device_mod.describe_device(dev)} has no bf16 (not even emulated by its kernels)")
    fp32 = get_backend("minilm", device=device, precision="fp32").embed(TEXTS)
    bf16 = get_backend("minilm", device=device, precision="bf16")
    assert bf16.precision == "bf16"
    cos = (bf16.embed(TEXTS) * fp32).sum(1)
    assert cos.min() >= backend_base.BF16_MIN_COSINE and np.abs(bf16.embed(TEXTS) - fp32).max() > 0
    monkeypatch.delenv(device_mod.PRECISION_ENV)          # the default: auto
    auto = get_backend("minilm", device=device)
    if device_mod.bf16_native(dev):
        assert auto.precision == "bf16" and "min cosine" in auto.precision_note
    else:
        assert auto.precision == "fp32"


@pytest.mark.parametrize("device", DEVICES)
def test_cli_runs_and_reports_the_device(device, tmp_path, capsys, monkeypatch):
    """embed, ingest + search, explain, why and a few train steps with --device; the device used
    is the one reported. $ENCODERSCOPE_DEVICE alone chooses it too, and --device beats it."""
    def cli(*argv):
        rc, out, err = run_cli(argv, capsys)
        assert rc == 0, err
        return out, err

    def embed(*extra):
        return json.loads(cli("embed", *TEXTS[:2], "--json", *extra)[0])

    out = embed("--device", device)
    assert out["device"].startswith(device) and out["precision"] == "fp32"
    monkeypatch.setenv(device_mod.ENV_VAR, device)
    alone = embed()
    assert alone["device"] == out["device"]
    np.testing.assert_allclose(alone["vectors"], out["vectors"], atol=1e-6)
    monkeypatch.setenv(device_mod.ENV_VAR, "cpu" if device != "cpu" else "auto")
    assert embed("--device", device)["device"] == out["device"]
    monkeypatch.setenv(device_mod.ENV_VAR, device)

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(["Heavy rain flooded the valley overnight.", "The striker scored twice.",
                                 "Stocks slid as inflation rose.", "A storm brought thunder and hail.",
                                 "The orchestra played Mahler."]) + "\n", encoding="utf-8")
    store = tmp_path / "store"
    cli("ingest", str(corpus), "--store", str(store), "--device", device, "--quiet")
    hits = json.loads(cli("search", "bad weather", "--store", str(store), "--device", device, "-k", "2",
                          "--json")[0])
    texts = [h["text"] for h in hits["results"]]
    assert set(texts) <= {"Heavy rain flooded the valley overnight.", "A storm brought thunder and hail."}
    # explain's steps run on the CPU in fp32 whatever the device; elsewhere it says where the model is
    explained = json.loads(cli("explain", "the cat sat", "--device", device, "--json")[0])
    assert explained["steps"]
    assert (f"loaded for {device}" in explained["note"]) if device != "cpu" else not explained["note"]
    pair = ["bad weather", "A storm brought thunder and hail."]
    why = json.loads(cli("why", *pair, "--device", device, "--json")[0])
    a, b = (np.array(json.loads(cli("embed", t, "--device", device, "--json")[0])["vectors"][0]) for t in pair)
    assert why["hit_run"]["precision"] == "fp32" and why["score"] == pytest.approx(float(a @ b), abs=1e-5)
    from tests.support.train_corpus import write_corpus
    out, err = cli("train", "--corpus", str(write_corpus(tmp_path / "gen.txt", n=200)), "--out",
                   str(tmp_path / "run"), "--steps", "4", "--init", "fresh", "--tokenizer", "word",
                   "--layers", "1", "--dim", "32", "--heads", "2", "--ffn", "64", "--batch-size", "8",
                   "--max-length", "16", "--eval-every", "4", "--eval-sentences", "20", "--device", device,
                   "--precision", "fp32", "--no-progress", "--seed", "0")
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["steps"] == 4 and summary["device"].startswith(device)
    assert np.isfinite(summary["train_loss"])


@pytest.mark.parametrize("device", DEVICES)
def test_fill_mask_on_device_equals_the_cpu(device, tiny_distilbert):
    """A tiny masked-LM (save_pretrained): the same top-k on ``device`` as on the CPU."""
    cpu = get_backend(str(tiny_distilbert), "scratch", device="cpu", precision="fp32")
    here = get_backend(str(tiny_distilbert), "scratch", device=device, precision="fp32")
    assert here.device.type == device
    text = "the cat sat on the [MASK] ."
    a, b = (x.fill_mask(text, top_k=5).to_dict() for x in (here, cpu))
    for ma, mb in zip(a["masks"], b["masks"], strict=True):
        assert [p["token"] for p in ma["predictions"]] == [p["token"] for p in mb["predictions"]]
        np.testing.assert_allclose([p["score"] for p in ma["predictions"]],
                                   [p["score"] for p in mb["predictions"]], atol=1e-5)


# A training step's gradients on the device against the CPU's: fp32 on both, dropout off, the same
# weights and batch. Bound: 1e-4 of the parameter's largest gradient (fp32 sums in another order
# differ by ~1e-6 of it; a wrong mask, dtype or device copy is off by far more).
GRAD_REL = 1e-4
KEY_BIAS = "k_lin.bias"


def _gradients(device: str, corpus, out):
    from core.train.data import collate
    from core.train.masking import mask_tokens, special_mask
    from core.train.trainer import Trainer
    from tests.support.train_corpus import tiny_config
    t = Trainer(tiny_config(corpus, out, device=device, steps=1))
    t._setup()                                   # the model, built on the CPU from the seed, on the device
    ids, attn = collate(t.train_ids[:16], t.tokenizer.pad_token_id)
    inputs, labels = mask_tokens(ids, special_mask(ids, t.special_ids), t.tokenizer.mask_token_id,
                                 t.model.config.vocab_size, 0.15, torch.Generator().manual_seed(0), t.random_ids)
    inputs, attn, labels = (x.to(t.device) for x in (inputs, attn, labels))
    t.model.train()
    with t.autocast():
        loss, _ = t.mlm_loss(inputs, attn, labels)
    loss.backward()
    return float(loss.detach()), {n: p.grad.detach().cpu() for n, p in t.model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("device", DEVICES)
def test_training_step_gradients_on_device_equal_the_cpu(device, tmp_path):
    from tests.support.train_corpus import write_corpus
    corpus = write_corpus(tmp_path / "gen.txt", n=300)
    loss_dev, g_dev = _gradients(device, corpus, tmp_path / "dev")
    loss_cpu, g_cpu = _gradients("cpu", corpus, tmp_path / "cpu")
    assert abs(loss_dev - loss_cpu) <= 1e-5 * abs(loss_cpu)
    assert g_dev.keys() == g_cpu.keys() and len(g_cpu) > 5
    largest = max(float(g.abs().max()) for g in g_cpu.values())
    for name, g in g_cpu.items():
        scale = float(g.abs().max())
        if name.endswith(KEY_BIAS):
            # exactly 0 in exact arithmetic: a key bias adds one constant to a query's every score,
            # which the softmax ignores; what the device and the CPU hold is rounding noise
            assert max(scale, float(g_dev[name].abs().max())) <= 1e-6 * largest, name
            continue
        assert scale > 0, name
        assert float((g_dev[name] - g).abs().max()) <= GRAD_REL * scale, name
