"""Importance maps: for every head, every layer's attention and every FFN, how much a metric
drops when that part alone is switched off (a head zeroed, a branch removed).

Metrics: "spearman" on the shipped eval pairs, "recall" (recall@10) of the shipped queries over
the sample corpus, "mlm" (mean log-probability of masked tokens of the sample corpus, seeded
masks; needs a masked-LM head). The clean run's layer inputs are kept, so each ablation re-runs
only its own layer and the ones after it. Maps are cached on disk (safetensors + json) per
(model, metric, corpus, seed).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from core import assets
from core.device import autocast
from core.encoder.model import attention_bias
from core.encoder.pooling import l2_normalize, pool
from core.errors import Cancelled, InputError, NoMLMHead
from core.evaluate.metrics import spearman
from core.evaluate.pairs import read_queries, read_scored_pairs
from core.intervene.apply import encoder_of, intervene
from core.intervene.effects import retrieval_from_vectors, sample_corpus
from core.intervene.spec import Intervention
from core.intervene.sweep import layer_sweep, layer_variants

METRICS = ("spearman", "recall", "mlm")
RECALL_K = 10
OWN_QUERIES = 50    # own texts (a store's): this many are the queries, the rest the corpus
MASK_SHARE = 0.15
FORMAT = 2          # bump when what a cached map means changes


@dataclass
class ImportanceMap:
    metric: str
    baseline: float            # the metric of the clean model
    heads: np.ndarray          # (L, H): baseline - metric with that head zeroed
    attention: np.ndarray      # (L,): ... with that layer's attention branch removed
    ffn: np.ndarray            # (L,): ... with that layer's FFN branch removed
    seed: int
    model: str                 # the weights' sha256
    corpus: str                # the sha256 of what the metric reads
    measured: str = ""         # what the metric reads, in words

    def top(self, n: int = 5) -> list[tuple[tuple[int, int], float]]:
        """The n heads whose removal costs the most, 0-based (layer, head), largest drop first."""
        order = np.argsort(-self.heads, axis=None, kind="stable")[:n]
        return [(tuple(int(i) for i in np.unravel_index(k, self.heads.shape)), float(self.heads.flat[k]))
                for k in order]

    def to_dict(self) -> dict:
        """1-based names for people: heads as "3.5", layers from 1."""
        L, H = self.heads.shape
        return {"metric": self.metric, "baseline": self.baseline, "seed": self.seed, "model": self.model,
                "corpus": self.corpus, "measured": self.measured,
                "drop_is": "baseline - metric with the part switched off",
                "heads": {f"{l + 1}.{h + 1}": float(self.heads[l, h]) for l in range(L) for h in range(H)},
                "attention": {str(l + 1): float(v) for l, v in enumerate(self.attention)},
                "ffn": {str(l + 1): float(v) for l, v in enumerate(self.ffn)},
                "top_heads": [{"head": f"{l + 1}.{h + 1}", "drop": d} for (l, h), d in self.top(5)]}


class _Measure:
    """One metric on one model: the inputs batched, their clean layer inputs kept, and the
    metric of any intervention computed from the first layer it touches on."""

    def __init__(self, backend, metric: str, seed: int, batch_size: int = 64, pooling: str | None = None,
                 texts: list[str] | None = None):
        self.backend, self.metric, self.seed = backend, metric, seed
        self.encoder = encoder_of(backend)
        self.pooling = backend.choose_pooling(pooling)
        self.reference = None       # own texts, recall: each query's top k by the clean model
        self.queries = None
        if metric not in METRICS:
            raise InputError(f"the metric is one of {', '.join(METRICS)}, not {metric!r}")
        if metric == "mlm" and not getattr(backend, "has_mlm", False):
            raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so the mlm metric cannot be measured: "
                            "choose the spearman or recall metric, or a model with one",
                            fix={"kind": "train_mlm", "init": "minilm"})
        texts = self._own(texts) if texts is not None else self._shipped()
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
        own = "own texts" if metric == "recall" and self.queries is None else "shipped"
        self.corpus_sha = hashlib.sha256(json.dumps([metric, seed, own, texts]).encode()).hexdigest()
        self._cached = None

    @property
    def what(self) -> str:
        """What the metric reads, in words."""
        n = len(self.texts)
        if self.metric == "spearman":
            return f"Spearman on the {len(self.pairs)} shipped scored pairs"
        if self.metric == "mlm":
            return f"mean log-probability of seeded masked tokens of {n} texts"
        if self.reference is not None or self.queries is None:
            return (f"recall@{RECALL_K} of the clean model's own top {RECALL_K}: {self.n_queries} queries "
                    f"over {n - self.n_queries} other texts")
        return f"recall@{RECALL_K} of the {self.n_queries} shipped queries over the {n - self.n_queries} sample texts"

    @property
    def cached(self) -> list:
        """The clean run's hidden states of every batch (each layer's input), computed on first use
        (a map found in the cache needs none); for own texts' recall also the clean top k."""
        if self._cached is None:
            backend = self.backend
            with torch.inference_mode(), autocast(backend.device, backend.precision):
                self._cached = [self.encoder(i, m, output_hidden_states=True).hidden_states
                                for _, i, m in self.batches]
            if self.metric == "recall" and self.queries is None:
                self.reference = self._top(self._vectors(self._run(Intervention(), 0)))
        return self._cached

    def _shipped(self) -> list[str]:
        if self.metric == "spearman":
            self.pairs = read_scored_pairs(assets.eval_pairs())
            return list(self.pairs.a) + list(self.pairs.b)
        if self.metric == "recall":
            self.queries, self.corpus = read_queries(assets.eval_queries()), sample_corpus()
            self.n_queries = len(self.queries)
            return [q for q, _ in self.queries] + self.corpus
        return sample_corpus()

    def _own(self, texts) -> list[str]:
        """The caller's texts (a store's): for recall the first OWN_QUERIES are the queries and the
        clean model's top k among the rest is what the ablated model should still find."""
        if self.metric == "spearman":
            raise InputError("the spearman metric reads the shipped scored pairs: measure a store's texts with "
                             f"the recall metric (agreement with the model's own top {RECALL_K}) or the mlm metric")
        texts = list(dict.fromkeys(t.strip() for t in texts if t and t.strip()))
        if self.metric == "recall":
            self.n_queries = min(OWN_QUERIES, len(texts) // 4)
            if len(texts) - self.n_queries < 2 * RECALL_K:
                raise InputError(f"recall@{RECALL_K} over a store needs at least {2 * RECALL_K + 5} different "
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

    def __call__(self, spec: Intervention, from_layer: int = 0) -> float:
        """The metric with `spec` applied, re-running the layers from `from_layer` on (the first
        one `spec` touches, or earlier) through the hooked modules: one part at a time."""
        self.cached      # noqa: B018 - the clean run (and reference) first
        return self._finish(self._run(spec, from_layer))

    def _run(self, spec: Intervention, from_layer: int) -> list:
        enc = self.encoder
        causal = enc.config.attention == "causal"
        parts = []
        # the backend's precision (bf16 where native: about twice as fast), as its embed runs
        with torch.inference_mode(), autocast(self.backend.device, self.backend.precision), intervene(enc, spec):
            for b, ((_, _, mask), hidden) in enumerate(zip(self.batches, self.cached)):
                x = hidden[from_layer]
                bias = attention_bias(mask, x.shape[1], x.dtype, x.device, causal)
                for block in enc.transformer.layer[from_layer:]:
                    x, _ = block(x, bias)
                if enc.final_layer_norm is not None:
                    x = enc.final_layer_norm(x)
                parts.append(self._reduce(b, x))
        return parts

    def sweep(self, layer: int, progress=None, cancel=None) -> list[float]:
        """The metric of each of sweep.layer_variants(H, layer) (each head zeroed, attention off,
        FFN off), all run as one stacked batch from `layer` on (core/intervene/sweep.py).
        progress(fraction) after each batch; cancel() between batches."""
        per_variant = None
        with torch.inference_mode(), autocast(self.backend.device, self.backend.precision):
            for b, ((_, _, mask), hidden) in enumerate(zip(self.batches, self.cached)):
                if cancel is not None and cancel():
                    raise Cancelled("importance map cancelled")
                finals = layer_sweep(self.encoder, layer, hidden[layer], mask)
                if per_variant is None:
                    per_variant = [[] for _ in finals]
                for parts, x in zip(per_variant, finals):
                    parts.append(self._reduce(b, x))
                if progress is not None:
                    progress((b + 1) / len(self.batches))
        return [self._finish(parts) for parts in per_variant]

    def _reduce(self, b: int, x: torch.Tensor):
        """What the metric needs of batch `b`'s final hidden states: the masked tokens'
        log-probabilities (mlm) or the pooled unit vectors."""
        rows, _, mask = self.batches[b]
        if self.metric == "mlm":
            logp = self.backend.model.head(x).float().log_softmax(-1)
            return [float(logp[r, p, t]) for r, row in enumerate(rows) for p, t in self.targets[row]]
        return l2_normalize(pool(x.float(), mask, self.pooling, query=self.encoder.pooling_query)).cpu().numpy()

    def _finish(self, parts) -> float:
        if self.metric == "mlm":
            values = [v for part in parts for v in part]
            return sum(values) / len(values)
        vectors = self._vectors(parts)
        if self.reference is not None:
            # recall@k of the clean model's own top k: the share of it the ablated model still finds
            top = self._top(vectors)
            return float(np.mean([len(np.intersect1d(a, b)) for a, b in zip(top, self.reference)]) / RECALL_K)
        if self.metric == "spearman":
            n = len(self.pairs)
            return float(spearman(np.sum(vectors[:n].astype(np.float64) * vectors[n:], axis=1), self.pairs.scores))
        nq = self.n_queries
        return float(retrieval_from_vectors(vectors[:nq], vectors[nq:], self.queries, self.corpus,
                                            RECALL_K)["recall_at_k"])


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


def measure(backend, metric: str, spec: Intervention, seed: int = 0, texts: list[str] | None = None) -> float:
    """The metric with ``spec`` applied: a full, independent run (no cached layers), for checks.
    texts: measure over these (a store's) instead of the shipped data, as importance_map does."""
    return _Measure(backend, metric, seed, texts=texts)(spec, 0)


def importance_map(backend, metric: str = "spearman", seed: int = 0, progress=None, cancel=None,
                   cache_dir: Path | None = None, batched: bool = True,
                   texts: list[str] | None = None) -> ImportanceMap:
    """Every part's drop in ``metric``. progress(done, total) in parts; cancel() between batches.
    batched: a layer's parts run as one stacked batch (core/intervene/sweep.py); False runs them
    one at a time through the hooked modules (the reference the tests compare it with).
    texts: measure over these (e.g. a sample of a store's texts) instead of the shipped data:
    recall then is the share of the clean model's own top 10 of each of the first 50 texts (the
    queries) among the rest that the ablated model still finds (there are no relevance labels);
    mlm masks these texts; spearman needs the shipped pairs."""
    m = _Measure(backend, metric, seed, texts=texts)
    cfg = m.encoder.config
    L, H = cfg.n_layers, cfg.n_heads
    key = _cache_key(backend, metric, m.corpus_sha)
    if cache_dir is not None:
        cached = _load(Path(cache_dir), key)
        if cached is not None:
            return cached
    baseline = m(Intervention())
    heads, attention, ffn = np.zeros((L, H)), np.zeros(L), np.zeros(L)
    total, V = L * H + 2 * L, H + 2
    reported = [0]

    def report_upto(done: int) -> None:
        # every count once, in order, as a part-by-part computation would report them
        for d in range(reported[0] + 1, done + 1):
            progress(d, total)
        reported[0] = max(reported[0], done)

    for l in range(L):
        if cancel is not None and cancel():
            raise Cancelled(f"importance map cancelled after {l * V} of {total} parts")
        report = None if progress is None else (lambda f, l=l: report_upto(l * V + int(f * V)))
        if batched:
            values = m.sweep(l, progress=report, cancel=cancel)
        else:       # one part at a time through the hooked modules: the reference path
            values = [m(spec, from_layer=l) for spec in layer_variants(H, l)]
            if report is not None:
                report(1.0)
        heads[l] = baseline - np.asarray(values[:H])
        attention[l], ffn[l] = baseline - values[H], baseline - values[H + 1]
    result = ImportanceMap(metric, float(baseline), heads, attention, ffn, seed,
                           getattr(backend, "weights_sha256", ""), m.corpus_sha, m.what)
    if cache_dir is not None:
        _save(Path(cache_dir), key, result)
    return result


def _cache_key(backend, metric: str, corpus_sha: str) -> str:
    # the precision too: a bf16 map may differ from the fp32 one where a query sits on the edge
    parts = [FORMAT, getattr(backend, "weights_sha256", ""), getattr(backend, "network_sha256", ""),
             backend.choose_pooling(None), getattr(backend, "precision", "fp32"), metric, corpus_sha]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _save(folder: Path, key: str, result: ImportanceMap) -> None:
    from safetensors.numpy import save_file

    from core.atomic import atomic_write
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"heads": result.heads, "attention": result.attention, "ffn": result.ffn},
              str(folder / f"importance-{key}.safetensors"))
    meta = {"metric": result.metric, "baseline": result.baseline, "seed": result.seed,
            "model": result.model, "corpus": result.corpus, "measured": result.measured, "format": FORMAT}
    atomic_write(folder / f"importance-{key}.json", [json.dumps(meta).encode()])


def _load(folder: Path, key: str) -> ImportanceMap | None:
    from safetensors.numpy import load_file
    meta_path, data_path = folder / f"importance-{key}.json", folder / f"importance-{key}.safetensors"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        arrays = load_file(str(data_path))
    except (OSError, ValueError):
        return None         # absent or unreadable: computed afresh
    return ImportanceMap(meta["metric"], meta["baseline"], arrays["heads"], arrays["attention"], arrays["ffn"],
                         meta["seed"], meta["model"], meta["corpus"], meta.get("measured", ""))
