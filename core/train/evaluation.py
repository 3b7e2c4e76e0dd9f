"""Evaluation during training: held-out masked-LM (or, for clm, next-token) loss and accuracy
against a unigram baseline, SimCSE alignment / uniformity / held-out loss, and paraphrase-pair
cosines; and how a CLI or a panel words an evaluation.

``Evaluator`` scores a model through the small ``EvalModel`` interface (core.train.trainer.Trainer is
one) on a ``HeldOut`` set fixed when training starts, so the training loop reads on its own.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.errors import InputError
from core.train.data import collate, encode
from core.train.masking import IGNORE


class EvalModel(Protocol):
    """What evaluation needs of the model being trained (core.train.trainer.Trainer provides it)."""

    model: nn.Module          # the encoder (with its MLM head, if it has one)
    device: torch.device
    has_mlm: bool

    def autocast(self): ...                                        # the training precision's context
    def mlm_loss(self, inputs, attn, labels, reduction="mean"): ...  # (loss, logits of labelled tokens)
    def embed(self, ids, attn) -> torch.Tensor: ...               # unit sentence vectors (B, D)


@dataclass
class HeldOut:
    """The held-out data, fixed once so that every evaluation scores the same things."""

    eval_batches: list        # (ids, attn, inputs, labels): the same masks (clm: next tokens) at every evaluation
    embed_batches: list       # (ids, attn): each held-out sentence once
    unigram_logp: np.ndarray  # log p(token) of the training text: the baseline to beat
    unigram_top: int          # the most frequent training token (the unigram's only guess)
    pairs: list               # (a, b, topic) paraphrase pairs, or []
    scored: object = None     # core.evaluate.pairs.ScoredPairs: graded pairs to rank (Spearman), or None


class Evaluator:
    """Held-out metrics of a run: masked-LM (clm: next-token) loss and accuracy against the unigram baseline,
    SimCSE alignment / uniformity / held-out loss, paraphrase-pair cosines."""

    def __init__(self, target: EvalModel, held_out: HeldOut, config, tokenizer, max_length: int):
        self.target = target
        self.held_out = held_out
        self.config = config
        self.tokenizer = tokenizer
        self.max_length = max_length

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Held-out metrics now (None where they do not apply)."""
        m: dict = dict.fromkeys(("heldout_mlm_loss", "heldout_mlm_accuracy", "heldout_clm_loss",
                                 "heldout_clm_accuracy", "unigram_loss", "unigram_accuracy",
                                 "heldout_simcse_loss", "alignment", "uniformity", "pair_cosine",
                                 "unrelated_cosine", "spearman", "pearson"))
        self.target.model.eval()
        if self.target.has_mlm and self.held_out.eval_batches:
            total = correct = 0
            loss_sum = uni_loss = uni_correct = 0.0
            for _, attn, inputs, labels in self.held_out.eval_batches:
                sel = labels != IGNORE
                gold = labels[sel].numpy()
                uni_loss += float(-self.held_out.unigram_logp[gold].sum())
                uni_correct += float((gold == self.held_out.unigram_top).sum())
                with self.target.autocast():
                    loss, logits = self.target.mlm_loss(inputs.to(self.target.device), attn.to(self.target.device),
                                                  labels.to(self.target.device), reduction="sum")
                loss_sum += float(loss)
                correct += int((logits.argmax(-1).cpu() == labels[sel]).sum())
                total += int(sel.sum())
            kind = "clm" if self.config.objective == "clm" else "mlm"    # which targets the labels hold
            n = max(total, 1)
            m.update({f"heldout_{kind}_loss": loss_sum / n, f"heldout_{kind}_accuracy": correct / n,
                      "unigram_loss": uni_loss / n, "unigram_accuracy": uni_correct / n})
        if "simcse" in self.config.objective and self.held_out.embed_batches:
            z = torch.cat([self._embed_eval(ids, attn) for ids, attn in self.held_out.embed_batches])
            if len(z) > 1:
                d2 = torch.cdist(z, z).pow(2)
                iu = torch.triu_indices(len(z), len(z), 1)
                m["uniformity"] = float(torch.log(torch.exp(-2 * d2[iu[0], iu[1]]).mean()))
            # Two dropout views of each held-out sentence: alignment and the held-out SimCSE loss,
            # with a fixed seed (forked, so training's random stream is untouched).
            with torch.random.fork_rng(devices=[self.target.device] if self.target.device.type == "cuda" else []):
                torch.manual_seed(self.config.seed + 2)
                self.target.model.train()
                align, sims, n = 0.0, 0.0, 0
                for ids, attn in self.held_out.embed_batches:
                    ids, attn = ids.to(self.target.device), attn.to(self.target.device)
                    with self.target.autocast():
                        z1, z2 = self.target.embed(ids, attn), self.target.embed(ids, attn)
                    sim = z1 @ z2.T / self.config.temperature
                    sims += float(F.cross_entropy(sim, torch.arange(len(ids), device=sim.device))) * len(ids)
                    align += float((z1 - z2).pow(2).sum(-1).sum())
                    n += len(ids)
                self.target.model.eval()
            m["alignment"] = align / n
            m["heldout_simcse_loss"] = sims / n
        if self.held_out.pairs:
            m.update(self.pair_scores())
        if self.held_out.scored is not None:
            m.update(self.scored_pair_correlations())
        return m

    def _embed_eval(self, ids, attn):
        with self.target.autocast():
            return self.target.embed(ids.to(self.target.device), attn.to(self.target.device)).float().cpu()

    @torch.no_grad()
    def pair_scores(self) -> dict:
        """Mean cosine of the paraphrase pairs vs. of unrelated pairs (a with another topic's b)."""
        was = self.target.model.training
        self.target.model.eval()
        a = self._embed_texts([p[0] for p in self.held_out.pairs])
        b = self._embed_texts([p[1] for p in self.held_out.pairs])
        pos = float((a * b).sum(-1).mean())
        others = unrelated(self.held_out.pairs)
        neg = float((a * b[others]).sum(-1).mean())
        self.target.model.train(was)
        return {"pair_cosine": pos, "unrelated_cosine": neg}

    @torch.no_grad()
    def scored_pair_correlations(self) -> dict:
        """Spearman and Pearson correlation of the graded pairs' cosines with their scores: the
        same numbers `encoderscope eval --pairs` gives the saved model."""
        from core.evaluate.metrics import pair_cosines, pearson, spearman
        was = self.target.model.training
        self.target.model.eval()
        scored = self.held_out.scored
        cos = pair_cosines(self._embed_texts(scored.a).double().numpy(), self._embed_texts(scored.b).double().numpy())
        self.target.model.train(was)
        return {"spearman": spearman(cos, scored.scores), "pearson": pearson(cos, scored.scores)}

    def _embed_texts(self, texts: list[str]) -> torch.Tensor:
        seqs = encode(self.tokenizer, texts, self.max_length)
        out = []
        for i in range(0, len(seqs), 64):
            out.append(self._embed_eval(*collate(seqs[i:i + 64], self.tokenizer.pad_token_id)))
        return torch.cat(out)


