"""Sparse-autoencoder features: what a hidden state at one site is made of (sae, saved, collect,
train, quality, browse, edit; docs/features.md)."""
