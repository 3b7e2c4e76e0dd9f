"""A batch of two: what the padding mask does, on the model's real numbers.

Two sentences run as one batch: the shorter is padded with [PAD] to the longer's length, and the
attention mask keeps every query from reading a padded key. Shown for one layer and head:

* the masked scores, ``−∞`` at every padded key (the torch encoder adds the most negative float;
  softmax gives both exactly 0);
* the weights after softmax: 0 at every padded key, each row still summing to 1;
* the proof that padding changed nothing real: every real token's final vector in the batch
  equals the same sentence run alone (max |Δ|), and the batch's weights equal the torch
  encoder's own (max |Δ|).

The batch runs through ``core.walkthrough.numpy_ref`` (float64, the same functions as the walkthrough) and is
checked against the torch encoder (a float64 copy): once as the same padded batch, once for each
sentence alone. Qt-free.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.errors import InputError
from core.walkthrough import numpy_ref as nr


@dataclass
class BatchOfTwo:
    texts: tuple                  # (first, second) as typed
    tokens: list                  # two lists of T labels each: the sentence's tokens, then [PAD]s
    lengths: list                 # real tokens of each sentence (specials included)
    attention_mask: np.ndarray    # (2, T) int: 1 = a real token, 0 = padding
    layer: int                    # 0-based layer shown
    head: int                     # 0-based head shown
    scores: np.ndarray            # (2, T, T) the head's Q Kᵀ / √Dh in the batch, before the mask
    masked_scores: np.ndarray     # (2, T, T) the same with −∞ at every padded key
    weights: np.ndarray           # (2, T, T) softmax of the masked scores
    weights_max_abs_diff: float   # |these weights − the torch encoder's on the same batch|, largest
    padded_weight_max: float      # the largest weight any query gives a padded key (0 exactly)
    hidden_batched: np.ndarray    # (2, T, D) final token vectors of the batch (NumPy, float64)
    hidden_alone: list            # each sentence run alone by the torch encoder: (T_i, D) float64
    real_max_abs_diff: float      # |batched − alone| over every real token, largest
    note: str = ""                # when the steps run on another backend than the one given

    @property
    def padded(self) -> int:
        """Which sentence was padded (the shorter; 1 when they are as long)."""
        return int(np.argmin(self.lengths)) if self.lengths[0] != self.lengths[1] else 1

    @property
    def n_padding(self) -> int:
        return int(max(self.lengths) - min(self.lengths))


def encode_pair(backend, first: str, second: str) -> tuple[list, list]:
    """The two sentences' ids (specials included), each cut to the model's length."""
    if not first.strip() or not second.strip():
        raise InputError("a batch of two needs two sentences: type one in Text and one in Second")
    ids, _cut = backend.encode_ids([first, second])
    return ids[0], ids[1]


def padded_batch(ids_a, ids_b, pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(2, T) ids with the shorter padded by ``pad_id``, and the (2, T) 1/0 attention mask."""
    T = max(len(ids_a), len(ids_b))
    ids = np.full((2, T), pad_id, dtype=np.int64)
    mask = np.zeros((2, T), dtype=np.int64)
    for row, x in enumerate((ids_a, ids_b)):
        ids[row, : len(x)] = x
        mask[row, : len(x)] = 1
    return ids, mask


def head_scores(p: dict, cfg, x: np.ndarray, layer: int, head: int) -> np.ndarray:
    """The head's scaled scores Q Kᵀ / √Dh of one sequence, from the layer's input ``x`` (T, D)."""
    name = f"transformer.layer.{layer}"
    if cfg.norm == "pre":
        x = nr.layer_norm(x, p[f"{name}.sa_layer_norm.weight"], p[f"{name}.sa_layer_norm.bias"], cfg.layer_norm_eps)
    q = nr.split_heads(nr.linear(x, p, f"{name}.attention.q_lin"), cfg.n_heads)[head]
    k = nr.split_heads(nr.linear(x, p, f"{name}.attention.k_lin"), cfg.n_heads)[head]
    return nr.attention_scores(q, k)


def explain_batch(backend, first: str, second: str, layer: int = 0, head: int = 0) -> BatchOfTwo:
    """Run ``first`` and ``second`` as one padded batch; layer and head 0-based."""
    from core.walkthrough.capture import float64_copy
    from core.walkthrough.steps import check_choice, reference_backend
    ref, note = reference_backend(backend)
    cfg = ref.config
    check_choice(cfg, layer, head, "mean")
    ids_a, ids_b = encode_pair(ref, first, second)
    pad_id = ref.model_tokenizer.pad_token_id or 0
    ids, mask = padded_batch(ids_a, ids_b, pad_id)
    with ref._lock:
        exact = float64_copy(ref.encoder)
    p = {k: t.numpy() for k, t in exact.state_dict().items()}
    keep = mask.astype(bool)
    scores, weights, hidden = [], [], []
    for row in range(2):
        last, states, attentions = nr.forward(p, cfg, ids[row], keep=keep[row])
        scores.append(head_scores(p, cfg, states[layer], layer, head))
        weights.append(attentions[layer][head])
        hidden.append(last)
    scores, weights, hidden = np.stack(scores), np.stack(weights), np.stack(hidden)
    masked = np.where(keep[:, None, :], scores, -np.inf)
    # The float64 copy is shared: a walk's capture hooks on it (under ref._lock) would record
    # this batch's tensors as its own steps if this forward ran beside it.
    with ref._lock, torch.inference_mode():
        out = exact(torch.from_numpy(ids), torch.from_numpy(mask), None, False, True)
        torch_weights = out.attentions[layer][:, head].numpy()
        alone = [exact(torch.tensor([x]), torch.ones(1, len(x), dtype=torch.long), None).last_hidden_state[0].numpy()
                 for x in (ids_a, ids_b)]
    real = max(float(np.abs(hidden[row, : len(x)] - alone[row]).max()) for row, x in enumerate((ids_a, ids_b)))
    tokens = [ref.tokenizer.convert_ids_to_tokens(list(row)) for row in ids]
    pad_label = ref.tokenizer.pad_token or "[PAD]"
    tokens = [[t if keep[r, i] else pad_label for i, t in enumerate(row)] for r, row in enumerate(tokens)]
    return BatchOfTwo(texts=(first, second), tokens=tokens, lengths=[len(ids_a), len(ids_b)],
                      attention_mask=mask, layer=layer, head=head, scores=scores, masked_scores=masked,
                      weights=weights, weights_max_abs_diff=float(np.abs(weights - torch_weights).max()),
                      padded_weight_max=float(np.where(keep[:, None, :], 0.0, weights).max()),
                      hidden_batched=hidden, hidden_alone=alone, real_max_abs_diff=real, note=note)
