"""Each head's mean output over a corpus: what mean ablation puts in place of a head.

The mean is over every real token (padding excluded) of every text, of the head's slice of the
heads' concatenation (the site Lk.heads), computed by the clean model in fp32.
"""
from __future__ import annotations

import torch

from core.encoder import sites
from core.errors import Cancelled
from core.intervene.apply import encoder_of


def mean_head_outputs(backend, texts: list[str], batch_size: int = 32, progress=None, cancel=None) -> torch.Tensor:
    """(L, H, Dh) float32: head h of layer l's output averaged over the tokens of ``texts``."""
    encoder = encoder_of(backend)
    cfg = encoder.config
    dh = cfg.dim // cfg.n_heads
    sums = torch.zeros(cfg.n_layers, cfg.dim, dtype=torch.float64)
    count = 0
    keep: list = [None]

    def add_up(layer, heads):
        context = heads.detach().cpu().double()          # (B, T, D); Apple's MPS has no float64
        sums[layer] += (context * keep[0][..., None]).sum(dim=(0, 1)).cpu()

    with sites.hooks(encoder) as at:     # only this call's batches, whatever runs beside it
        for i in range(cfg.n_layers):
            at.read(sites.site_name("heads", i), lambda v, i=i: add_up(i, v))
        ids, _ = backend.encode_ids(list(texts))
        with torch.inference_mode():     # fp32: a corpus statistic, as exact as it can be
            for start in range(0, len(ids), batch_size):
                if cancel is not None and cancel():
                    raise Cancelled(f"mean head outputs cancelled after {start} of {len(ids)} texts")
                input_ids, mask = backend._batch(ids[start:start + batch_size])
                keep[0] = mask.detach().cpu().double()
                encoder(input_ids, mask)
                count += int(mask.sum())
                if progress is not None:
                    progress(min(start + batch_size, len(ids)), len(ids))
    return (sums / count).view(cfg.n_layers, cfg.n_heads, dh).float()
