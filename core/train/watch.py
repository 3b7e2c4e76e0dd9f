"""Watching a run learn: gradient flow per block and sublayer, and probes of the model as it trains.

``GradFlow`` measures, on the steps it is asked to, each parameter group's gradient norm
(after backward, before clipping) and the size of the optimizer's update relative to the
weights (``||w_after - w_before|| / ||w_before||``). Groups: the embeddings, each layer's
attention (with its LayerNorm) and FFN (with its LayerNorm), the final norm, the MLM head.
All norms of a step come from torch._foreach_norm and reach the host in one transfer.

``Probe`` runs, every ``probe_every`` steps and in eval mode, the probe sentence (every layer x
head attention kept, each head's entropy), the probe set (its pairwise cosine matrix) and a
fixed sample of training sentences (anisotropy: the mean cosine over all their pairs), and
writes a snapshot file into the run folder (core.train.run_folder). Neither consumes the training's
random numbers: a run watched or not trains to the same weights.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file

from core.encoder.model import parameter_group
from core.errors import InputError
from core.files.atomic import readable_as_umask_allows
from core.inspect.attention_maps import entropy
from core.train import run_folder
from core.train.data import collate, encode

ANISOTROPY_SAMPLE = 64        # training sentences in the fixed anisotropy sample (all 2016 of their pairs)
PROBE_SET_TOPICS = 3          # default probe set: one paraphrase pair from each of this many topics ...
PROBE_SET_UNRELATED = 2       # ... and one sentence from each of this many other topics
AUTO_PROBES = 30              # probe_every = 0: about this many probes per run (at least every 25 steps)
EMBED_BATCH = 64



def probe_every(config) -> int:
    """The probe interval a config asks for (0 = auto: about AUTO_PROBES probes per run)."""
    return config.probe_every or max(25, config.steps // AUTO_PROBES)


# ---- gradient flow --------------------------------------------------------------------------

class GradFlow:
    """Per-group gradient norms and update/weight ratios of one optimizer step."""

    def __init__(self, named_parameters):
        self.params, self.groups, index = [], [], []
        for name, p in named_parameters:
            if not p.requires_grad:
                continue
            g = parameter_group(name)
            if g not in self.groups:
                self.groups.append(g)
            self.params.append(p)
            index.append(self.groups.index(g))
        self.index = torch.tensor(index)
        self._before = None
        self._grad_sq = None
        self.last: dict | None = None      # the latest measurement, as tensors on the device
        self.seconds = 0.0                 # host time spent measuring (the cost of watching)

    def _group_sums(self, squares: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(self.groups), device=squares.device, dtype=squares.dtype).index_add_(0, index, squares)

    @torch.no_grad()
    def before_step(self) -> None:
        """After backward, before clipping and the optimizer step: gradient norms, and the
        weights kept to measure the update against."""
        started = time.perf_counter()
        have = [i for i, p in enumerate(self.params) if p.grad is not None]
        if not have:
            self._grad_sq = None
            return
        dev = self.params[have[0]].device
        norms = torch.stack(torch._foreach_norm([self.params[i].grad.detach().float() for i in have]))
        self._grad_sq = self._group_sums(norms.pow(2), self.index[have].to(dev))
        self._have = have
        self._before = torch._foreach_mul([self.params[i].detach() for i in have], 1.0)   # copies, fused
        self.seconds += time.perf_counter() - started

    @torch.no_grad()
    def after_step(self) -> None:
        if self._grad_sq is None:
            return
        started = time.perf_counter()
        after = [self.params[i].detach() for i in self._have]
        delta = torch._foreach_sub(after, self._before)
        idx = self.index[self._have].to(self._grad_sq.device)
        d_sq = self._group_sums(torch.stack(torch._foreach_norm(delta)).float().pow(2), idx)
        w_sq = self._group_sums(torch.stack(torch._foreach_norm(self._before)).float().pow(2), idx)
        present = self._group_sums(torch.ones(len(self._have), device=idx.device), idx)
        self.last = {"grad_sq": self._grad_sq, "delta_sq": d_sq, "weight_sq": w_sq, "present": present}
        self._before = None
        self.seconds += time.perf_counter() - started

    def report(self) -> dict | None:
        """The latest step's fields of a "grads" event (one host transfer), or None."""
        if self.last is None:
            return None
        started = time.perf_counter()
        g, d, w, present = torch.stack([self.last[k] for k in ("grad_sq", "delta_sq", "weight_sq",
                                                                 "present")]).double().cpu().numpy()
        self.last = None
        self.seconds += time.perf_counter() - started
        keep = present > 0                 # groups without a gradient this step (the MLM head in SimCSE)
        ratio = np.sqrt(d) / np.maximum(np.sqrt(w), 1e-30)
        return {"groups": [n for n, k in zip(self.groups, keep) if k],
                "grad_norm": [float(x) for x in np.sqrt(g)[keep]],
                "update_ratio": [float(x) for x in ratio[keep]],
                "total_grad_norm": float(np.sqrt(g.sum()))}


# ---- probes ---------------------------------------------------------------------------------

def default_probe_set() -> list[str]:
    """A few paraphrase pairs (one per topic) and unrelated sentences from the shipped pairs."""
    from core.assets import paraphrase_pairs
    from core.train.evaluation import read_pairs
    by_topic: dict[str, tuple[str, str]] = {}
    for a, b, topic in read_pairs(str(paraphrase_pairs())):
        by_topic.setdefault(topic, (a, b))
    firsts = list(by_topic.values())
    texts = [t for a, b in firsts[:PROBE_SET_TOPICS] for t in (a, b)]
    return texts + [a for a, _ in firsts[PROBE_SET_TOPICS:PROBE_SET_TOPICS + PROBE_SET_UNRELATED]]


