"""Patching is exact at every precision (issue 49, item 4): B's sites are captured under the same
precision and autocast as the run of A they are put into, so A patched from A is A and patching
every token's residual after the last layer is B, bit for bit, in bf16 (a bf16 CPU; CUDA) as in
fp32."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from core.encoder.backends import get_backend
from core.encoder.scoped_hooks import modules_path
from core.intervene.apply import intervene
from core.intervene.patching import patched_run
from core.intervene.spec import parse_site
from tests.support.bf16 import needs_cpu_bf16
from tests.support.tiny_models import make_tiny_bert

A, B = "the film was good", "the film was bad"
EVERY_KIND = ["L1.H2", "L2.H1@2", "L1.ffn", "L2.ffn@film", "L1.resid", "L2.resid@3", "L3.resid"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_tiny_bert(tmp_path_factory.mktemp("tiny_precision"), dim=64, n_layers=3, n_heads=4, mlm=False)


def _patched(backend, a, b, sites):
    spec, source, _, _ = patched_run(backend, a, b, [parse_site(s) for s in sites])
    with intervene(backend, spec, patch_source=source):
        return backend.embed([a])[0]


def _plain(backend, text):
    with modules_path():
        return backend.embed([text])[0]


def _check_exact(backend):
    a, b = _plain(backend, A), _plain(backend, B)
    assert not np.array_equal(a, b)
    for site in EVERY_KIND:
        np.testing.assert_array_equal(_patched(backend, A, A, [site]), a, err_msg=f"A <- A at {site}")
    np.testing.assert_array_equal(_patched(backend, A, A, EVERY_KIND), a, err_msg="A <- A at every site at once")
    # every token's residual after the last layer: what is pooled is B's
    np.testing.assert_array_equal(_patched(backend, A, B, ["L3.resid"]), b)


@pytest.mark.parametrize("precision", ["fp32", pytest.param("bf16", marks=needs_cpu_bf16)])
def test_patch_is_exact_on_the_cpu(folder, precision):
    _check_exact(get_backend(str(folder), "scratch", device="cpu", precision=precision))


@pytest.mark.needs_cuda
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_patch_is_exact_on_cuda(folder, precision):
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    _check_exact(get_backend(str(folder), "scratch", device="cuda", precision=precision))


def test_patch_a_with_itself_says_so_and_is_bit_for_bit(folder, run):
    """The CLI at the default precision: no "-121783 % of the way to B"."""
    out = run("patch", A, A, "--site", "L2.resid", "--model", str(folder)).stdout
    assert "A and B have the same vector" in out and "unchanged, bit for bit" in out
    assert "way to B" in out and "%" not in out
    d = __import__("json").loads(run("patch", A, A, "--site", "L2.resid", "--model", str(folder), "--json").stdout)
    assert d["same_vector_a_b"] and d["patched_equals_a"] and d["moved_toward_b"] is None
    d = __import__("json").loads(run("patch", A, B, "--site", "L3.resid", "--model", str(folder), "--json").stdout)
    assert d["patched_equals_b"] and d["moved_toward_b"] == pytest.approx(1.0)
