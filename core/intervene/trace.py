"""Causal tracing (Meng et al. 2022, "Locating and Editing Factual Associations in GPT"), for an encoder.

Corrupt: Gaussian noise on the word embeddings of chosen tokens (seeded; its std a stated multiple
of the std of the model's word-embedding table, 3 by default as in the paper), several noise
samples. Restore: put one clean hidden state back (the embeddings' output or one layer's output,
at one token) into the corrupted run and run the rest. Read: how much of the clean output comes
back, for the sentence vector (cosine with the clean vector) and, with a [MASK], p(token) there:
    recovered = (restored - corrupted) / (clean - corrupted),
each term averaged over the noise samples first (the paper averages probabilities the same way),
with the standard error of each share over the samples (recovered_se: what moves with the seed).
The noise is added to the word embeddings before the embedding LayerNorm (BERT and DistilBERT
normalise word + position embeddings), so the LayerNorm rescales it: unlike ROME's GPT-2, where it
lands in the residual stream as it is, a noise level here is not the size of what the first layer
sees. Without a masked-LM head the sentence vector alone is traced (p(token) needs one).
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
from core.intervene import readout, restore, way_to_b
from core.intervene.apply import encoder_of
from core.intervene.edges import token_position
from core.intervene.restore import clean_run, resid_variants, rows_per_batch, run_from

NOISE_MULTIPLE = 3.0      # Meng et al.: noise std 3x the std of the subject tokens' embeddings
SAMPLES = 10              # Meng et al. average over 10 noise samples
FLOOR_TIMES = 10.0        # a corruption must move the vector this many times further than rounding


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
    recovered_se: np.ndarray | None = None   # (rows, cols): standard error of `recovered` over the samples
    p_recovered_se: np.ndarray | None = None  # (rows, cols): the same for p_recovered

    def to_dict(self) -> dict:
        out = {"tokens": self.tokens, "corrupted": self.corrupted, "rows": self.rows, "cols": self.cols,
               "recovered": np.round(self.recovered, 6).tolist(),
               "recovered_is": "(cos(restored, clean) - cos(corrupted, clean)) / (1 - cos(corrupted, clean)), "
                               "cosines averaged over the noise samples",
               "cosine_restored": np.round(self.cosine_restored, 6).tolist(),
               "cosine_corrupted": self.cosine_corrupted, "noise_multiple": self.noise_multiple,
               "noise_std": self.noise_std, "samples": self.samples, "seed": self.seed,
               "pooling": self.pooling, "precision": self.precision, "resampled_from": self.resampled_from,
               "recovered_se": _rounded(self.recovered_se),
               "se_is": "standard error of each share over the noise samples (ratio of means, delta method): "
                        "about what another seed moves it by; null with one sample"}
        if self.p_restored is not None:
            out.update({"target": self.target, "mask_position": self.mask_position, "p_clean": self.p_clean,
                        "p_corrupted": self.p_corrupted, "p_restored": np.round(self.p_restored, 6).tolist(),
                        "p_recovered": (None if self.p_recovered is None
                                        else np.round(self.p_recovered, 6).tolist()),
                        "p_recovered_se": _rounded(self.p_recovered_se)})
        return out


def _rounded(a):
    return None if a is None else np.round(a, 6).tolist()


def spread(restored: np.ndarray, corrupted: np.ndarray, clean: float) -> np.ndarray | None:
    """Standard error over the samples of a recovered share, restored (samples, rows, cols) and
    corrupted (samples,) per sample: the share is a ratio of means, mean(restored - corrupted) /
    mean(clean - corrupted), and its error the ratio estimator's (delta method), so a cell that
    restores the clean run in every sample has none. None with one sample."""
    n = restored.shape[0]
    if n < 2:
        return None
    d = restored - corrupted[:, None, None]
    g = clean - corrupted
    share = d.mean(0) / g.mean()
    return (d - share[None] * g[:, None, None]).std(axis=0, ddof=1) / np.sqrt(n) / abs(g.mean())


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


NOISE_BYTES = 1 << 30     # the noise of every sample is drawn at once (one seeded stream)


def samples_per_chunk(cfg, T: int, samples: int) -> int:
    """Corrupted runs kept at once: their L + 1 hidden states within one batch's memory."""
    return max(1, min(samples, rows_per_batch(cfg, T),
                      restore.BATCH_ELEMENTS // (T * cfg.dim * (cfg.n_layers + 1))))


def _sample_groups(chunk: range, T: int, rows: int):
    """(samples, token positions) of each batch: whole samples when a batch holds all T
    positions of at least one, else one sample's positions a slice at a time."""
    if rows >= T:
        per = rows // T
        for s in range(chunk.start, chunk.stop, per):
            yield list(range(s, min(chunk.stop, s + per))), list(range(T))
    else:
        for s in chunk:
            for t in range(0, T, rows):
                yield [s], list(range(t, min(T, t + rows)))


def _token_batches(n_samples: int, T: int, rows: int) -> list:
    return list(_sample_groups(range(n_samples), T, rows))


def _stop_if_cancelled(cancel) -> None:
    if cancel is not None and cancel():
        raise Cancelled("causal trace cancelled")


def _rounding_gap(backend, encoder, ids: list[int], samples: int, pooling: str, v_clean) -> float:
    """1 - cos(clean vector, the clean sentence run as the corrupted batch runs, with zero noise):
    how far rounding alone moves the vector (the batch's kernels differ from one sentence's)."""
    n_layers = encoder.config.n_layers
    zero = torch.zeros(samples, len(ids), encoder.config.dim, device=v_clean.device)
    same = clean_run(encoder, torch.tensor([ids] * samples, device=v_clean.device), word_noise=zero)
    v = readout.unit_vectors(backend, run_from(encoder, n_layers, same[n_layers]), pooling)
    return max(float(1.0 - readout.cosine(v, v_clean).mean()), 0.0)


def causal_trace(backend, text: str, corrupt: list[str], noise: float = NOISE_MULTIPLE, samples: int = SAMPLES,
                 seed: int = 0, target: str | None = None, pooling: str | None = None,
                 progress=None, cancel=None, resample: str | None = None) -> TraceResult:
    """Trace ``text`` with the tokens ``corrupt`` (words of it, or positions) noised, or with
    ``resample`` given, given that sentence's word embeddings at those positions.
    progress(done, total) in batches of restored runs; cancel() between them (Cancelled). The
    batches are sized by memory (core.intervene.restore.rows_per_batch), so any sample count runs in bounded memory."""
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
    if target is not None:
        readout.need_mlm(backend, "p(token) at the mask")
    if not backend.has_mlm:
        mask_at = None          # the sentence vector is traced; p(token) needs a masked-LM head
    L, T, D = encoder.config.n_layers, len(ids), encoder.config.dim
    std = noise * embedding_std(encoder)
    dev = backend.device
    if resample is None:
        if samples * T * D * 4 > NOISE_BYTES:
            raise InputError(f"at most {NOISE_BYTES // (T * D * 4):,} noise samples for a sentence of {T} tokens "
                             f"on this model (their noise alone would take over {NOISE_BYTES >> 30} GiB), not "
                             f"{samples:,}")
        eps = trace_noise((samples, T, D), positions, std, seed).to(dev)
    else:
        other = backend.encode_ids([resample])[0][0]
        if len(other) == len(ids) and all(other[p] == ids[p] for p in positions):
            shown = " ".join(tokens[p] for p in positions)
            raise InputError(f"the sentence to resample from has the same tokens at the corrupted positions "
                             f"({shown}): resampling changes nothing, so there is nothing to recover; give one "
                             "with other words there")
        eps, samples, std, noise = resample_shift(backend, ids, resample, positions), 1, 0.0, 0.0
    per_chunk = samples_per_chunk(encoder.config, T, samples)
    chunks = [range(s, min(samples, s + per_chunk)) for s in range(0, samples, per_chunk)]
    t_ids = torch.tensor([ids], device=dev)

    def corrupted_states(chunk):
        return clean_run(encoder, t_ids.expand(len(chunk), -1), word_noise=eps[chunk.start:chunk.stop])

    with torch.inference_mode(), autocast(dev, backend.precision):
        clean = clean_run(encoder, t_ids)
        clean_end = run_from(encoder, L, clean[L])
        token_id = p_clean = p_corr = v_clean = None
        # the corrupted runs' outputs first (a chunk of samples at a time): is there anything to recover?
        # The clean output is read in one batch with the first chunk's, as the restored runs are read
        # in batches: the same kernels for both (a restored run equal to the clean one reads equal).
        cos_each = np.zeros(samples)                                   # per sample: the spread needs them
        p_each = np.zeros(samples) if mask_at is not None else None
        kept = None
        for chunk in chunks:
            _stop_if_cancelled(cancel)
            states = corrupted_states(chunk)
            kept = states if len(chunks) == 1 else None       # one chunk: reused below, not run again
            end = run_from(encoder, L, states[L])
            first = v_clean is None
            ends = torch.cat([clean_end, end]) if first else end
            v = readout.unit_vectors(backend, ends, pooling)
            if first:
                v_clean, v = v[:1], v[1:]
            cos_each[chunk.start:chunk.stop] = readout.cosine(v, v_clean).double().cpu().numpy()
            if mask_at is not None:
                if first:
                    token_id = readout.guessed_token(backend, target, ends[:1], mask_at)     # the clean guess
                p = readout.mask_probability(backend, ends, mask_at, token_id).double()
                if first:
                    p_clean, p = float(p[0]), p[1:]
                p_each[chunk.start:chunk.stop] = p.cpu().numpy()
        cos_corr = float(cos_each.mean())
        floor = _rounding_gap(backend, encoder, ids, len(chunks[0]), pooling, v_clean)
        if 1.0 - cos_corr <= max(way_to_b.NO_GAP, FLOOR_TIMES * floor):
            raise InputError(f"the corruption moves the sentence vector (cosine with the clean one {cos_corr:.8f}) "
                             f"no further than rounding at {backend.precision} does (the clean sentence run the same "
                             f"way: {1.0 - floor:.8f}): nothing to recover that can be measured; raise the noise "
                             f"level (now {noise:g} x the embeddings' std; default {NOISE_MULTIPLE:g}) or corrupt "
                             "other words")
        if mask_at is not None:
            p_corr = float(p_each.mean())
        # then every (layer, token) cell restored, in batches of at most rows_per_batch rows
        rows = rows_per_batch(encoder.config, T)
        cos_each_restored = np.zeros((samples, L + 1, T))
        p_each_restored = np.zeros((samples, L + 1, T)) if mask_at is not None else None
        pieces = [(chunk, index, tokens_batch) for chunk in chunks for index in range(L + 1)
                  for tokens_batch in _token_batches(len(chunk), T, rows)]
        done = 0
        for chunk in chunks:
            states = kept if kept is not None else corrupted_states(chunk)
            for index in range(L + 1):
                for group, cols in _sample_groups(chunk, T, rows):
                    _stop_if_cancelled(cancel)
                    variants = torch.cat([resid_variants(states[index][s - chunk.start:s - chunk.start + 1],
                                                         clean[index], cols) for s in group])
                    y = run_from(encoder, index, variants)
                    cos = readout.cosine(readout.unit_vectors(backend, y, pooling), v_clean)
                    cos_each_restored[group[0]:group[-1] + 1, index, cols[0]:cols[-1] + 1] = (
                        cos.view(len(group), len(cols)).double().cpu().numpy())
                    if mask_at is not None:
                        p = readout.mask_probability(backend, y, mask_at, token_id)
                        p_each_restored[group[0]:group[-1] + 1, index, cols[0]:cols[-1] + 1] = (
                            p.view(len(group), len(cols)).double().cpu().numpy())
                    done += 1
                    if progress is not None:
                        progress(done, len(pieces))
    cos_restored = cos_each_restored.mean(0)
    result = TraceResult(
        tokens, positions, ["emb"] + [f"L{i + 1}" for i in range(L)], list(tokens),
        readout.fraction_toward(torch.from_numpy(cos_restored), cos_corr, 1.0).numpy(),
        cos_restored, cos_corr, noise, std, samples, seed, pooling, backend.precision, resampled_from=resample,
        recovered_se=spread(cos_each_restored, cos_each, 1.0))
    if mask_at is not None:
        p_restored = p_each_restored.mean(0)
        result.target = backend.tokenizer.convert_ids_to_tokens(token_id)
        result.mask_position, result.p_clean, result.p_corrupted = mask_at, p_clean, p_corr
        result.p_restored = p_restored
        if abs(p_clean - p_corr) > 1e-12:       # else the corruption left p as it was: no share to show
            result.p_recovered = readout.fraction_toward(torch.from_numpy(p_restored), p_corr, p_clean).numpy()
            result.p_recovered_se = spread(p_each_restored, p_each, p_clean)
    return result
