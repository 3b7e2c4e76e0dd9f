"""Activation patching: run sentence A with the numbers at some sites taken from sentence B.

A site's activation in B is captured by a clean run of B (with the rest of the intervention, if
any), then put in place of A's at the aligned token. Tokens align position by position when A and
B have the same number of tokens; a site at one token may name a word that occurs once in each
sentence, and is refused clearly otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from core.device import autocast
from core.encoder import sites
from core.errors import InputError
from core.intervene.apply import encoder_of, intervene
from core.intervene.spec import NOTHING, Intervention, Site


@dataclass(frozen=True)
class Alignment:
    """Which token of B each of A's patched positions takes its numbers from."""
    tokens_a: list
    tokens_b: list
    pairs: dict          # Site (token = A's position or None) -> {A position: B position}

    def to_dict(self) -> dict:
        return {"tokens_a": self.tokens_a, "tokens_b": self.tokens_b,
                "sites": {s.describe(): {str(a): b for a, b in m.items()} for s, m in self.pairs.items()}}


def resolve_token(token: str | int | None, tokens_a: list[str], tokens_b: list[str]) -> tuple[int, int] | None:
    """(A's position, B's position) of the token a site names; None for every token.

    A number is a position (0 = the first token, [CLS]) in both sentences. A word is found in A's
    tokens (WordPiece pieces as shown, "##" and case ignored) and must occur there once; when A and
    B have the same number of tokens they align position by position ("the cat sat" / "the dog
    sat": @cat takes "dog"), otherwise the word must occur once in B too."""
    if token is None:
        return None
    text = str(token).strip()
    if text.isdigit():
        p = int(text)
        if p >= len(tokens_a) or p >= len(tokens_b):
            raise InputError(f"token position {p} is past the end: A has tokens 0-{len(tokens_a) - 1}, "
                             f"B has 0-{len(tokens_b) - 1}")
        return p, p
    def where(tokens, name):
        hits = [i for i, t in enumerate(tokens) if t.lower().removeprefix("##") == text.lower().removeprefix("##")]
        if len(hits) != 1:
            shown = " ".join(tokens)
            raise InputError(f"token {text!r} occurs {len(hits)} times in sentence {name} ({shown}): "
                             "name a token that occurs once in it, or give its position (@3)")
        return hits[0]
    pa = where(tokens_a, "A")
    return (pa, pa) if len(tokens_a) == len(tokens_b) else (pa, where(tokens_b, "B"))


def align(sites: list[tuple[Site, str | None]], tokens_a: list[str],
          tokens_b: list[str]) -> tuple[list[Site], Alignment]:
    """Sites with A's token positions filled in, and the alignment they use. Refuses a site at
    every token when A and B differ in length: their tokens do not line up one to one."""
    resolved, pairs = [], {}
    for site, token in sites:
        where = resolve_token(token, tokens_a, tokens_b)
        if where is None:
            if len(tokens_a) != len(tokens_b):
                raise InputError(
                    f"A has {len(tokens_a)} tokens and B has {len(tokens_b)}, so {site.describe()} at every "
                    "token has no token-by-token alignment: use sentences of the same length, or patch one "
                    f"token ({site.describe()}@WORD)")
            s = replace(site, token=None)
            pairs[s] = {i: i for i in range(len(tokens_a))}
        else:
            s = replace(site, token=where[0])
            pairs[s] = {where[0]: where[1]}
        resolved.append(s)
    return resolved, Alignment(list(tokens_a), list(tokens_b), pairs)


def capture_sites(model, input_ids_b: torch.Tensor, alignment: Alignment, n_tokens_a: int,
                  spec: Intervention = NOTHING, means=None) -> dict:
    """{Site: (1, T_A, D)} B's activations at each site of the alignment, put at A's positions
    (a head site: every head's output side by side, the site Lk.heads; apply takes its columns).
    B runs with ``spec`` (without its patches): patching asks what B's numbers do in A's run.
    A backend's B runs as its patched A will (backend.embed inside intervene): its precision and
    autocast, through the modules, one sentence unpadded; so A patched from A is A, bit for bit."""
    encoder = encoder_of(model)
    device = getattr(model, "device", None)
    precision = getattr(model, "precision", "fp32") if device is not None else "fp32"
    with sites.hooks(encoder) as at:
        got = {site: at.capture(sites.site_name("heads" if site.kind == "head" else site.kind, site.layer))
               for site in alignment.pairs}
        with torch.inference_mode(), autocast(device or input_ids_b.device, precision), \
                intervene(encoder, spec.without_patch(), means):
            encoder(input_ids_b, torch.ones_like(input_ids_b))
    out = {}
    for site, mapping in alignment.pairs.items():
        b = got[site].value
        placed = torch.zeros(1, n_tokens_a, b.shape[-1], dtype=b.dtype, device=b.device)
        for pa, pb in mapping.items():
            placed[0, pa] = b[0, pb]
        out[site] = placed
    return out


def patched_run(backend, text_a: str, text_b: str, sites: list[tuple[Site, str | None]],
                spec: Intervention = NOTHING, means=None):
    """Everything needed to run A patched from B: (spec with the patches, patch_source, alignment,
    A's ids). Use as ``with intervene(backend, spec, means, source): ...`` on A."""
    ids, _ = backend.encode_ids([text_a, text_b])
    tok = backend.tokenizer
    tokens_a, tokens_b = tok.convert_ids_to_tokens(ids[0]), tok.convert_ids_to_tokens(ids[1])
    resolved, alignment = align(sites, tokens_a, tokens_b)
    patched = replace(spec, patch=tuple(resolved))
    encoder = encoder_of(backend)
    patched.check(encoder.config.n_layers, encoder.config.n_heads)
    input_b = torch.tensor([ids[1]], device=backend.device)
    source = capture_sites(backend, input_b, alignment, len(ids[0]), spec, means)
    return patched, source, alignment, ids[0]