def read_pairs(path: str) -> list[tuple[str, str, str]]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"pairs file {path!r} does not exist")
    raw = p.read_text(encoding="utf-8-sig").splitlines()
    delim = "\t" if p.suffix.lower() == ".tsv" or (raw and "\t" in raw[0]) else ","
    rows = list(csv.DictReader(raw, delimiter=delim))
    if not rows or not {"a", "b"} <= set(rows[0]):
        raise InputError(f"{path}: expected columns a, b (and optionally topic)")
    pairs = [(r["a"].strip(), r["b"].strip(), (r.get("topic") or "").strip()) for r in rows
             if (r.get("a") or "").strip() and (r.get("b") or "").strip()]
    if len(pairs) < 2:
        raise InputError(f"{path}: at least two pairs are needed")
    return pairs


def unrelated(pairs) -> torch.Tensor:
    """For pair i, the index of a pair with another topic (the next such one, cyclically);
    without topics, the pair half-way round the list."""
    n = len(pairs)
    out = []
    for i, (_, _, topic) in enumerate(pairs):
        j = (i + n // 2) % n
        if topic:
            for k in range(n):
                cand = (i + n // 2 + k) % n
                if pairs[cand][2] != topic:
                    j = cand
                    break
        out.append(j if j != i else (i + 1) % n)
    return torch.tensor(out)


def _fmt(x, spec=".3f"):
    return "-" if x is None else format(x, spec)


def describe_eval(ev: dict) -> str:
    """One line for an "eval" event: what the CLI prints and the Train panel shows."""
    parts = [f"step {ev['step']}:"]
    if ev.get("heldout_clm_loss") is not None:
        parts.append(f"held-out next-token loss {_fmt(ev['heldout_clm_loss'])} (unigram {_fmt(ev['unigram_loss'])}), "
                     f"accuracy {_fmt(100 * ev['heldout_clm_accuracy'], '.1f')}% "
                     f"(unigram {_fmt(100 * ev['unigram_accuracy'], '.1f')}%)")
    if ev.get("heldout_mlm_loss") is not None:
        parts.append(f"held-out MLM loss {_fmt(ev['heldout_mlm_loss'])} (unigram {_fmt(ev['unigram_loss'])}), "
                     f"accuracy {_fmt(100 * ev['heldout_mlm_accuracy'], '.1f')}% "
                     f"(unigram {_fmt(100 * ev['unigram_accuracy'], '.1f')}%)")
    if ev.get("alignment") is not None:
        parts.append(f"SimCSE loss {_fmt(ev['heldout_simcse_loss'])}, alignment {_fmt(ev['alignment'])}, "
                     f"uniformity {_fmt(ev['uniformity'])}")
    if ev.get("pair_cosine") is not None:
        parts.append(f"paraphrase cos {_fmt(ev['pair_cosine'])} vs unrelated {_fmt(ev['unrelated_cosine'])}")
    if ev.get("spearman") is not None:
        parts.append(f"Spearman {_fmt(ev['spearman'])}")
    return " ".join(parts)
