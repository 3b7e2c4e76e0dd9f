"""Hugging Face transformers as a Backend: the reference implementation."""
from __future__ import annotations

from core.encoder import hf_checkpoint
from core.encoder.backends.base import Backend
from core.encoder.fingerprint import network_hash, weights_hash
from core.encoder.sources import ModelSource
from core.encoder.tokenizer import ModelTokenizer
from core.encoder.transformers_import import from_transformers
from core.encoder.weights import quiet_pickle_notes
from core.errors import InputError, ModelUnavailable


class HFBackend(Backend):
    """Hugging Face transformers: the reference, and the app's "DistilBERT" choice."""
    backend = "hf"

    def __init__(self, source: ModelSource, device, precision="fp32"):
        super().__init__(source, device, precision)
        folder = str(source.folder)
        if hf_checkpoint.is_checkpoint(source.folder):
            # our checkpoint: the transformers model is built from our config (core/encoder/hf_checkpoint.py)
            self.model, cfg = hf_checkpoint.load_for_transformers(source.folder)
            self.model.to(device)
            self.default_pooling = hf_checkpoint.read_checkpoint_config(source.folder)[0].pooling
            query = hf_checkpoint.pooling_query(source.folder)
            self.pooling_query = None if query is None else query.to(device)
        else:
            cfg = self._load_folder(folder, device)
        self.has_mlm = any(a.endswith("ForMaskedLM") for a in cfg.architectures or [])
        self.model_tokenizer = ModelTokenizer(source.folder, cfg.max_position_embeddings,
                                              getattr(cfg, "vocab_size", None))
        self.dim = cfg.hidden_size
        self.n_layers, self.n_heads = cfg.num_hidden_layers, cfg.num_attention_heads
        self.max_length = self.model_tokenizer.max_length
        self.weights_sha256 = weights_hash(source.folder)
        self.network_sha256 = network_hash(source.folder)

    def _load_folder(self, folder: str, device):
        """A transformers model folder -> its config; sets ``self.model``."""
        AutoConfig, AutoModel, AutoModelForMaskedLM = from_transformers(
            "AutoConfig", "AutoModel", "AutoModelForMaskedLM")
        try:
            cfg = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        except Exception as e:
            raise ModelUnavailable(f"transformers cannot read the config in {folder}: "
                                   f"{library_reason(e)}") from None
        archs = cfg.architectures or []
        cls = AutoModelForMaskedLM if any(a.endswith("ForMaskedLM") for a in archs) else AutoModel
        # The folder is local by now (downloads show their progress in core.encoder.sources): hide
        # transformers' per-tensor "Loading weights" bar, noise on every CLI call.
        from transformers.utils import logging as hf_logging
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            with quiet_pickle_notes():
                self.model = cls.from_pretrained(folder, attn_implementation="eager",
                                                 trust_remote_code=False).to(device).eval()
        except Exception as e:
            why = library_reason(e)
            if "ignore_mismatched_sizes" in why:   # its details went to a log we do not show
                why = "the sizes in its config.json do not fit its weights"
            raise ModelUnavailable(f"transformers cannot load the model in {folder}: {why}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        return cfg

    def _attention_impl(self, attentions: bool):
        # sdpa is faster, but returns *empty* attentions when they are asked for (transformers 5),
        # so switch to eager for inspection. Callers hold self._lock, so no forward sees a switch.
        want = "eager" if attentions or not hasattr(self.model, "set_attn_implementation") else "sdpa"
        if self.model.config._attn_implementation != want:
            self.model.set_attn_implementation(want)

    def _forward(self, input_ids, attention_mask, token_type_ids, hidden=False, attentions=False):
        self._attention_impl(attentions)
        body = self.model.base_model if self.has_mlm else self.model
        extra = {"token_type_ids": token_type_ids} if token_type_ids is not None and \
            getattr(body.config, "type_vocab_size", 0) else {}
        out = body(input_ids=input_ids, attention_mask=attention_mask,
                   output_hidden_states=hidden, output_attentions=attentions, **extra)
        return out.last_hidden_state, out.hidden_states, out.attentions

    def _mlm(self, input_ids, attention_mask, per_layer=False):
        self._attention_impl(False)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=per_layer)
        layers = [self._head(h) for h in out.hidden_states] if per_layer else None
        return out.logits, layers

    def _head(self, h):
        m = self.model
        if hasattr(m, "vocab_transform"):                   # DistilBERT
            h = m.activation(m.vocab_transform(h))
            return m.vocab_projector(m.vocab_layer_norm(h))
        if hasattr(m, "cls"):                               # BERT
            return m.cls(h)
        raise InputError(f"per-layer predictions are not available for {type(m).__name__}")


def library_reason(e: Exception) -> str:
    """transformers' or torch's reason, without advice we never follow: remote code stays off
    and pickled weights are never loaded unsafely, so neither is ever suggested."""
    text = str(e)
    if "trust_remote_code" in text:
        return ("its config names model code of its own, which Encoderscope never runs "
                "(remote code stays off): use a model whose architecture transformers has built in")
    if "weights_only" in text:
        return ("its weights are a pickle that torch will not load safely, and Encoderscope never "
                "loads one unsafely: save the weights as model.safetensors and try again")
    return text