def read_probe_set(path) -> list[str]:
    """A probe set file: one sentence per line (.txt), or a pairs file (.tsv/.csv, columns a, b)
    whose pairs are taken in order a1, b1, a2, b2, ..."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"probe set file {str(path)!r} does not exist")
    if p.suffix.lower() in (".tsv", ".csv"):
        from core.train.evaluation import read_pairs
        texts = [t for a, b, _ in read_pairs(str(p)) for t in (a, b)]
    else:
        try:
            texts = [line.strip() for line in p.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
        except UnicodeDecodeError:
            raise InputError(f"probe set file {path}: not UTF-8 text (one sentence per line)") from None
    return check_probe_set(texts, str(path))


def check_probe_set(texts, where: str = "the probe set") -> list[str]:
    texts = [" ".join(str(t).split()) for t in texts if str(t).strip()]
    if len(texts) < 2:
        raise InputError(f"{where}: at least two sentences are needed for a cosine matrix")
    return texts


PROBE_SEARCH = 2000        # sentences looked at for a default probe sentence without unknown words


def known_words_sentence(held_out, train, unk_id) -> list:
    """The default probe sentence: the first held-out sentence the vocabulary knows every word of
    (a word tokenizer is built from the training sentences only, so a held-out one may hold
    [UNK]s), else the first such training sentence, else the one with the fewest [UNK]s."""
    candidates = list(held_out[:PROBE_SEARCH]) + list(train[:PROBE_SEARCH])
    if unk_id is None:
        return candidates[0]
    unknown = [sum(int(i) == unk_id for i in ids) for ids in candidates]
    return candidates[unknown.index(min(unknown))]


class Probe:
    """The probe sentence, the probe set and the anisotropy sample of a run, run on demand."""

    def __init__(self, trainer, folder):
        c = trainer.config
        self.trainer = trainer
        self.folder = Path(folder).expanduser()
        tok = trainer.tokenizer
        held = known_words_sentence(trainer.eval_ids or [], trainer.train_ids, tok.unk_token_id)
        if c.probe_sentence.strip():
            self.sentence_ids = encode(tok, [c.probe_sentence.strip()], trainer.max_length)[0]
        else:                                 # the user's own text, in the model's vocabulary
            self.sentence_ids = held
        self.tokens = tok.convert_ids_to_tokens([int(i) for i in self.sentence_ids])
        self.sentence = tok.decode([int(i) for i in self.sentence_ids], skip_special_tokens=True)
        self.texts = check_probe_set(c.probe_set) if c.probe_set else default_probe_set()
        self.set_ids = encode(tok, self.texts, trainer.max_length)
        rng = np.random.default_rng(c.seed + 3)
        n = len(trainer.train_ids)
        self.sample = sorted(rng.choice(n, min(ANISOTROPY_SAMPLE, n), replace=False).tolist())
        self.seconds = 0.0                     # time spent probing (the cost of watching)

    @torch.no_grad()
    def run(self, step: int) -> dict:
        """Probe the model now; writes the step's snapshot and returns the "probe" event fields."""
        started = time.perf_counter()
        t = self.trainer
        was = t.model.training
        t.model.eval()
        try:
            ids, attn = collate([self.sentence_ids], t.tokenizer.pad_token_id)
            with t.autocast():
                out = t.body(ids.to(t.device), attn.to(t.device), output_attentions=True)
            att = torch.stack([a[0] for a in out.attentions]).float().cpu().numpy()     # (L, H, T, T)
            probe_vecs = self._embed(self.set_ids)
            sample_vecs = self._embed([t.train_ids[i] for i in self.sample])
        finally:
            t.model.train(was)
        heads = entropy(att).mean(-1)                                                   # (L, H) nats
        cos = probe_vecs @ probe_vecs.T
        name = run_folder.snapshot_name(step)
        self._save(name, step, att, heads, probe_vecs, cos)
        self.seconds += time.perf_counter() - started
        return {"snapshot": name, "probe_sentence": self.sentence, "tokens": self.tokens,
                "entropy": heads.tolist(), "probe_texts": self.texts, "probe_cosine": cos.tolist(),
                "anisotropy": anisotropy(sample_vecs)}

    def _embed(self, seqs) -> np.ndarray:
        t = self.trainer
        out = []
        for i in range(0, len(seqs), EMBED_BATCH):
            ids, attn = collate(seqs[i:i + EMBED_BATCH], t.tokenizer.pad_token_id)
            with t.autocast():
                out.append(t.embed(ids.to(t.device), attn.to(t.device)).float().cpu())
        return torch.cat(out).double().numpy()

    def _save(self, name, step, att, heads, vecs, cos) -> None:
        path = self.folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        save_file({"attentions": att.astype(np.float16), "entropy": heads.astype(np.float32),
                   "probe_vectors": vecs.astype(np.float16), "probe_cosine": cos.astype(np.float32)},
                  str(tmp), metadata={"step": str(step), "tokens": json.dumps(self.tokens),
                                      "probe_texts": json.dumps(self.texts)})
        readable_as_umask_allows(tmp)
        os.replace(tmp, path)


def anisotropy(unit_vectors: np.ndarray) -> float | None:
    """Mean cosine over all distinct pairs of unit vectors (0: spread out; near 1: a narrow cone)."""
    z = np.asarray(unit_vectors, dtype=np.float64)
    n = len(z)
    if n < 2:
        return None
    s = z.sum(0)
    return float((s @ s - (z * z).sum()) / (n * (n - 1)))
