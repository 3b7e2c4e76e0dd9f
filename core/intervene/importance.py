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

METRICS = ("spearman", "recall", "mlm")
RECALL_K = 10
MASK_SHARE = 0.15
FORMAT = 1          # bump when what a cached map means changes


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

    def top(self, n: int = 5) -> list[tuple[tuple[int, int], float]]:
        """The n heads whose removal costs the most, 0-based (layer, head), largest drop first."""
        order = np.argsort(-self.heads, axis=None, kind="stable")[:n]
        return [(tuple(int(i) for i in np.unravel_index(k, self.heads.shape)), float(self.heads.flat[k]))
                for k in order]

    def to_dict(self) -> dict:
        """1-based names for people: heads as "3.5", layers from 1."""
        L, H = self.heads.shape
        return {"metric": self.metric, "baseline": self.baseline, "seed": self.seed, "model": self.model,
                "corpus": self.corpus, "drop_is": "baseline - metric with the part switched off",
                "heads": {f"{l + 1}.{h + 1}": float(self.heads[l, h]) for l in range(L) for h in range(H)},
                "attention": {str(l + 1): float(v) for l, v in enumerate(self.attention)},
                "ffn": {str(l + 1): float(v) for l, v in enumerate(self.ffn)},
                "top_heads": [{"head": f"{l + 1}.{h + 1}", "drop": d} for (l, h), d in self.top(5)]}


class _Measure:
    """One metric on one model: the inputs batched, their clean layer inputs kept, and the
    metric of any intervention computed from the first layer it touches on."""

    def __init__(self, backend, metric: str, seed: int, batch_size: int = 64, pooling: str | None = None):
        self.backend, self.metric, self.seed = backend, metric, seed
        self.encoder = encoder_of(backend)
        self.pooling = backend.choose_pooling(pooling)
        if metric == "spearman":
            self.pairs = read_scored_pairs(assets.eval_pairs())
            texts = list(self.pairs.a) + list(self.pairs.b)
        elif metric == "recall":
            self.queries, self.corpus = read_queries(assets.eval_queries()), sample_corpus()
            texts = [q for q, _ in self.queries] + self.corpus
        elif metric == "mlm":
            if not getattr(backend, "has_mlm", False):
                raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so the mlm metric cannot be measured: "
                                "choose the spearman or recall metric, or a model with one",
                                fix={"kind": "train_mlm", "init": "minilm"})
            texts = sample_corpus()
        else:
            raise InputError(f"the metric is one of {', '.join(METRICS)}, not {metric!r}")
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
        self.corpus_sha = hashlib.sha256(json.dumps([metric, seed, texts]).encode()).hexdigest()
        with torch.inference_mode(), autocast(backend.device, backend.precision):
            self.cached = [self.encoder(i, m, output_hidden_states=True).hidden_states for _, i, m in self.batches]

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
        enc = self.encoder
        causal = enc.config.attention == "causal"
        finals = []
        # the backend's precision (bf16 where native: about twice as fast), as its embed runs
        with torch.inference_mode(), autocast(self.backend.device, self.backend.precision), intervene(enc, spec):
            for (_, _, mask), hidden in zip(self.batches, self.cached):
                x = hidden[from_layer]
                bias = attention_bias(mask, x.shape[1], x.dtype, x.device, causal)
                for block in enc.transformer.layer[from_layer:]:
                    x, _ = block(x, bias)
                if enc.final_layer_norm is not None:
                    x = enc.final_layer_norm(x)
                finals.append(x)
        return self._score(finals)

    def _score(self, finals) -> float:
        if self.metric == "mlm":
            total, count = 0.0, 0
            with torch.inference_mode():
                for (rows, _, _), x in zip(self.batches, finals):
                    logp = self.backend.model.head(x).float().log_softmax(-1)
                    for r, row in enumerate(rows):
                        for p, t in self.targets[row]:
                            total += float(logp[r, p, t])
                            count += 1
            return total / count
        vectors = np.zeros((len(self.texts), finals[0].shape[-1]), dtype=np.float32)
        for (rows, _, mask), x in zip(self.batches, finals):
            vectors[rows] = l2_normalize(pool(x.float(), mask, self.pooling,
                                              query=self.encoder.pooling_query)).cpu().numpy()
        if self.metric == "spearman":
            n = len(self.pairs)
            return float(spearman(np.sum(vectors[:n].astype(np.float64) * vectors[n:], axis=1), self.pairs.scores))
        nq = len(self.queries)
        return float(retrieval_from_vectors(vectors[:nq], vectors[nq:], self.queries, self.corpus,
                                            RECALL_K)["recall_at_k"])


def measure(backend, metric: str, spec: Intervention, seed: int = 0) -> float:
    """The metric with ``spec`` applied: a full, independent run (no cached layers), for checks."""
    return _Measure(backend, metric, seed)(spec, 0)


def importance_map(backend, metric: str = "spearman", seed: int = 0, progress=None, cancel=None,
                   cache_dir: Path | None = None) -> ImportanceMap:
    """Every part's drop in ``metric``. progress(done, total) per part; cancel() between parts."""
    m = _Measure(backend, metric, seed)
    cfg = m.encoder.config
    L, H = cfg.n_layers, cfg.n_heads
    key = _cache_key(backend, metric, m.corpus_sha)
    if cache_dir is not None:
        cached = _load(Path(cache_dir), key)
        if cached is not None:
            return cached
    baseline = m(Intervention())
    heads, attention, ffn = np.zeros((L, H)), np.zeros(L), np.zeros(L)
    total, done = L * H + 2 * L, 0
    for l in range(L):
        jobs = [((heads, (l, h)), Intervention(heads={(l, h)})) for h in range(H)]
        jobs += [((attention, l), Intervention(attention_off={l})), ((ffn, l), Intervention(ffn_off={l}))]
        for (array, at), spec in jobs:
            if cancel is not None and cancel():
                raise Cancelled(f"importance map cancelled after {done} of {total} parts")
            array[at] = baseline - m(spec, from_layer=l)
            done += 1
            if progress is not None:
                progress(done, total)
    result = ImportanceMap(metric, float(baseline), heads, attention, ffn, seed,
                           getattr(backend, "weights_sha256", ""), m.corpus_sha)
    if cache_dir is not None:
        _save(Path(cache_dir), key, result)
    return result


def _cache_key(backend, metric: str, corpus_sha: str) -> str:
    parts = [FORMAT, getattr(backend, "weights_sha256", ""), getattr(backend, "network_sha256", ""),
             backend.choose_pooling(None), metric, corpus_sha]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def _save(folder: Path, key: str, result: ImportanceMap) -> None:
    from safetensors.numpy import save_file

    from core.atomic import atomic_write
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"heads": result.heads, "attention": result.attention, "ffn": result.ffn},
              str(folder / f"importance-{key}.safetensors"))
    meta = {"metric": result.metric, "baseline": result.baseline, "seed": result.seed,
            "model": result.model, "corpus": result.corpus, "format": FORMAT}
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
                         meta["seed"], meta["model"], meta["corpus"])
