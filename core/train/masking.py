"""BERT's masking recipe for masked-LM training.

Pick ``prob`` (15%) of the ordinary tokens of each batch; of those, 80% become [MASK], 10% a
random ordinary token, 10% stay as they are. The model must predict the original token at every
picked position (label = the original id); everywhere else the label is -100 (ignored by the loss).
Special tokens ([CLS], [SEP], [PAD], [UNK], [MASK]) are never picked.

Why not always [MASK]? [MASK] never appears at inference time; the 10% random / 10% kept
positions make the model produce a good prediction for *every* token, not just masked ones.
"""
from __future__ import annotations

import torch

IGNORE = -100   # label value the cross-entropy loss skips


def special_mask(input_ids: torch.Tensor, special_ids) -> torch.Tensor:
    """(B, T) bool: True where the token is one of ``special_ids``."""
    ids = torch.as_tensor(sorted(set(int(i) for i in special_ids)), dtype=input_ids.dtype,
                          device=input_ids.device)
    return torch.isin(input_ids, ids)


def mask_tokens(input_ids: torch.Tensor, special: torch.Tensor, mask_id: int, vocab_size: int,
                prob: float = 0.15, generator: torch.Generator | None = None,
                random_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids (B, T) -> (corrupted inputs (B, T), labels (B, T)).

    special: (B, T) bool, True for positions never to pick (specials and padding).
    random_ids: the ids a "random" replacement draws from (default: all of 0..vocab_size-1);
        pass the non-special ids so a replacement is never [CLS] or [PAD].
    generator: a CPU torch.Generator for reproducible masks (all draws happen on the CPU).
    At least one position per batch is picked whenever the batch has an ordinary token.
    """
    ids = input_ids.cpu()
    special = special.cpu()
    labels = ids.clone()
    probs = torch.full(ids.shape, prob)
    probs.masked_fill_(special, 0.0)
    picked = torch.bernoulli(probs, generator=generator).bool()
    if not picked.any() and (~special).any():
        # A tiny batch can draw no position at all; pick one so the step has a loss.
        candidates = (~special).flatten().nonzero().squeeze(1)
        choice = candidates[torch.randint(len(candidates), (1,), generator=generator)]
        picked.view(-1)[choice] = True
    labels[~picked] = IGNORE

    inputs = ids.clone()
    to_mask = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & picked
    inputs[to_mask] = mask_id
    # Half of the remaining 20%: a random token.
    to_random = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & picked & ~to_mask
    n = int(to_random.sum())
    if n:
        if random_ids is None:
            repl = torch.randint(vocab_size, (n,), generator=generator)
        else:
            repl = random_ids[torch.randint(len(random_ids), (n,), generator=generator)]
        inputs[to_random] = repl.to(inputs.dtype)
    # The last 10% keep their original token.
    return inputs.to(input_ids.device), labels.to(input_ids.device)
