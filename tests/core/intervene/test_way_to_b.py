"""One measure of the way to B: ``patch A B --json``, the Intervene tab's effects.toward_b and the
patching sweep's cell for the same site give the same number, to the last digit, at fp32 and at
bf16 (the default precision where the CPU computes bf16). The measure itself against its formula."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from core.device import bf16_supported
from core.intervene import effects
from core.intervene.apply import intervene
from core.intervene.patch_sweep import patch_sweep
from core.intervene.patching import patched_run
from core.intervene.spec import parse_site
from core.intervene.way_to_b import moved_toward_b, toward_b
from tests.support.causal_models import tiny_pair

A, B = "the cat sat on the [MASK] today", "the dog ran on the [MASK] today"
# (sweep kind, cell, site): a head and a token's residual early (the rest of the network runs
# stacked), and the last layer's FFN
CELLS = [("heads", (0, 1), "L1.H2"), ("heads", (1, 3), "L2.H4"), ("resid", (0, 4), "L1.resid@4"),
         ("ffn", (2, 0), "L3.ffn")]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_pair(tmp_path_factory.mktemp("tiny_way_to_b"))


def test_the_measure_is_its_formula():
    rng = np.random.default_rng(0)
    va, vp, vb = (v / np.linalg.norm(v) for v in rng.normal(size=(3, 16)).astype(np.float32))
    want = (vp.astype(np.float64) @ vb - va.astype(np.float64) @ vb) / (1 - va.astype(np.float64) @ vb)
    assert moved_toward_b(va, vp, vb) == pytest.approx(want, rel=1e-12)
    assert moved_toward_b(va, vb, vb) == 1.0 and moved_toward_b(va, va, vb) == pytest.approx(0.0, abs=1e-15)
    assert moved_toward_b(va, vp, va) is None
    t = toward_b(va, vp, vb)
    assert t.moved == moved_toward_b(va, vp, vb) and t.cosine_patched_b == pytest.approx(vp @ vb, abs=1e-7)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_cli_app_and_sweep_agree_to_every_digit(tiny, run, precision):
    if precision == "bf16" and not bf16_supported(torch.device("cpu")):
        pytest.skip("this CPU's torch runs no bf16 autocast (no AVX512/AMX): the default precision is fp32 here")
    backend, _ = tiny
    was = backend.precision
    backend.precision = precision
    try:
        sweeps = {kind: patch_sweep(backend, A, B, kind, pooling="mean") for kind in {k for k, _, _ in CELLS}}
        for kind, (row, col), site in CELLS:
            cli = json.loads(run("patch", A, B, "--site", site, "--model", str(backend.source.folder),
                                 "--pooling", "mean", "--precision", precision, "--json").stdout)
            assert cli["precision"] == precision
            spec, source, _, _ = patched_run(backend, A, B, [parse_site(site)])
            vector = effects.compare_vector(backend, A, spec, pooling="mean", source=source)
            app = effects.toward_b(backend, vector, B, pooling="mean")
            cell = sweeps[kind]
            assert app.moved == cli["moved_toward_b"] == cell.values[row, col], site
            assert app.cosine_patched_b == cli["cosine_patched_b"] == cell.cosine_b[row, col], site
            assert app.cosine_a_b == cli["cosine_a_b"] == cell.cosine_a_b, site
            assert 0.0 < abs(cli["moved_toward_b"]) < 1.0, site
    finally:
        backend.precision = was


def test_the_app_measures_b_as_the_cli_does_not_through_the_packed_path(tiny, monkeypatch):
    """B's vector for the Intervene tab goes through the modules, as A's before and after do."""
    from core.encoder import scoped_hooks
    backend, _ = tiny
    seen = []
    real = backend.embed

    def embed(texts, **kw):
        seen.append((texts[0], scoped_hooks.active_here()))
        return real(texts, **kw)
    monkeypatch.setattr(backend, "embed", embed)
    spec, source, _, _ = patched_run(backend, A, B, [parse_site("L2.H4")])
    with intervene(backend, spec, patch_source=source):
        pass
    vector = effects.compare_vector(backend, A, spec, pooling="mean", source=source)
    effects.toward_b(backend, vector, B, pooling="mean")
    assert seen == [(A, True), (A, True), (B, True)]
