"""One metric on one model, item by item: what importance maps and head removal measure.

Metrics (each a function of per-item values, so core/intervene/uncertainty.py can bootstrap it):
  "spearman"  Spearman's rho between the cosines of the shipped scored pairs and their gold
              scores (item: a pair);
  "mrr"       the mean reciprocal rank of each shipped query's labelled sentence among every
              text of the sample corpus (item: a query; no cut-off, so it is graded: rank 2 and
              rank 11 count differently, and it is not at its ceiling on the clean model);
  "recall"    recall@10 of the same queries (item: a query; coarse, and at its ceiling 1.0 on
              clean minilm: it cannot show a part that helps);
  "mlm"       the mean over texts of the seeded masked tokens' mean log-probability (item: a
              text; needs a masked-LM head).
Over own texts (a store's sample) the first OWN_QUERIES texts are queries and the clean model's
own top 10 (recall) or top 1 (mrr) among the rest is what the ablated model should still find.

``items``: which items to read (indices into the shipped pairs, the queries or the texts), for
the held-out halves of head removal (core/intervene/pruning.py); None reads them all.
The clean run's layer inputs are kept, so each ablation re-runs only its own layer and the ones
after it.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import torch

from core import assets
from core.device import autocast
from core.encoder.pooling import l2_normalize, pool
from core.errors import Cancelled, InputError, NoMLMHead
from core.evaluate.metrics import spearman
from core.evaluate.pairs import read_queries, read_scored_pairs
from core.intervene import uncertainty as U
from core.intervene.apply import encoder_of, intervene
from core.intervene.effects import sample_corpus
from core.intervene.spec import Intervention
from core.intervene.sweep import layer_sweep

METRICS = ("spearman", "mrr", "recall", "mlm")
DEFAULT_METRIC = "spearman"     # the CLI's and the app's default: graded, 0.80 on clean minilm
DEFAULT_RETRIEVAL = "mrr"       # the retrieval metric offered next: graded (recall@10 sits at 1.0)
CEILING = {"spearman": 1.0, "mrr": 1.0, "recall": 1.0, "mlm": 0.0}
RECALL_K = 10
OWN_QUERIES = 50    # own texts (a store's): this many are the queries, the rest the corpus
MASK_SHARE = 0.15


class Measure:
    """The metric of any intervention, computed from the first layer it touches on; per item."""

    def __init__(self, backend, metric: str, seed: int, batch_size: int = 64, pooling: str | None = None,
                 texts: list[str] | None = None, items=None):
        self.backend, self.metric, self.seed = backend, metric, seed
        self.encoder = encoder_of(backend)
        self.pooling = backend.choose_pooling(pooling)
        self.reference = None       # own texts: each query's clean top k
        self.queries = None
        self.own = texts is not None
        if metric not in METRICS:
            raise InputError(f"the metric is one of {', '.join(METRICS)}, not {metric!r}")
        if metric == "mlm" and not getattr(backend, "has_mlm", False):
            raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so the mlm metric cannot be measured: "
                            "choose the spearman, mrr or recall metric, or a model with one",
                            fix={"kind": "train_mlm", "init": "minilm"})
        all_texts = self._own(texts) if texts is not None else self._shipped()
        self.n_all = self._count_items(all_texts)
        self.items = tuple(range(self.n_all)) if items is None else tuple(int(i) for i in items)
        if not self.items or min(self.items) < 0 or max(self.items) >= self.n_all:
            raise InputError(f"items must be among the metric's {self.n_all}")
        texts = self._select(all_texts)
        self.texts = texts
        ids, _ = backend.encode_ids(texts)
        self.targets = None
        if metric == "mlm":
            ids, self.targets = self._masked(ids)
        # shortest first: batches of similar length waste little on padding
        self.order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        self.batches = []
        for start in range(0, len(ids), batch_size):
            rows = self.order[start:start + batch_size]
            input_ids, mask = backend._batch([ids[i] for i in rows])
            self.batches.append((rows, input_ids, mask))
        own = "own texts" if self.own else "shipped"
        self.corpus_sha = hashlib.sha256(json.dumps([metric, seed, own, texts, list(self.items)]).encode()).hexdigest()
        self._cached = None
        self._gold_ranks = {}

    # -- what is read ------------------------------------------------------------------------
    def _count_items(self, texts) -> int:
        if self.metric == "spearman":
            return len(self.pairs)
        if self.metric in ("mrr", "recall"):
            return self.n_queries
        return len(texts)

    def _select(self, texts) -> list[str]:
        """The texts the chosen items need."""
        keep = list(self.items)
        if self.metric == "spearman":
            n = len(self.pairs)
            self.gold = np.asarray(self.pairs.scores, np.float64)[keep]
            return [texts[i] for i in keep] + [texts[n + i] for i in keep]
        if self.metric in ("mrr", "recall"):
            nq = self.n_queries
            if self.queries is not None:
                self.queries = [self.queries[i] for i in keep]
            self.n_queries = len(keep)
            return [texts[i] for i in keep] + texts[nq:]
        return [texts[i] for i in keep]

    @property
    def n(self) -> int:
        """How many items the metric reads (what the bootstrap resamples)."""
        return len(self.items)

    @property
    def unit(self) -> str:
        return {"spearman": "pairs", "mrr": "queries", "recall": "queries", "mlm": "texts"}[self.metric]

    @property
    def what(self) -> str:
        """What the metric reads, in words."""
        n = len(self.texts)
        if self.metric == "spearman":
            return f"Spearman on {self.n} shipped scored pairs"
        if self.metric == "mlm":
            return f"mean log-probability of seeded masked tokens of {n} texts"
        rest = n - self.n_queries
        if self.own:
            if self.metric == "mrr":
                return f"MRR of the clean model's own top hit: {self.n_queries} queries over {rest} other texts"
            return (f"recall@{RECALL_K} of the clean model's own top {RECALL_K}: {self.n_queries} queries "
                    f"over {rest} other texts")
        if self.metric == "mrr":
            return f"MRR of {self.n_queries} shipped queries' labelled sentence among {rest} sample texts (no cut-off)"
        return f"recall@{RECALL_K} of {self.n_queries} shipped queries over {rest} sample texts"

    def _shipped(self) -> list[str]:
        if self.metric == "spearman":
            self.pairs = read_scored_pairs(assets.eval_pairs())
            return list(self.pairs.a) + list(self.pairs.b)
        if self.metric in ("mrr", "recall"):
            self.queries, self.corpus = read_queries(assets.eval_queries()), sample_corpus()
            self.n_queries = len(self.queries)
            return [q for q, _ in self.queries] + self.corpus
        return sample_corpus()

    def _own(self, texts) -> list[str]:
        if self.metric == "spearman":
            raise InputError("the spearman metric reads the shipped scored pairs: measure a store's texts with "
                             "the mrr or recall metric (agreement with the model's own top hits) or the mlm metric")
        texts = list(dict.fromkeys(t.strip() for t in texts if t and t.strip()))
        if self.metric in ("mrr", "recall"):
            self.n_queries = min(OWN_QUERIES, len(texts) // 4)
            if len(texts) - self.n_queries < 2 * RECALL_K:
                raise InputError(f"{self.metric} over a store needs at least {MIN_OWN_TEXTS} different "
                                 f"texts in it, not {len(texts)}: ingest more, or measure the shipped corpus")
        elif not texts:
            raise InputError("the store holds no texts to measure: ingest some first")
        return texts

    def _masked(self, ids):
        """Each text with a seeded 15% of its word tokens (at least one) replaced by [MASK]."""
        rng = np.random.default_rng(self.seed)
        tok = self.backend.tokenizer
        out, targets = [], []
        for row in ids:
            special = tok.get_special_tokens_mask(row, already_has_special_tokens=True)
            inner = [i for i, s in enumerate(special) if not s]
            chosen = sorted(rng.choice(inner, size=max(1, round(MASK_SHARE * len(inner))), replace=False).tolist())
            masked = list(row)
            for p in chosen:
                masked[p] = tok.mask_token_id
            out.append(masked)
            targets.append([(p, row[p]) for p in chosen])
        return out, targets

    # -- running -------------------------------------------------------------------------------
    @property
    def cached(self) -> list:
        """The clean run's hidden states of every batch (each layer's input), computed on first
        use; for own texts also the clean top k."""
        if self._cached is None:
            backend = self.backend
            with torch.inference_mode(), autocast(backend.device, backend.precision):
                self._cached = [self.encoder(i, m, output_hidden_states=True).hidden_states
                                for _, i, m in self.batches]
            if self.own and self.metric in ("mrr", "recall"):
                self.reference = self._top(self._vectors(self._run(Intervention(), 0)))
        return self._cached

    def values(self, spec: Intervention, from_layer: int = 0, means=None) -> np.ndarray:
        """Per-item values with ``spec`` applied, re-running the layers from ``from_layer`` on."""
        self.cached      # noqa: B018 - the clean run (and reference) first
        return self.finish(self._run(spec, from_layer, means))

    def __call__(self, spec: Intervention, from_layer: int = 0, means=None) -> float:
        return self.score(self.values(spec, from_layer, means))

    def _run(self, spec: Intervention, from_layer: int, means=None) -> list:
        enc = self.encoder
        parts = []
        with torch.inference_mode(), autocast(self.backend.device, self.backend.precision), \
                intervene(enc, spec, means):
            for b, ((_, input_ids, mask), hidden) in enumerate(zip(self.batches, self.cached)):
                if spec.positions != "keep":     # the embeddings change: the kept layer inputs do not hold
                    parts.append(self.reduce(b, enc(input_ids, mask).last_hidden_state))
                    continue
                x = hidden[from_layer]
                parts.append(self.reduce(b, enc.run_from(from_layer, x, enc.bias(mask, x))))
        return parts

    def sweep(self, layer: int, progress=None, cancel=None, fill=None) -> list[np.ndarray]:
        """Per-item values of each of sweep.layer_variants(H, layer), run as one stacked batch.
        fill: (H, Dh) what an ablated head's columns hold (None: zeros; a layer's means)."""
        per_variant = None
        with torch.inference_mode(), autocast(self.backend.device, self.backend.precision):
            for b, ((_, _, mask), hidden) in enumerate(zip(self.batches, self.cached)):
                if cancel is not None and cancel():
                    raise Cancelled("importance map cancelled")
                finals = layer_sweep(self.encoder, layer, hidden[layer], mask, fill=fill)
                if per_variant is None:
                    per_variant = [[] for _ in finals]
                for parts, x in zip(per_variant, finals):
                    parts.append(self.reduce(b, x))
                if progress is not None:
                    progress((b + 1) / len(self.batches))
        return [self.finish(parts) for parts in per_variant]

    def reduce(self, b: int, x: torch.Tensor):
        """What the metric needs of batch ``b``'s final hidden states: each text's masked tokens'
        mean log-probability (mlm) or the pooled unit vectors."""
        rows, _, mask = self.batches[b]
        if self.metric == "mlm":
            logp = self.backend.model.head(x).float().log_softmax(-1)
            return np.array([np.mean([float(logp[r, p, t]) for p, t in self.targets[row]])
                             for r, row in enumerate(rows)])
        return l2_normalize(pool(x.float(), mask, self.pooling, query=self.encoder.pooling_query)).cpu().numpy()

    # -- per-item values and the metric of them --------------------------------------------------
    def finish(self, parts) -> np.ndarray:
        """(n,) the per-item values of one run, in item order."""
        if self.metric == "mlm":
            out = np.zeros(len(self.texts))
            for (rows, _, _), v in zip(self.batches, parts):
                out[rows] = v
            return out
        vectors = self._vectors(parts)
        nq = self.n_queries if self.metric != "spearman" else None
        if self.metric == "spearman":
            n = self.n
            return np.sum(vectors[:n].astype(np.float64) * vectors[n:], axis=1)
        if self.reference is not None:
            top = self._top(vectors)
            if self.metric == "recall":
                return np.array([len(np.intersect1d(a, b)) / RECALL_K for a, b in zip(top, self.reference)])
            sims = vectors[:nq].astype(np.float64) @ vectors[nq:].astype(np.float64).T
            return 1.0 / _rank_of(sims, self.reference[:, 0])
        sims = vectors[:nq].astype(np.float64) @ vectors[nq:].astype(np.float64).T
        index = {t: i for i, t in enumerate(self.texts[nq:])}
        relevant = np.array([index.get(r, -1) for _, r in self.queries])
        ranks = _rank_of(sims, relevant)
        if self.metric == "recall":
            return (ranks <= RECALL_K).astype(np.float64)
        return 1.0 / ranks

    def score(self, values: np.ndarray) -> float:
        """The metric of per-item values."""
        if self.metric == "spearman":
            return float(spearman(values, self.gold))
        return float(np.mean(values))

    def scores(self, values: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """(R,) the metric of per-item values over each bootstrap resample (counts: R x n)."""
        if self.metric == "spearman":
            key = id(counts)
            if key not in self._gold_ranks:
                self._gold_ranks = {key: (counts, U.resampled_ranks(self.gold, counts))}
            return U.spearman_scores(values, self.gold, counts, self._gold_ranks[key][1])
        return U.mean_scores(values, counts)

    def _vectors(self, parts) -> np.ndarray:
        vectors = np.zeros((len(self.texts), parts[0].shape[-1]), dtype=np.float32)
        for (rows, _, _), v in zip(self.batches, parts):
            vectors[rows] = v
        return vectors

    def _top(self, vectors) -> np.ndarray:
        """Each query's k nearest texts of the rest (indices; ties by position)."""
        nq = self.n_queries
        sims = vectors[:nq].astype(np.float64) @ vectors[nq:].astype(np.float64).T
        return np.argsort(-sims, axis=1, kind="stable")[:, :RECALL_K]


MIN_OWN_TEXTS = 2 * RECALL_K + 5      # the fewest texts recall or MRR over a store can read


def _rank_of(sims: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Each row's rank (from 1) of its target column, ties by position as a stable sort puts
    them; a target of -1 (not in the corpus) ranks last."""
    ranks = np.empty(len(sims))
    for row, t in enumerate(target):
        if t < 0:
            ranks[row] = sims.shape[1] + 1
            continue
        s = sims[row, t]
        ranks[row] = 1 + np.sum(sims[row] > s) + np.sum(sims[row, :t] == s)
    return ranks


def measure(backend, metric: str, spec: Intervention, seed: int = 0, texts: list[str] | None = None,
            means=None, items=None) -> float:
    """The metric with ``spec`` applied: a full, independent run (no cached layers), for checks."""
    return Measure(backend, metric, seed, texts=texts, items=items)(spec, 0, means)
