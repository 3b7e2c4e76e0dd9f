"""SAELens opens a saved SAE with ``SAE.load_from_disk`` and gives the same codes and
reconstruction. sae-lens is not a dependency of Encoderscope: skipped, saying so, where it is not
installed (it was run in a separate virtual environment with sae-lens 6.54; docs/features.md)."""
import pytest
import torch

from core.features.collect import iter_activations
from core.features.saved import load_sae


def test_saelens_load_from_disk_gives_the_same_codes(trained, bert_pair, corpus):
    sae_lens = pytest.importorskip("sae_lens", reason="sae-lens is not installed here (it is optional)")
    folder = trained[0]
    theirs = sae_lens.SAE.load_from_disk(str(folder), device="cpu")
    ours, meta = load_sae(folder)
    x = torch.cat([b.acts for b in iter_activations(bert_pair[0], corpus[:20], meta.site)])
    with torch.no_grad():
        codes = theirs.encode(x)
        torch.testing.assert_close(codes, ours.encode(x), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(theirs.decode(codes), ours.decode(ours.encode(x)), atol=1e-6, rtol=1e-6)
    assert type(theirs).__name__ == "TopKSAE" and theirs.cfg.k == meta.k
