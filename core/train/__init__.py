"""Training small encoders: the trainer, its config and data, evaluation and watching during a run, run folders,
past runs, checkpoints and the notebook's experiments."""
