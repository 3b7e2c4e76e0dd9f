"""Next-token prediction (the `clm` objective): under the causal mask, position t predicts token t+1.

    [CLS] the cat sat [SEP] [PAD]        inputs
    the   cat sat  -    -     -          labels: the next token; -100 (ignored) where there is none

Padding predicts nothing, and special tokens are never targets: the last real token, [SEP], only
closes the sentence and has nothing after it (and, as in masked-LM, the unigram baseline scores
ordinary tokens only). The labels go to the same LM head and cross-entropy as masked-LM's
(core/train/masking.py's IGNORE); only the targets differ: what comes next instead of what was hidden.
"""
from __future__ import annotations

import torch

from core.train.masking import IGNORE


def next_token_labels(input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      special: torch.Tensor | None = None) -> torch.Tensor:
    """(B, T) ids, 1/0 mask and (optional) bool special-token mask -> (B, T) labels:
    ids[t + 1] where token t + 1 is real and not special, else IGNORE."""
    target = attention_mask[:, 1:].bool()
    if special is not None:
        target = target & ~special[:, 1:]
    labels = torch.full_like(input_ids, IGNORE)
    labels[:, :-1] = input_ids[:, 1:].masked_fill(~target, IGNORE)
    return labels
