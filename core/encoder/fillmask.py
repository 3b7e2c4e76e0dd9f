"""Fill-mask beyond the pipeline: honest multi-piece targets, joint completion, per-layer guesses.

Works on any backend through two public calls: ``backend.encode_ids`` and ``backend.mlm_logits``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from core.errors import InputError, NoMLMHead
from core.names import MASK

MAX_MASKS = 10


@dataclass
class FillMaskResult:
    text: str                                   # the input, with the tokenizer's mask token
    tokens: list                                # input tokens, specials included
    masks: list = field(default_factory=list)   # [{"position", "predictions": [...]}]
    joint: dict | None = None                   # {"text", "score", "tokens"}
    per_layer: list = field(default_factory=list)  # [{"position", "layers": [[{"token", "score"}]]}]

    def to_dict(self) -> dict:
        return {"text": self.text, "tokens": self.tokens, "masks": self.masks,
                "joint": self.joint, "per_layer": self.per_layer}


def _mlm_probs(backend, ids: list[int], per_layer=False):
    logits, layers = backend.mlm_logits(ids, per_layer)
    probs = logits[0].float().softmax(-1).cpu()                         # (T, V)
    layer_probs = [lg[0].float().softmax(-1).cpu() for lg in layers] if layers else None
    return probs, layer_probs


def _token_str(tok, token_id: int) -> str:
    return tok.decode([token_id]).strip()


def fill_mask(backend, text: str, top_k: int = 5, targets=None, per_layer: bool = False) -> FillMaskResult:
    if not backend.has_mlm:
        raise NoMLMHead(f"'{backend.model_name}' has no masked-LM head, so it cannot fill masks. "
                        "Use a model with one: distilbert-base-uncased (when it can be downloaded), "
                        "or train one from minilm on your own text",
                        fix={"kind": "train_mlm", "init": "minilm"})
    tok = backend.tokenizer
    if not isinstance(text, str) or not text.strip():
        raise InputError("the text is empty: type a sentence with [MASK] where a word is missing")
    if top_k < 1:
        raise InputError(f"top-k must be at least 1, not {top_k}")
    # [MASK] in any case ([mask], [Mask]) means the tokenizer's own mask token.
    text = re.sub(re.escape(MASK), lambda _: tok.mask_token, text, flags=re.IGNORECASE)
    n_masks = text.count(tok.mask_token)
    if n_masks == 0:
        raise InputError(f"no {MASK} in the text: put {MASK} where the model should guess a word")
    if n_masks > MAX_MASKS:
        raise InputError(f"{n_masks} masks is too many to predict anything meaningful; use at most {MAX_MASKS}")
    ids, cut = backend.encode_ids([text])
    ids = ids[0]
    positions = [i for i, t in enumerate(ids) if t == tok.mask_token_id]
    if len(positions) < n_masks:
        raise InputError(f"the text is longer than the model's {backend.max_length} tokens and "
                         f"{n_masks - len(positions)} mask(s) fell beyond the end")
    # No targets (None, []) means the whole vocabulary; a string that holds no word is a mistake.
    no_targets = targets is None or (not isinstance(targets, str) and not targets)
    target_pieces = None if no_targets else _target_pieces(tok, targets)

    probs, layer_probs = _mlm_probs(backend, ids, per_layer)
    result = FillMaskResult(text=text, tokens=tok.convert_ids_to_tokens(ids))
    for pos in positions:
        if target_pieces is None:
            p, idx = probs[pos].topk(min(top_k, probs.shape[-1]))
            preds = [{"token": _token_str(tok, int(i)), "token_id": int(i), "score": float(s)}
                     for s, i in zip(p, idx)]
        else:
            preds = [_score_target(backend, ids, pos, word, pieces, probs)
                     for word, pieces in target_pieces]
            preds.sort(key=lambda r: -r["score"])
            preds = preds[:top_k]
        result.masks.append({"position": pos, "predictions": preds})
        if layer_probs is not None:
            layers = []
            for lp in layer_probs:
                p, idx = lp[pos].topk(min(top_k, lp.shape[-1]))
                layers.append([{"token": _token_str(tok, int(i)), "score": float(s)} for s, i in zip(p, idx)])
            result.per_layer.append({"position": pos, "layers": layers})
    result.joint = _joint(backend, ids, positions, probs, text)
    return result


def _target_pieces(tok, targets) -> list[tuple[str, list[int]]]:
    if isinstance(targets, str):
        targets = [t for t in re.split(r"[,\s]+", targets) if t]
    out = []
    for word in targets:
        pieces = tok(word, add_special_tokens=False)["input_ids"]
        if not pieces:
            raise InputError(f"target {word!r} has no tokens")
        if tok.unk_token_id is not None and tok.unk_token_id in pieces:
            raise InputError(f"target {word!r} is not in the model's vocabulary (it becomes {tok.unk_token})")
        out.append((word, pieces))
    if not out:
        raise InputError("the targets hold no words: give candidate words separated by commas, e.g. cat,dog")
    return out


def _score_target(backend, ids, pos, word, pieces, probs) -> dict:
    """p(word) at the mask. Several pieces: open that many masks and score them left to right,
    p(w1) * p(w2 | w1) * ..., each factor from a fresh forward pass."""
    if len(pieces) == 1:
        return {"token": word, "token_id": pieces[0], "score": float(probs[pos, pieces[0]]),
                "pieces": [word], "multi_piece": False}
    mask_id = backend.tokenizer.mask_token_id
    seq = ids[:pos] + [mask_id] * len(pieces) + ids[pos + 1:]
    if len(seq) > backend.max_length:
        raise InputError(f"target {word!r} makes the text longer than the model's maximum")
    log_p = 0.0
    for j, piece in enumerate(pieces):
        p, _ = _mlm_probs(backend, seq)
        log_p += math.log(max(float(p[pos + j, piece]), 1e-45))
        seq[pos + j] = piece
    return {"token": word, "token_id": None, "score": math.exp(log_p),
            "pieces": backend.tokenizer.convert_ids_to_tokens(pieces), "multi_piece": True}


def _joint(backend, ids, positions, probs, text: str) -> dict:
    """Fill the most confident mask, re-run, repeat: a joint completion and its probability. Its
    text is the user's own with each mask filled in (not the tokenizer's decoding, which would
    lowercase an uncased model's input and respace its punctuation)."""
    tok = backend.tokenizer
    seq, open_positions, log_p = list(ids), list(positions), 0.0
    while open_positions:
        best = max(open_positions, key=lambda q: float(probs[q].max()))
        p, token_id = probs[best].max(-1)
        seq[best] = int(token_id)
        log_p += math.log(max(float(p), 1e-45))
        open_positions.remove(best)
        if open_positions:
            probs, _ = _mlm_probs(backend, seq)
    return {"text": fill_in(text, tok.mask_token, [_token_str(tok, seq[q]) for q in positions]),
            "tokens": [tok.convert_ids_to_tokens(seq[q]) for q in positions],
            "score": math.exp(log_p)}


def fill_in(text: str, mask: str, words: list[str]) -> str:
    """`text` with its first len(words) masks replaced by `words`, in order; a word piece
    ("##ing") joins the word before it."""
    parts = text.split(mask)
    out = parts[0]
    for i, rest in enumerate(parts[1:]):
        if i < len(words):
            word = words[i]
            out = (out.rstrip() + word[2:]) if word.startswith("##") else out + word
        else:
            out += mask
        out += rest
    return out
