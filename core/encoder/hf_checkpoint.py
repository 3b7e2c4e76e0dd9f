"""Run an Encoderscope checkpoint under Hugging Face transformers (``--backend hf``).

A checkpoint holds our config (``encoderscope.json``) and our weight names (DistilBERT's), not a
transformers ``config.json``. Rather than write a second copy of every weight, the transformers
model is built here from our config and given our weights through the same key map that reads
BERT folders into our encoder (core/encoder/weights.py), run backwards:

- no token types, LayerNorm eps 1e-12  -> ``DistilBertForMaskedLM`` / ``DistilBertModel`` (same names)
- token types (a run started from minilm) -> ``BertForMaskedLM`` / ``BertModel`` (BERT names)
- pre-norm blocks (x + f(LN(x))), the Train panel's default, exist in neither: such a checkpoint
  is refused with a message that sends it to the from-scratch encoder, which reads it.
- a causal attention mask: BERT has it (``is_decoder=True``), DistilBERT has not, so a causal
  checkpoint runs only in the BERT layout (token types, e.g. a run started from minilm).
- attention pooling's query vector has no place in either: it is kept beside the model
  (``pooling_query``) and the Backend pools with it.
"""
from __future__ import annotations

from pathlib import Path

from core.encoder.model import EncoderConfig
from core.encoder.sources import CHECKPOINT_MARKER, read_json
from core.encoder.transformers_import import from_transformers
from core.encoder.weights import ATTENTION_POOLING_KEYS, CHECKPOINT_FORMAT, MLM_HEAD_KEYS, read_state_dict
from core.errors import ModelUnavailable, settings_fix

HF_ACTIVATION = {"gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh"}

# Our (DistilBERT) name -> BERT's, one line per tensor family (core/encoder/weights.BERT_KEY_MAP reversed).
OURS_TO_BERT = [
    ("embeddings.", "bert.embeddings."),
    ("transformer.layer.{i}.attention.q_lin.", "bert.encoder.layer.{i}.attention.self.query."),
    ("transformer.layer.{i}.attention.k_lin.", "bert.encoder.layer.{i}.attention.self.key."),
    ("transformer.layer.{i}.attention.v_lin.", "bert.encoder.layer.{i}.attention.self.value."),
    ("transformer.layer.{i}.attention.out_lin.", "bert.encoder.layer.{i}.attention.output.dense."),
    ("transformer.layer.{i}.sa_layer_norm.", "bert.encoder.layer.{i}.attention.output.LayerNorm."),
    ("transformer.layer.{i}.ffn.lin1.", "bert.encoder.layer.{i}.intermediate.dense."),
    ("transformer.layer.{i}.ffn.lin2.", "bert.encoder.layer.{i}.output.dense."),
    ("transformer.layer.{i}.output_layer_norm.", "bert.encoder.layer.{i}.output.LayerNorm."),
    ("vocab_transform.", "cls.predictions.transform.dense."),
    ("vocab_layer_norm.", "cls.predictions.transform.LayerNorm."),
    ("vocab_projector.bias", "cls.predictions.bias"),
]


def is_checkpoint(folder: Path) -> bool:
    return (Path(folder) / CHECKPOINT_MARKER).is_file()


def read_checkpoint_config(folder: Path) -> tuple[EncoderConfig, bool]:
    """(our config, has an MLM head) of the checkpoint in ``folder``."""
    meta = read_json(Path(folder) / CHECKPOINT_MARKER)
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise ModelUnavailable(f"{folder / CHECKPOINT_MARKER} is not an Encoderscope checkpoint file")
    return EncoderConfig.from_dict(meta["config"]), bool(meta.get("mlm_head"))


def transformers_layout(cfg: EncoderConfig) -> str:
    """'distilbert' or 'bert': the transformers architecture that computes what ``cfg`` does;
    ModelUnavailable (naming the backend that reads it) when there is none."""
    why = None
    if cfg.norm != "post":
        why = "pre-norm blocks (x + f(LN(x)) and a final LayerNorm)"
    elif cfg.type_vocab_size and cfg.positions != "learned":
        why = "token types together with sinusoidal positions"
    elif not cfg.type_vocab_size and cfg.layer_norm_eps != 1e-12:
        why = f"LayerNorm epsilon {cfg.layer_norm_eps:g} without token types"
    if not why and cfg.attention == "causal" and not cfg.type_vocab_size:
        raise ModelUnavailable(
            "this checkpoint uses a causal attention mask, which transformers' DistilBERT does not "
            "have (BERT has one, as a decoder, but only checkpoints with token types map to it): run "
            "it with the from-scratch encoder", fix=settings_fix(backend="scratch"))
    if why:
        raise ModelUnavailable(
            f"this checkpoint uses {why}, which transformers' DistilBERT and BERT do not have: "
            "run it with the from-scratch encoder", fix=settings_fix(backend="scratch"))
    return "bert" if cfg.type_vocab_size else "distilbert"


