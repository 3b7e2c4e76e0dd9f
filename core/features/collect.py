"""Activations at one site, streamed over sentences a batch at a time (never all in memory).

    for batch in iter_activations(backend, sentences, "L3.resid"):
        batch.acts           # (n_tokens, d_in) float32 on the model's device
        batch.sentence_ids   # (n_tokens,) which sentence each row comes from
        batch.positions      # (n_tokens,) its token position there ([CLS] is 0)

Sites are named as `patch --site` names them: "L3.resid" is the residual stream after layer 3
(1-based), as core/encoder/sites.py names every site. The forward stops right after the site's
block: the layers above it are never run.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from core.device import autocast
from core.encoder import sites
from core.encoder.batch_input import input_tensors
from core.encoder.batching import plan_batches
from core.encoder.sites import Where, where
from core.errors import Cancelled, InputError
from core.intervene.apply import encoder_of

SENTENCES_PER_CHUNK = 1024     # tokenised at a time; batches are planned inside a chunk


@dataclass
class ActivationBatch:
    acts: torch.Tensor           # (n_tokens, d_in) float32
    sentence_ids: torch.Tensor   # (n_tokens,) long: index into the sentences given
    positions: torch.Tensor      # (n_tokens,) long: token position in its sentence


def parse_feature_site(text: str) -> Where:
    """ "L3.resid" -> Where("resid", 2): a site an SAE can read (the residual stream after a block,
    every token; core/encoder/sites.py names every site)."""
    try:
        site = where(text)
    except InputError:
        site = None
    if site is None or site.kind != "resid":
        raise InputError(f"an SAE reads the residual stream after a layer, every token (e.g. L3.resid), not {text!r}")
    return site


def default_site(n_layers: int) -> str:
    """The middle of the stack: features there are past the word pieces and not yet pooled away."""
    return f"L{max(1, (n_layers + 1) // 2)}.resid"


def check_site(site: Where, n_layers: int, text: str) -> None:
    if not 0 <= site.layer < n_layers:
        raise InputError(f"site {text} is past this model's {n_layers} layers: use L1.resid to L{n_layers}.resid")


class _SiteReached(Exception):
    """Raised by the capture hook: the layers above the site need not run."""


@contextmanager
def site_hooks(model, site: Where, replace=None, capture=None):
    """A scoped ``with`` around forwards of ``model`` (a backend or Encoder): ``replace(acts) ->
    acts`` puts a new activation (B, T, D) at the site for the layers above; ``capture(acts)``
    then sees it. Only this thread's forwards are touched (core/encoder/sites.hooks)."""
    with sites.hooks(model) as at:
        if replace is not None:
            at.edit(site, replace)
        if capture is not None:
            at.read(site, capture)
        yield


def special_ids(backend) -> list[int]:
    """Token ids excluded from the activations by default: [CLS], [SEP] and padding."""
    tok = backend.tokenizer
    ids = {backend.model_tokenizer.pad_token_id or 0}
    for name in ("cls_token_id", "sep_token_id", "bos_token_id", "eos_token_id"):
        value = getattr(tok, name, None)
        if value is not None:
            ids.add(int(value))
    return sorted(ids)


def iter_activations(model, sentences, site: str, batch_size: int = 64, device=None,
                     include_special: bool = False, should_stop=None) -> Iterator[ActivationBatch]:
    """ActivationBatch per forward batch over ``sentences`` (a list), run on the model's device
    in its precision; rows of [CLS]/[SEP]/padding left out unless include_special.
    ``device``: where the batches are put (default the model's). should_stop() -> True ends it
    with Cancelled."""
    parsed = parse_feature_site(site)
    encoder = encoder_of(model)
    check_site(parsed, encoder.config.n_layers, site)
    out_device = torch.device(device) if device is not None else model.device
    pad = model.model_tokenizer.pad_token_id or 0
    specials = torch.tensor(special_ids(model), device=model.device)
    sentences = list(sentences)
    got: list[torch.Tensor] = []

    def capture(h):
        got.append(h)
        raise _SiteReached

    # the hooks, autocast and inference mode are entered per batch, never held across a yield:
    # the caller may run the model itself (or train) between batches
    for start in range(0, len(sentences), SENTENCES_PER_CHUNK):
        ids, _ = model.encode_ids(sentences[start:start + SENTENCES_PER_CHUNK])
        for rows in plan_batches([len(x) for x in ids], batch_size):
            if should_stop is not None and should_stop():
                raise Cancelled("stopped while reading activations")
            input_ids, mask, _ = input_tensors([ids[i] for i in rows], pad, model.device)
            got.clear()
            with torch.inference_mode(), autocast(model.device, model.precision), \
                    site_hooks(model, parsed, capture=capture):
                try:
                    encoder(input_ids, mask)
                except _SiteReached:
                    pass
                h = got[0].float()
                keep = mask.bool()
                if not include_special:
                    keep &= ~torch.isin(input_ids, specials)
                rows_t = torch.tensor(rows, device=model.device) + start
                sid = rows_t[:, None].expand_as(input_ids)[keep]
                pos = torch.arange(input_ids.shape[1], device=model.device)[None, :].expand_as(input_ids)[keep]
                batch = ActivationBatch(h[keep].to(out_device), sid.to(out_device), pos.to(out_device))
            yield batch
