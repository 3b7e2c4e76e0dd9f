"""The Features tab: sparse-autoencoder features trained, browsed, measured and edited (core/features/)."""
