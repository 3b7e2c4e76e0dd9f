"""What the causal tools read off a final hidden state: the sentence's unit vector (the model's
pooling) and, at a [MASK], the probability of one word. One small function per step, shared by
patching sweeps, causal tracing and gradient attributions so they measure the same thing."""
from __future__ import annotations

import torch

from core.encoder.pooling import l2_normalize, pool
from core.errors import InputError, NoMLMHead


def mask_position(backend, ids: list[int]) -> int | None:
    """The first [MASK] among the token ids, or None."""
    mask_id = backend.tokenizer.mask_token_id
    return next((i for i, t in enumerate(ids) if t == mask_id), None)


def target_token(backend, word: str) -> int:
    """The vocabulary id of ``word``, which must be one WordPiece (p(word) is then one softmax entry)."""
    tok = backend.tokenizer
    pieces = tok(word, add_special_tokens=False)["input_ids"]
    if len(pieces) != 1 or pieces[0] == tok.unk_token_id:
        shown = " ".join(tok.convert_ids_to_tokens(pieces)) or "nothing"
        raise InputError(f"the word {word!r} is {shown} in this model's vocabulary: choose a word that is "
                         "one token of it (p(word) at the mask is then one number)")
    return pieces[0]


def need_mlm(backend, why: str) -> None:
    if not getattr(backend, "has_mlm", False):
        raise NoMLMHead(f"{backend.model_name} has no masked-LM head, so {why} cannot be measured: "
                        "leave out [MASK], or use a model with one (train one from minilm with the "
                        "masked-LM objective)",
                        fix={"kind": "train_mlm", "init": "minilm"})


def unit_vectors(backend, y: torch.Tensor, pooling: str) -> torch.Tensor:
    """(N, T, D) final hidden states of N one-sentence rows (no padding) -> (N, D) unit vectors, fp32."""
    ones = torch.ones(y.shape[:2], dtype=torch.long, device=y.device)
    return l2_normalize(pool(y.float(), ones, pooling, query=backend.pooling_query))


def mask_probability(backend, y: torch.Tensor, position: int, token: int) -> torch.Tensor:
    """(N, T, D) -> (N,) p(token) at ``position`` by the masked-LM head (softmax in fp32)."""
    logits = backend.model.head(y[:, position:position + 1]).float()
    return logits[:, 0].softmax(-1)[:, token]


def cosine(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine of unit vectors, in float64 (as the CLI's patch computes it)."""
    return (u.double() * v.double()).sum(-1)


def fraction_toward(after: torch.Tensor, start: float, goal: float) -> torch.Tensor:
    """How far ``after`` went from ``start`` to ``goal``: 0 = stayed, 1 = reached it; NaN where the
    goal is the start (there is no way to go: callers refuse or say so before showing it)."""
    gap = goal - start
    if abs(gap) <= 1e-12:
        return torch.full_like(after, float("nan"))
    return (after - start) / gap


def guessed_token(backend, target: str | None, run, mask_at: int) -> int:
    """The token whose p at the mask is read: ``target``'s id when one is given, else the top guess
    of ``run`` (1, T, D: the last hidden states of the run that sets the goal) at the mask."""
    if target:
        return target_token(backend, target)
    return int(backend.model.head(run[:, mask_at]).float().argmax(-1))
