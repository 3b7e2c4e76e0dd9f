"""How good an SAE is, on held-out sentences, the way the SAE papers report it, with 95 %
intervals (a seeded bootstrap over sentences) and floors (what the site replaced by its mean,
or by zero, would score), so a learner sees what "good" means.

    report = evaluate_sae(backend, sae, meta, sentences)
    for row in report.rows: row.name, row.value, row.interval, row.floors

Rows: normalised MSE (the fraction of the activations' variance left unexplained; the mean floor
is 1 by definition), L0 (active features per token), dead and dense fractions (features silent
on every held-out token; firing on more than DENSE_ABOVE of them), and two downstream numbers:
the sentence vector's cosine with the original when the site's tokens are replaced by their
reconstruction (spliced through the rest of the network), and recall@10 of searches with those
spliced vectors against the unspliced vectors of the whole corpus (the overlap of the spliced
query's top 10 with the clean query's). [CLS] and [SEP] keep their own activations when spliced:
the SAE never saw them.

The dead fraction has no bootstrap interval: a resample repeats sentences, sees fewer distinct
tokens and so more silent features, and its percentiles need not bracket the value (the dead
fraction falls as the tokens measured grow). What it gets instead:
* a bound (the rule of three): a feature silent on all N measured tokens fires on fewer than 3/N
  of such tokens, at 95 % (P(silent on N) = (1 - p)^N <= 0.05 means p < -ln 0.05 / N ~ 3/N);
* the row "dead at n/2 tokens": the measured tokens, in a seeded order of their sentences, cut into
  two disjoint halves of exactly N // 2 tokens each (HALF_ROUNDS orders); the value is the mean
  dead fraction of the halves, the interval mean +- 1.96 sd, the sd of one half-size sample's dead
  fraction estimated from the two disjoint halves of each order (E (a - b)^2 = 2 var, the halves
  being two independent samples of N // 2 tokens). That is the spread of the dead fraction at
  N/2 tokens, said at that size: at N tokens the fraction is lower, never higher, and the gap
  between the two rows shows how much more data would revive.

The held-out split is the training one (core/features/train.held_out_mask) when ``sentences``
are the training corpus; on another corpus every sentence is unseen, and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from core.device import autocast
from core.encoder.batch_input import input_tensors
from core.encoder.pooling import l2_normalize, pool
from core.errors import InputError
from core.features.collect import iter_activations, parse_feature_site, site_hooks, special_ids
from core.features.sae import SparseAutoencoder
from core.features.saved import SaeMeta, check_model
from core.features.train import corpus_hash, held_out_mask
from core.intervene.apply import encoder_of
from core.intervene.uncertainty import interval, resample_counts

DENSE_ABOVE = 0.1        # a feature firing on more than this fraction of tokens is "dense"
RECALL_K = 10
ROUNDS = 400             # bootstrap resamples
HALF_ROUNDS = 50         # seeded orders cut into two disjoint halves, for the dead fraction at n/2 tokens
RULE_OF_THREE = 2.995732273553991    # -ln(0.05): silent on N tokens => firing rate < this / N at 95 %


@dataclass
class QualityRow:
    name: str
    value: float
    interval: tuple | None          # (lo, hi) 95 %; None for the dead fraction (see the module docstring)
    floors: dict                    # {"mean": value or None, "zero": value or None}
    better: str                     # "lower" or "higher"
    meaning: str                    # one line for people
    bound: float | None = None      # the dead fraction's: each silent feature fires on < bound of tokens (95 %)

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "interval": self.interval, "floors": self.floors,
                "better": self.better, "meaning": self.meaning, "bound": self.bound}


@dataclass
class QualityReport:
    site: str
    split: str                      # "held-out" or "another corpus (every sentence unseen)"
    n_sentences: int                # sentences measured
    n_tokens: int
    rows: list = field(default_factory=list)

    def row(self, name: str) -> QualityRow:
        return next(r for r in self.rows if r.name == name)

    def to_dict(self) -> dict:
        return {"site": self.site, "split": self.split, "n_sentences": self.n_sentences,
                "n_tokens": self.n_tokens, "rows": [r.to_dict() for r in self.rows]}


def evaluate_sae(model, sae: SparseAutoencoder, meta: SaeMeta, sentences, max_sentences: int = 2000,
                 seed: int = 0, progress=None, should_stop=None, batch_size: int = 64) -> QualityReport:
    """The quality table of ``sae`` on ``sentences`` (see the module docstring). At most
    ``max_sentences`` held-out sentences are measured (a seeded choice); the search store is
    every sentence given."""
    check_model(meta, model)
    sentences = list(sentences)
    if not sentences:
        raise InputError("no sentences to measure the SAE on")
    same = meta.corpus_sha256 == corpus_hash(sentences) and meta.n_sentences == len(sentences)
    if same:
        ids = np.flatnonzero(held_out_mask(len(sentences), meta.held_out_fraction, meta.seed))
        split = "held-out"
    else:
        ids = np.arange(len(sentences))
        split = "another corpus (every sentence unseen)"
    if len(ids) == 0:
        raise InputError("no held-out sentences to measure on: the SAE was trained with a held-out fraction "
                         "of 0; give another corpus")
    if len(ids) > max_sentences:
        ids = np.sort(np.random.default_rng([seed, 7]).choice(ids, max_sentences, replace=False))
    held = [sentences[i] for i in ids]
    device = encoder_of(model).embeddings.word_table.device
    sae = sae.to(device)
    n = len(held)

    # -- the site: reconstruction error, L0, which features fire per sentence ------------------
    err = np.zeros(n)
    var_sum = np.zeros(n)           # sum over tokens of ||x||^2 and x, for the variance and the zero floor
    sq = np.zeros(n)
    sums = torch.zeros(n, sae.d_in, dtype=torch.float64)
    tokens = np.zeros(n)
    active = np.zeros(n)
    fired = np.zeros((n, sae.width), dtype=np.float32)     # tokens of each sentence each feature fires on
    token_sid, token_active = [], []                        # per token: its sentence, its active features
    for batch in iter_activations(model, held, meta.site, batch_size, should_stop=should_stop):
        with torch.inference_mode():
            x = batch.acts.to(device)
            x_hat, codes = sae(x)
        sid = batch.sentence_ids.cpu().numpy()
        e = (x_hat - x).double().pow(2).sum(-1).cpu().numpy()
        np.add.at(err, sid, e)
        np.add.at(sq, sid, x.double().pow(2).sum(-1).cpu().numpy())
        sums.index_add_(0, batch.sentence_ids.cpu(), x.double().cpu())
        np.add.at(tokens, sid, 1)
        np.add.at(active, sid, (codes > 0).sum(-1).cpu().numpy())
        np.add.at(fired, sid, (codes > 0).float().cpu().numpy())
        top = torch.topk(codes, min(sae.k, sae.width), dim=-1)
        token_active.append(torch.where(top.values > 0, top.indices, -1).cpu().numpy().astype(np.int32))
        token_sid.append(sid)
        if progress is not None:
            progress(int(sid.max()) + 1, n, "reconstructing held-out tokens")
    mean = (sums.sum(0) / max(1.0, tokens.sum())).numpy()
    counts = resample_counts(n, seed, ROUNDS)
    total_tokens = float(tokens.sum())
    # sum ||x - mean||^2 per sentence = sum ||x||^2 - 2 mean . sum x + T ||mean||^2 (mean: all held-out tokens)
    var_sum = sq - 2 * sums.numpy() @ mean + tokens * float(mean @ mean)

    def ratio(num, den):
        r = (counts @ num) / np.maximum(counts @ den, 1e-30)
        return float(num.sum() / max(den.sum(), 1e-30)), interval(r)
    fvu, fvu_ci = ratio(err, var_sum)
    zero_fvu = float(sq.sum() / max(var_sum.sum(), 1e-30))
    l0, l0_ci = ratio(active, tokens)
    fires = fired.sum(0)
    dead = float((fires == 0).mean())
    dense = float((fires / max(total_tokens, 1.0) > DENSE_ABOVE).mean())
    boot_fires = counts.astype(np.float32) @ fired                               # (R, width)
    boot_tokens = counts @ tokens
    # no bootstrap interval for the dead fraction (see the module docstring): a bound, and its
    # spread over disjoint halves at n/2 tokens
    dense_ci = interval((boot_fires / boot_tokens[:, None] > DENSE_ABOVE).mean(1))
    half = dead_at_half(np.concatenate(token_active) if token_active else np.zeros((0, 1), np.int32),
                        np.concatenate(token_sid) if token_sid else np.zeros(0, np.int64), sae.width, seed)

    # -- downstream: the sentence vector with the site spliced ------------------------------
    mean_t = torch.tensor(mean, dtype=torch.float32, device=device)
    site = parse_feature_site(meta.site)
    clean = _vectors(model, site, sentences, None, batch_size, should_stop)
    held_clean = clean[ids]
    spliced = {}
    for name, fn in (("sae", lambda h: sae(h.float())[0]), ("mean", lambda h: mean_t.expand_as(h)),
                     ("zero", lambda h: torch.zeros_like(h))):
        spliced[name] = _vectors(model, site, held, fn, batch_size, should_stop)
        if progress is not None:
            progress(n, n, f"spliced vectors ({name})")
    cos = {k: (v.astype(np.float64) * held_clean.astype(np.float64)).sum(1) for k, v in spliced.items()}
    clean_top = _top(clean, held_clean)
    recall = {k: np.array([len(set(a) & set(b)) / RECALL_K for a, b in zip(_top(clean, v), clean_top)])
              for k, v in spliced.items()}

    def mean_ci(values):
        return float(values.mean()), interval(counts @ values / counts.sum(1))
    rows = [
        QualityRow("normalised MSE", fvu, fvu_ci, {"mean": 1.0, "zero": zero_fvu}, "lower",
                   "the share of the activations' variance the reconstruction misses"),
        QualityRow("L0", l0, l0_ci, {"mean": None, "zero": None}, "lower",
                   f"features active per token (at most k = {sae.k})"),
        QualityRow("dead fraction", dead, None, {"mean": None, "zero": None}, "lower",
                   f"features that fire on none of these {int(total_tokens):,} tokens; each of them fires on "
                   f"fewer than 3/{int(total_tokens):,} of such tokens (95 %, the rule of three)",
                   bound=RULE_OF_THREE / total_tokens if total_tokens else None),
        QualityRow("dead at n/2 tokens", half.value, half.interval, {"mean": None, "zero": None}, "lower",
                   f"the dead fraction of {half.tokens:,} tokens (disjoint halves of these): its mean over "
                   f"{HALF_ROUNDS} seeded halvings and the 95 % spread of one such sample (more tokens, "
                   "fewer dead)"),
        QualityRow("dense fraction", dense, dense_ci, {"mean": None, "zero": None}, "lower",
                   f"features that fire on more than {DENSE_ABOVE:.0%} of these tokens"),
        QualityRow("spliced cosine", *mean_ci(cos["sae"]),
                   {"mean": float(cos["mean"].mean()), "zero": float(cos["zero"].mean())}, "higher",
                   "the sentence vector's cosine with the original when the site is replaced by its reconstruction"),
        QualityRow(f"spliced recall@{RECALL_K}", *mean_ci(recall["sae"]),
                   {"mean": float(recall["mean"].mean()), "zero": float(recall["zero"].mean())}, "higher",
                   f"of the original query's top {RECALL_K} in the corpus, the share the spliced query still finds"),
    ]
    return QualityReport(meta.site, split, n, int(total_tokens), rows)


@dataclass(frozen=True)
class HalfDead:
    tokens: int                     # tokens in each half (N // 2)
    value: float                    # mean dead fraction over the halves (nan below 2 tokens)
    interval: tuple | None          # mean +- 1.96 sd of one half's dead fraction, clipped to [0, 1]
    halves: np.ndarray              # (HALF_ROUNDS, 2): each order's two halves' dead fractions


def dead_at_half(active: np.ndarray, sentence_ids: np.ndarray, width: int, seed: int = 0,
                 rounds: int = HALF_ROUNDS) -> HalfDead:
    """The dead fraction at n/2 tokens: ``active`` (N, k) the features active on each token (-1 for
    none), ``sentence_ids`` (N,) each token's sentence. Per round the sentences take a seeded order, the
    tokens follow it, and the first N // 2 and the next N // 2 are the two halves."""
    n_tokens = len(sentence_ids)
    m = n_tokens // 2
    if m == 0:
        return HalfDead(0, float("nan"), None, np.zeros((0, 2)))
    n_sentences = int(sentence_ids.max()) + 1
    halves = np.zeros((rounds, 2))
    for r in range(rounds):
        rank = np.random.default_rng([seed, 11, r]).permutation(n_sentences)
        order = np.argsort(rank[sentence_ids], kind="stable")
        for h, part in enumerate((order[:m], order[m:2 * m])):
            ids = active[part].ravel()
            halves[r, h] = 1.0 - np.count_nonzero(np.bincount(ids[ids >= 0], minlength=width)) / width
    value = float(halves.mean())
    sd = float(np.sqrt(np.mean((halves[:, 0] - halves[:, 1]) ** 2) / 2))
    return HalfDead(m, value, (max(0.0, value - 1.96 * sd), min(1.0, value + 1.96 * sd)), halves)


