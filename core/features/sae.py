"""A TopK sparse autoencoder (Gao et al. 2024): a hidden state as a few of many learned directions.

    pre   = x @ W_enc + b_enc                      (B, width)
    codes = ReLU(TopK(pre, k)), zeros elsewhere    the k largest pre-activations, kept if positive
    x_hat = codes @ W_dec + b_dec                  W_dec's rows are unit vectors: feature directions

It works on the RAW activations of the site: any scaling used while training is folded into the
weights (core/features/train.py), so a NumPy computation from the saved weights gives the same
codes (tests/core/features/test_sae_numpy.py). Shapes and names follow SAELens's TopK SAE.
"""
from __future__ import annotations

import torch
from torch import nn


class SparseAutoencoder(nn.Module):
    """W_enc (d_in, width), b_enc (width,), W_dec (width, d_in) with unit rows, b_dec (d_in,); k active."""

    def __init__(self, d_in: int, width: int, k: int, generator: torch.Generator | None = None):
        super().__init__()
        if not (0 < k <= width):
            raise ValueError(f"k must be between 1 and the width {width}, not {k}")
        self.d_in, self.width, self.k = int(d_in), int(width), int(k)
        w_dec = torch.randn(width, d_in, generator=generator, dtype=torch.float32)
        w_dec /= w_dec.norm(dim=1, keepdim=True)
        self.W_dec = nn.Parameter(w_dec)
        self.W_enc = nn.Parameter(w_dec.t().clone())          # tied at the start (Gao et al.)
        self.b_enc = nn.Parameter(torch.zeros(width))
        self.b_dec = nn.Parameter(torch.zeros(d_in))

    def pre_activations(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.W_enc + self.b_enc

    def topk_codes(self, pre: torch.Tensor) -> torch.Tensor:
        """ReLU of the k largest entries of ``pre`` per row; zeros elsewhere."""
        values, idx = pre.topk(self.k, dim=-1)
        return torch.zeros_like(pre).scatter_(-1, idx, values.relu())

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """codes (..., width) of activations x (..., d_in)."""
        return self.topk_codes(self.pre_activations(x))

    def topk_parts(self, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(values (..., k) after ReLU, indices (..., k)) of the k largest pre-activations."""
        values, idx = pre.topk(self.k, dim=-1)
        return values.relu(), idx

    def decode_topk(self, values: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        """decode() of codes given as their k (value, index) pairs per row (2-D): the k decoder rows
        summed, not a dense (rows, width) product: what training runs (about 100x fewer
        multiply-adds in the decoder and its gradient at width 3,072, k 32)."""
        return nn.functional.embedding_bag(idx, self.W_dec, per_sample_weights=values, mode="sum") + self.b_dec

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """x_hat (..., d_in) of codes (..., width)."""
        return codes @ self.W_dec + self.b_dec

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        codes = self.encode(x)
        return self.decode(codes), codes

    @torch.no_grad()
    def normalise_decoder(self) -> None:
        """Decoder rows back to unit norm (after each optimiser step)."""
        self.W_dec /= self.W_dec.norm(dim=1, keepdim=True).clamp_min(1e-12)

    @torch.no_grad()
    def drop_parallel_gradient(self) -> None:
        """Remove the part of W_dec's gradient along each row: it would only change the row's norm,
        which normalise_decoder undoes (Gao et al.; keeps Adam's moments honest)."""
        if self.W_dec.grad is None:
            return
        g = self.W_dec.grad
        g -= (g * self.W_dec).sum(dim=1, keepdim=True) * self.W_dec

    def feature_contribution(self, codes: torch.Tensor, features) -> torch.Tensor:
        """sum over ``features`` of codes[..., f] * W_dec[f]: what those features add to x_hat."""
        idx = torch.as_tensor(sorted(features), dtype=torch.long, device=codes.device)
        if idx.numel() == 0:
            return torch.zeros(*codes.shape[:-1], self.d_in, dtype=codes.dtype, device=codes.device)
        return codes.index_select(-1, idx) @ self.W_dec.index_select(0, idx).to(codes.dtype)
