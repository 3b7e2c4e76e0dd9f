"""How good sentence vectors are: graded pairs (Spearman/Pearson), anisotropy, whitening, and Why (a score split
over token pairs)."""