def hf_config(cfg: EncoderConfig, layout: str, mlm_head: bool):
    """The transformers config that describes the same network as ``cfg``."""
    BertConfig, DistilBertConfig = from_transformers("BertConfig", "DistilBertConfig")

    arch = ("DistilBertForMaskedLM" if mlm_head else "DistilBertModel") if layout == "distilbert" else \
        ("BertForMaskedLM" if mlm_head else "BertModel")
    common = {"vocab_size": cfg.vocab_size, "max_position_embeddings": cfg.max_position_embeddings,
              "pad_token_id": cfg.pad_token_id, "architectures": [arch], "tie_word_embeddings": True}
    if layout == "distilbert":
        return DistilBertConfig(dim=cfg.dim, n_layers=cfg.n_layers, n_heads=cfg.n_heads,
                                hidden_dim=cfg.hidden_dim, activation=HF_ACTIVATION[cfg.activation],
                                sinusoidal_pos_embds=cfg.positions == "sinusoidal",
                                dropout=cfg.dropout, attention_dropout=cfg.attention_dropout, **common)
    # is_decoder: BERT's causal self-attention mask (no cross-attention is added without add_cross_attention)
    return BertConfig(is_decoder=cfg.attention == "causal",
                      hidden_size=cfg.dim, num_hidden_layers=cfg.n_layers, num_attention_heads=cfg.n_heads,
                      intermediate_size=cfg.hidden_dim, hidden_act=HF_ACTIVATION[cfg.activation],
                      type_vocab_size=cfg.type_vocab_size, layer_norm_eps=cfg.layer_norm_eps,
                      hidden_dropout_prob=cfg.dropout, attention_probs_dropout_prob=cfg.attention_dropout,
                      **common)


def ours_to_bert(key: str) -> str:
    """One of our weight names -> BertForMaskedLM's."""
    body = key.removeprefix("distilbert.")
    parts = body.split(".")
    layer = parts[2] if body.startswith("transformer.layer.") else None
    for ours, theirs in OURS_TO_BERT:
        prefix = ours.format(i=layer) if layer is not None else ours
        if body.startswith(prefix):
            return theirs.format(i=layer) + body[len(prefix):]
    raise ModelUnavailable(f"the checkpoint has a weight transformers' BERT has no place for: {key}")


def checkpoint_weights(folder: Path, layout: str, mlm_head: bool) -> dict:
    """The checkpoint's tensors under the names the transformers model of ``layout`` uses
    (attention pooling's query left out: see pooling_query)."""
    state = {k: v for k, v in read_state_dict(Path(folder)).items() if k not in ATTENTION_POOLING_KEYS}
    if layout == "distilbert":
        if mlm_head:     # our body keys sit under distilbert. already; the head keys are DistilBERT's
            return {k if k.startswith((*MLM_HEAD_KEYS, "distilbert.")) else f"distilbert.{k}": v
                    for k, v in state.items()}
        return {k.removeprefix("distilbert."): v for k, v in state.items()}
    renamed = {ours_to_bert(k): v for k, v in state.items()}
    return renamed if mlm_head else {k.removeprefix("bert."): v for k, v in renamed.items()}


def pooling_query(folder: Path):
    """Attention pooling's learned query (D,) in the checkpoint, or None."""
    from safetensors import safe_open
    path = Path(folder) / "model.safetensors"
    if not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as f:
        key = next((k for k in ATTENTION_POOLING_KEYS if k in f.keys()), None)
        return None if key is None else f.get_tensor(key)


def load_for_transformers(folder: Path):
    """(transformers model in eval mode, its config) for the Encoderscope checkpoint in ``folder``.
    Every weight must find its place and every place its weight (the tied decoder excepted)."""
    BertForMaskedLM, BertModel, DistilBertForMaskedLM, DistilBertModel = from_transformers(
        "BertForMaskedLM", "BertModel", "DistilBertForMaskedLM", "DistilBertModel")

    cfg, mlm_head = read_checkpoint_config(folder)
    layout = transformers_layout(cfg)
    config = hf_config(cfg, layout, mlm_head)
    config._attn_implementation = "eager"
    cls = {("distilbert", True): DistilBertForMaskedLM, ("distilbert", False): DistilBertModel,
           ("bert", True): BertForMaskedLM, ("bert", False): BertModel}[(layout, mlm_head)]
    from transformers.utils import logging as hf_logging
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()       # a causal BertForMaskedLM warns that it is a decoder: meant here
    try:
        model = cls(config)
    finally:
        hf_logging.set_verbosity(level)
    result = model.load_state_dict(checkpoint_weights(folder, layout, mlm_head), strict=False)
    tied = {"vocab_projector.weight", "cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    missing = [k for k in result.missing_keys if k not in tied and not k.endswith("position_ids")]
    if missing or result.unexpected_keys:
        raise ModelUnavailable(f"the weights in {folder} do not fit transformers' {cls.__name__}: "
                               f"missing {', '.join(missing[:8]) or 'none'}; "
                               f"unexpected {', '.join(result.unexpected_keys[:8]) or 'none'}")
    if mlm_head:
        model.tie_weights()
    return model.eval(), config
