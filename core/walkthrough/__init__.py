"""Every step of the encoder on one sentence: the NumPy reference, the steps and their proofs against the model,
the batch of two, the architecture map, the positions and pooling demos, and the notebook export."""
