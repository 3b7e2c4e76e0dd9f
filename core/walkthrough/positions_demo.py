"""Why encoders need positions, and what pooling does: the walkthrough's two special views.

- ``positions_view``: the sinusoidal table with its wavelengths, the loaded model's learned
  table (if it has one), and how similar each position is to every other (cosine).
- ``permutation_demo``: shuffle the words of a sentence. Without positions, attention cannot
  tell the orders apart: its output for the shuffled sentence is the original's rows in the
  shuffled order (equal to fp32 rounding). With positions it is not. Run on the loaded model.
- ``pooling_comparison``: CLS vs mean vs max sentence vectors and, given a second sentence,
  the cosine each pooling gives.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.encoder import sites
from core.encoder.pooling import POOLINGS
from core.errors import InputError
from core.walkthrough import numpy_ref as nr


@dataclass
class PositionsView:
    n_positions: int                  # rows shown (positions 0 … n_positions − 1)
    model_positions: str              # what the loaded model uses: "learned" or "sinusoidal"
    sinusoidal: np.ndarray            # (n_positions, D) sin/cos table
    wavelengths: np.ndarray           # (D,) wavelength in positions of each column: 2π·10000^(2i/D)
    sinusoidal_cosine: np.ndarray     # (n_positions, n_positions) cosine of position rows
    learned: np.ndarray | None        # (n_positions, D) the model's learned rows, None if sinusoidal
    learned_cosine: np.ndarray | None  # (n_positions, n_positions), None if sinusoidal


@dataclass
class PermutationDemo:
    tokens: list                      # the sentence's tokens
    shuffled_tokens: list             # the same tokens, words shuffled, specials in place
    permutation: list                 # shuffled position i holds original token permutation[i]
    layer: int                        # 0-based layer whose attention output is compared
    without_positions_diff: float     # max |att(shuffled) − att(original)[perm]|, positions removed
    with_positions_diff: float        # the same with the model's positions
    without_positions: tuple          # (att(original), att(shuffled)), each (T, D)
    with_positions: tuple             # (att(original), att(shuffled)), each (T, D)


@dataclass
class PoolingComparison:
    poolings: tuple                   # ("mean", "cls", "max"), and "attention" for a model trained with it
    vectors: dict                     # pooling -> (D,) unit vector of the sentence
    other_vectors: dict               # pooling -> (D,) unit vector of the second sentence (or empty)
    cosines: dict                     # pooling -> cosine between the two sentences (or empty)


def cosine_matrix(rows: np.ndarray) -> np.ndarray:
    """Cosine similarity of every row with every row."""
    unit = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return unit @ unit.T


def sinusoidal_wavelengths(dim: int) -> np.ndarray:
    """Column 2i and 2i+1 repeat every 2π·10000^(2i/D) positions: from 2π to ~62,800."""
    two_i = np.arange(dim) // 2 * 2
    return 2 * np.pi * 10000.0 ** (two_i / dim)


def positions_view(backend, n_positions: int = 64) -> PositionsView:
    from core.walkthrough.steps import reference_backend
    ref, _ = reference_backend(backend)
    cfg = ref.config
    n = max(1, min(n_positions, cfg.max_position_embeddings))
    table = nr.sinusoidal_positions(n, cfg.dim)
    learned = None
    if cfg.positions == "learned":
        learned = ref.encoder.embeddings.position_table[:n].detach().cpu().double().numpy()
    return PositionsView(n_positions=n, model_positions=cfg.positions, sinusoidal=table,
                         wavelengths=sinusoidal_wavelengths(cfg.dim), sinusoidal_cosine=cosine_matrix(table),
                         learned=learned, learned_cosine=None if learned is None else cosine_matrix(learned))


def shuffle_words(tokens: list, special: list, seed: int = 0) -> list:
    """A permutation of the non-special positions (specials stay where they are) that changes
    the token order; InputError when no order change is possible."""
    movable = [i for i, s in enumerate(special) if not s]
    if len({tokens[i] for i in movable}) < 2:
        raise InputError("the permutation demo needs at least two different words to shuffle")
    rng = np.random.default_rng(seed)
    while True:                                  # a shuffle that changes the order: ≥ 1/2 of them
        order = rng.permutation(movable)
        perm = list(range(len(tokens)))
        for i, j in zip(movable, order):
            perm[i] = int(j)
        if [tokens[j] for j in perm] != tokens:
            return perm


def _attention_output(encoder, ids, layer: int, positions: bool) -> np.ndarray:
    """The attention sublayer's output (the site Lk.attn) in ``layer`` for one sequence, optionally
    with the position vectors replaced by zeros (an edit of the site ``positions``)."""
    with sites.hooks(encoder) as at:      # only this thread's forward (another job may share the model)
        got = at.capture(sites.site_name("attn", layer))
        if not positions:
            at.edit("positions", torch.zeros_like)
        with torch.inference_mode():
            input_ids = torch.tensor([ids])
            encoder(input_ids, torch.ones_like(input_ids))
    return got.value[0].double().numpy()


def permutation_demo(backend, text: str, seed: int = 0, layer: int = 0) -> PermutationDemo:
    from core.walkthrough.steps import check_choice, reference_backend, tokenize
    ref, _ = reference_backend(backend)
    check_choice(ref.config, layer, 0, "mean")
    ids, _, _ = tokenize(ref, text)
    tokens = ref.tokenizer.convert_ids_to_tokens(ids)
    special = ref.tokenizer.get_special_tokens_mask(ids, already_has_special_tokens=True)
    perm = shuffle_words(tokens, special, seed)
    shuffled = [ids[j] for j in perm]
    results = {}
    with ref._lock:
        for positions in (False, True):
            original = _attention_output(ref.encoder, ids, layer, positions)
            moved = _attention_output(ref.encoder, shuffled, layer, positions)
            results[positions] = (original, moved, float(np.abs(moved - original[perm]).max()))
    return PermutationDemo(tokens=tokens, shuffled_tokens=[tokens[j] for j in perm], permutation=perm,
                           layer=layer, without_positions_diff=results[False][2],
                           with_positions_diff=results[True][2],
                           without_positions=results[False][:2], with_positions=results[True][:2])


def pooling_comparison(backend, text: str, other: str | None = None) -> PoolingComparison:
    """Each pooling's unit vector for ``text`` (and ``other``), from the selected backend."""
    texts = [text] if other is None or not other.strip() else [text, other]
    vectors, others, cosines = {}, {}, {}
    # attention pooling only where the model learned its query
    poolings = tuple(p for p in POOLINGS if p != "attention" or backend.pooling_query is not None)
    for pooling in poolings:
        vecs = backend.embed(texts, pooling=pooling).astype(np.float64)
        vectors[pooling] = vecs[0]
        if len(vecs) == 2:
            others[pooling] = vecs[1]
            cosines[pooling] = float(vecs[0] @ vecs[1])
    return PoolingComparison(poolings=poolings, vectors=vectors, other_vectors=others, cosines=cosines)
