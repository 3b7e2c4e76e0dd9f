"""Our from-scratch encoder (core/encoder/model.py) as a Backend: a model folder, or fresh random weights."""
from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from core.encoder.backends.base import Backend
from core.encoder.fingerprint import network_hash, weights_hash
from core.encoder.packed_forward import PackedEncoder, cast_for_inference, pack_for_cpu_inference
from core.encoder.sources import DEFAULT_MODEL, ModelSource, resolve
from core.encoder.tokenizer import ModelTokenizer
from core.errors import InputError


class ScratchBackend(Backend):
    """Our from-scratch encoder (core/encoder/model.py)."""
    backend = "scratch"

    def __init__(self, source: ModelSource, device, precision="fp32"):
        from core.encoder.weights import load_folder
        super().__init__(source, device, precision)
        self.model, cfg, self.layout = load_folder(source.folder)
        self.model.to(device).eval()
        self.model_tokenizer = ModelTokenizer(source.folder, cfg.max_position_embeddings, cfg.vocab_size)
        self.config = cfg
        self.dim, self.n_layers, self.n_heads = cfg.dim, cfg.n_layers, cfg.n_heads
        self.max_length = self.model_tokenizer.max_length
        self.has_mlm = hasattr(self.model, "head")
        self.encoder = self.model.distilbert if self.has_mlm else self.model
        self.packed = self._pack(device, precision)
        self.default_pooling = cfg.pooling
        self.pooling_query = self.encoder.pooling_query
        self.weights_sha256 = weights_hash(source.folder)
        self.network_sha256 = network_hash(source.folder)

    packed = None      # a PackedEncoder: CPU inference in few Python steps (core/encoder/packed_forward.py)

    def _pack(self, device, precision):
        """The fast inference path: oneDNN's packed weights on a CPU; elsewhere the Linears'
        weights cast to bf16 once (where bf16 runs), not by autocast on every call."""
        if device.type == "cpu":
            if not pack_for_cpu_inference(self.model, bf16=precision == "bf16"):
                return None
        else:
            cast_for_inference(self.model, bf16=precision == "bf16")
        return PackedEncoder(self.encoder)

    def _forward(self, input_ids, attention_mask, token_type_ids, hidden=False, attentions=False):
        if not (hidden or attentions) and self.packed is not None and self.packed.usable(input_ids):
            return self.packed(input_ids, attention_mask, token_type_ids), None, None
        out = self.encoder(input_ids, attention_mask, token_type_ids, hidden, attentions)
        return out.last_hidden_state, out.hidden_states, out.attentions

    def _mlm(self, input_ids, attention_mask, per_layer=False):
        logits, out = self.model(input_ids, attention_mask, output_hidden_states=per_layer)
        return logits, (self.model.layer_logits(out.hidden_states) if per_layer else None)


class RandomScratchBackend(ScratchBackend):
    """Our encoder with freshly initialised weights of a given config ("random:dim=64,layers=2"),
    and minilm's WordPiece tokenizer: what a model knows before any training."""

    def __init__(self, spec: str, device, precision="fp32"):
        from core.encoder.model import EncoderForMaskedLM
        cfg, seed = parse_random_spec(spec)
        Backend.__init__(self, ModelSource(spec, Path("."), "random"), device, precision)
        self.model_tokenizer = ModelTokenizer(resolve(DEFAULT_MODEL).folder, cfg.max_position_embeddings)
        cfg.vocab_size = len(self.model_tokenizer)
        torch.manual_seed(seed)
        self.model = EncoderForMaskedLM(cfg).to(device).eval()
        self.config, self.layout = cfg, "random"
        self.dim, self.n_layers, self.n_heads = cfg.dim, cfg.n_layers, cfg.n_heads
        self.max_length = self.model_tokenizer.max_length
        self.has_mlm, self.encoder = True, self.model.distilbert
        self.packed = self._pack(device, precision)
        h = hashlib.sha256()
        for k, v in sorted(self.model.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().cpu().numpy().tobytes())
        self.weights_sha256 = h.hexdigest()
        self.network_sha256 = hashlib.sha256(spec.encode()).hexdigest()


RANDOM_KEYS = {"dim": int, "layers": "n_layers", "heads": "n_heads", "ffn": "hidden_dim",
               "positions": str, "norm": str, "activation": str, "attention": str,
               "max_len": "max_position_embeddings"}


def parse_random_spec(spec: str):
    """'random' or 'random:dim=128,layers=2,heads=4,ffn=512,positions=sinusoidal,norm=pre,seed=0'."""
    from core.encoder.model import EncoderConfig
    fields = dict(dim=256, n_layers=4, n_heads=4, hidden_dim=1024, dropout=0.0, attention_dropout=0.0)
    seed = 0
    _, _, rest = spec.partition(":")
    for item in filter(None, (x.strip() for x in rest.split(","))):
        key, _, value = item.partition("=")
        if key == "seed":
            seed = int(value)
            continue
        target = RANDOM_KEYS.get(key)
        if target is None or not value:
            raise InputError(f"unknown setting {item!r} in {spec!r}; use {', '.join(RANDOM_KEYS)} or seed")
        name = key if target in (int, str) else target
        fields[name] = value if target is str else int(value)
    try:
        return EncoderConfig(**fields), seed
    except (ValueError, TypeError) as e:
        raise InputError(f"{spec!r}: {e}") from None
