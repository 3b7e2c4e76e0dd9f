"""Causal tracing (Meng et al. 2022, "Locating and Editing Factual Associations in GPT"), for an encoder.

Corrupt: Gaussian noise on the word embeddings of chosen tokens (seeded; its std a stated multiple
of the std of the model's word-embedding table, 3 by default as in the paper), several noise
samples. Restore: put one clean hidden state back (the embeddings' output or one layer's output,
at one token) into the corrupted run and run the rest. Read: how much of the clean output comes
back, for the sentence vector (cosine with the clean vector) and, with a [MASK], p(token) there:
    recovered = (restored - corrupted) / (clean - corrupted),
each term averaged over the noise samples first (the paper averages probabilities the same way).
Or corrupt by resampling: the chosen tokens get the word embeddings another sentence (of the same
length) has at those positions, one deterministic "sample".
Every (layer, token) cell of one layer runs as one stacked batch (core/intervene/restore.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from core.device import autocast
from core.errors import Cancelled, InputError
from core.intervene import readout
from core.intervene.apply import encoder_of
from core.intervene.edges import token_position
from core.intervene.restore import clean_run, resid_variants, run_from

NOISE_MULTIPLE = 3.0      # Meng et al.: noise std 3x the std of the subject tokens' embeddings
SAMPLES = 10              # Meng et al. average over 10 noise samples


@dataclass
class TraceResult:
    tokens: list
    corrupted: list            # positions whose embeddings got noise
    rows: list                 # "emb", "L1" ... "LL": the hidden state restored
    cols: list                 # the tokens
    recovered: np.ndarray      # (rows, cols): share of the clean vector's cosine recovered
    cosine_restored: np.ndarray  # (rows, cols): mean cosine of the restored run's vector with the clean one
    cosine_corrupted: float    # mean cosine of the corrupted run's vector with the clean one
    noise_multiple: float
    noise_std: float           # the absolute std of the noise
    samples: int
    seed: int
    pooling: str
    precision: str
    target: str | None = None
    mask_position: int | None = None
    p_clean: float | None = None
    p_corrupted: float | None = None
    p_restored: np.ndarray | None = None     # (rows, cols): mean p(target) restored
    p_recovered: np.ndarray | None = None    # (rows, cols): (p_restored - p_corrupted) / (p_clean - p_corrupted)
    resampled_from: str | None = None        # the sentence whose word embeddings replaced the noise

    def to_dict(self) -> dict:
        out = {"tokens": self.tokens, "corrupted": self.corrupted, "rows": self.rows, "cols": self.cols,
               "recovered": np.round(self.recovered, 6).tolist(),
               "recovered_is": "(cos(restored, clean) - cos(corrupted, clean)) / (1 - cos(corrupted, clean)), "
                               "cosines averaged over the noise samples",
               "cosine_restored": np.round(self.cosine_restored, 6).tolist(),
               "cosine_corrupted": self.cosine_corrupted, "noise_multiple": self.noise_multiple,
               "noise_std": self.noise_std, "samples": self.samples, "seed": self.seed,
               "pooling": self.pooling, "precision": self.precision, "resampled_from": self.resampled_from}
        if self.p_restored is not None:
            out.update({"target": self.target, "mask_position": self.mask_position, "p_clean": self.p_clean,
                        "p_corrupted": self.p_corrupted, "p_restored": np.round(self.p_restored, 6).tolist(),
                        "p_recovered": (None if self.p_recovered is None
                                        else np.round(self.p_recovered, 6).tolist())})
        return out


def word_positions(word: str, tokens: list[str]) -> list[int]:
    """The positions of ``word`` in the tokens: a position (digits), a token that occurs once, or a
    word made of several WordPiece pieces ("eiffel" = e ##iff ##el) that occurs once."""
    text = str(word).strip()
    if text.isdigit() or any(t.lower().removeprefix("##") == text.lower() for t in tokens):
        return [token_position(text, tokens)]
    words, spans = [], []
    for i, t in enumerate(tokens):
        if t.startswith("##") and spans:
            words[-1] += t[2:]
            spans[-1].append(i)
        else:
            words.append(t)
            spans.append([i])
    hits = [span for w, span in zip(words, spans) if w.lower() == text.lower()]
    if len(hits) != 1:
        raise InputError(f"the word {text!r} occurs {len(hits)} times in the sentence ({' '.join(tokens)}): "
                         "name a word that occurs once, or give positions (0 = [CLS])")
    return hits[0]


def resample_shift(backend, ids: list[int], other: str, positions: list[int]) -> torch.Tensor:
    """(1, T, D): what turns the word embeddings at ``positions`` into ``other``'s at the same
    positions (zero elsewhere): added like noise, it resamples those tokens from ``other``."""
    other_ids = backend.encode_ids([other])[0][0]
    if len(other_ids) != len(ids):
        raise InputError(f"the sentence to resample from has {len(other_ids)} tokens and this one {len(ids)}: "
                         "give one of the same length (a word changed), or corrupt with noise")
    emb = encoder_of(backend).embeddings
    with torch.no_grad():
        t = torch.tensor([ids, other_ids], device=emb.word_table.device)
        words = emb.words(t).float()
    shift = torch.zeros_like(words[:1])
    shift[0, positions] = words[1, positions] - words[0, positions]
    return shift


def embedding_std(encoder) -> float:
    """The std of every entry of the word-embedding table: the unit the noise level is stated in."""
    return float(encoder.embeddings.word_table.detach().float().std())


def trace_noise(shape: tuple, positions: list[int], std: float, seed: int) -> torch.Tensor:
    """(samples, T, D) Gaussian noise of std ``std`` at ``positions``, zero elsewhere; drawn on the
    CPU from ``seed`` so every device gets the same numbers."""
    g = torch.Generator().manual_seed(seed)
    noise = torch.randn(shape, generator=g) * std
    keep = torch.zeros(shape[1], dtype=torch.bool)
    keep[positions] = True
    return noise * keep[None, :, None]


def causal_trace(backend, text: str, corrupt: list[str], noise: float = NOISE_MULTIPLE, samples: int = SAMPLES,
                 seed: int = 0, target: str | None = None, pooling: str | None = None,
                 progress=None, cancel=None, resample: str | None = None) -> TraceResult:
    """Trace ``text`` with the tokens ``corrupt`` (words of it, or positions) noised, or with
    ``resample`` given, given that sentence's word embeddings at those positions.
    progress(done, total) in restored rows; cancel() between them (Cancelled)."""
    if not corrupt:
        raise InputError("name the tokens to corrupt: words of the sentence or positions (e.g. cat)")
    if not noise > 0:
        raise InputError(f"the noise level is a multiple of the embeddings' std above 0, not {noise!r}")
    if samples < 1:
        raise InputError("at least one noise sample")
    encoder = encoder_of(backend)
    pooling = backend.choose_pooling(pooling)
    ids = backend.encode_ids([text])[0][0]
    tokens = backend.tokenizer.convert_ids_to_tokens(ids)
    positions = sorted({p for w in corrupt for p in word_positions(w, tokens)})
    mask_at = readout.mask_position(backend, ids)
    if target is not None and mask_at is None:
        raise InputError("a target word is read at the [MASK]: put [MASK] in the sentence")
    if mask_at is not None:
        readout.need_mlm(backend, "p(token) at the mask")
    L, T, D = encoder.config.n_layers, len(ids), encoder.config.dim
    std = noise * embedding_std(encoder)
    dev = backend.device
    if resample is None:
        eps = trace_noise((samples, T, D), positions, std, seed).to(dev)
    else:
        eps, samples, std, noise = resample_shift(backend, ids, resample, positions), 1, 0.0, 0.0
    with torch.inference_mode(), autocast(dev, backend.precision):
        clean = clean_run(encoder, torch.tensor([ids], device=dev))
        corrupted = clean_run(encoder, torch.tensor([ids] * samples, device=dev), word_noise=eps)
        ends = torch.cat([run_from(encoder, L, clean[L]), run_from(encoder, L, corrupted[L])])
        v = readout.unit_vectors(backend, ends, pooling)
        v_clean = v[:1]
        cos_corr = float(readout.cosine(v[1:], v_clean).mean())
        if 1.0 - cos_corr <= 1e-12:
            raise InputError("the corruption leaves the sentence vector as it was: nothing to recover; "
                             "raise the noise level or corrupt other words")
        token_id = p_clean = p_corr = None
        if mask_at is not None:
            token_id = readout.guessed_token(backend, target, ends[:1], mask_at)     # the clean guess
            p = readout.mask_probability(backend, ends, mask_at, token_id)
            p_clean, p_corr = float(p[0]), float(p[1:].mean())
        cos_rows, p_rows = [], []
        for index in range(L + 1):
            if cancel is not None and cancel():
                raise Cancelled("causal trace cancelled")
            variants = torch.cat([resid_variants(corrupted[index][s:s + 1], clean[index], list(range(T)))
                                  for s in range(samples)])                  # (samples * T, T, D)
            y = run_from(encoder, index, variants)
            cos_rows.append(readout.cosine(readout.unit_vectors(backend, y, pooling), v_clean)
                            .view(samples, T).mean(0).cpu().numpy())
            if mask_at is not None:
                p_rows.append(readout.mask_probability(backend, y, mask_at, token_id)
                              .view(samples, T).mean(0).double().cpu().numpy())
            if progress is not None:
                progress(index + 1, L + 1)
    cos_restored = np.stack(cos_rows)
    result = TraceResult(
        tokens, positions, ["emb"] + [f"L{i + 1}" for i in range(L)], list(tokens),
        readout.fraction_toward(torch.from_numpy(cos_restored), cos_corr, 1.0).numpy(),
        cos_restored, cos_corr, noise, std, samples, seed, pooling, backend.precision, resampled_from=resample)
    if mask_at is not None:
        p_restored = np.stack(p_rows)
        result.target = backend.tokenizer.convert_ids_to_tokens(token_id)
        result.mask_position, result.p_clean, result.p_corrupted = mask_at, p_clean, p_corr
        result.p_restored = p_restored
        if abs(p_clean - p_corr) > 1e-12:       # else the corruption left p as it was: no share to show
            result.p_recovered = readout.fraction_toward(torch.from_numpy(p_restored), p_corr, p_clean).numpy()
    return result
