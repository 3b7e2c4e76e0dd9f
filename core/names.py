"""The names a user chooses among: backends, poolings, attention masks and precisions.

No torch here: the app and the CLI build their menus and flags from these at start-up.
"""
from __future__ import annotations

BACKENDS = ("scratch", "hf")          # our from-scratch encoder; Hugging Face transformers
POOLINGS = ("mean", "cls", "max", "attention")   # token vectors -> one sentence vector (core/encoder/pooling.py);
                                                 # "attention" needs a model with a trained query
ATTENTIONS = ("bidirectional", "causal")   # which keys a token attends to (core/encoder/model.py)
PRECISIONS = ("fp32", "bf16")         # what a model runs its embeddings in (core/device.py)
PRECISION_CHOICES = ("auto", *PRECISIONS)   # what a user may ask for; auto: bf16 where native
MASK = "[MASK]"                       # what a user types where fill-mask should guess a word (any case)
ATTRIBUTION_METHODS = ("ig", "grad-x-input")   # integrated gradients, gradient x input (core/intervene/attribute.py)
IG_BASELINES = ("pad", "zero")        # the baseline's word embedding at every token but the specials
IG_STEPS = 32                         # Gauss-Legendre nodes of the integral by default
SWEEP_KINDS = ("resid", "heads", "ffn")   # what a patching sweep patches (core/intervene/patch_sweep.py)