def _top(store: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = queries.astype(np.float32) @ store.astype(np.float32).T
    k = min(RECALL_K, store.shape[0])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    return np.take_along_axis(part, np.argsort(-np.take_along_axis(scores, part, 1), axis=1, kind="stable"), 1)


def _vectors(model, site, texts: list[str], replace, batch_size: int, should_stop) -> np.ndarray:
    """Unit sentence vectors (the model's default pooling) of ``texts`` through the modules, the
    site's non-special tokens replaced by ``replace(h)`` (None: the model as it is)."""
    from core.encoder.batching import plan_batches
    from core.errors import Cancelled
    encoder = encoder_of(model)
    device = encoder.embeddings.word_table.device
    pad = model.model_tokenizer.pad_token_id or 0
    specials = torch.tensor(special_ids(model), device=device)
    ids, _ = model.encode_ids(texts)
    out = np.zeros((len(texts), model.dim), dtype=np.float32)
    keep_now = {}

    def hook(h):
        keep = keep_now["keep"][..., None]
        return torch.where(keep, replace(h).to(h.dtype), h)
    pooling = model.choose_pooling(None)
    for rows in plan_batches([len(x) for x in ids], batch_size):
        if should_stop is not None and should_stop():
            raise Cancelled("stopped while measuring the SAE")
        input_ids, mask, _ = input_tensors([ids[i] for i in rows], pad, device)
        keep_now["keep"] = mask.bool() & ~torch.isin(input_ids, specials)
        with torch.inference_mode(), autocast(device, model.precision), \
                site_hooks(model, site, replace=None if replace is None else hook):
            hidden = encoder(input_ids, mask).last_hidden_state
            vec = l2_normalize(pool(hidden.float(), mask, pooling, query=model.pooling_query))
        out[rows] = vec.cpu().numpy()
    return out
