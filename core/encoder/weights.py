"""Load real weights into our encoder, and save our own checkpoints.

- DistilBERT folders load with ``strict=True`` and no renaming: our modules are named like theirs.
- BERT-layout folders (BertModel / BertForMaskedLM, e.g. `minilm`) go through BERT_KEY_MAP.
- Our checkpoints: ``encoderscope.json`` (config) + ``model.safetensors`` + tokenizer files.
Missing or unexpected keys are an error that names them.
"""
from __future__ import annotations

import json
import re
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from core.encoder.model import Encoder, EncoderConfig, EncoderForMaskedLM, sinusoidal_table
from core.encoder.sources import CHECKPOINT_MARKER, read_json
from core.errors import ModelUnavailable, settings_fix
from core.files.atomic import readable_as_umask_allows, writing

CHECKPOINT_FORMAT = "encoderscope-checkpoint"
CHECKPOINT_VERSION = 1

# BERT name (regex) -> our (DistilBERT) name. One line per tensor family; nothing hidden.
BERT_KEY_MAP = [
    (r"^(?:bert\.)?embeddings\.(word_embeddings|position_embeddings|token_type_embeddings|LayerNorm)\.",
     r"embeddings.\1."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.query\.", r"transformer.layer.\1.attention.q_lin."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.key\.", r"transformer.layer.\1.attention.k_lin."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.self\.value\.", r"transformer.layer.\1.attention.v_lin."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.output\.dense\.", r"transformer.layer.\1.attention.out_lin."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.", r"transformer.layer.\1.sa_layer_norm."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.intermediate\.dense\.", r"transformer.layer.\1.ffn.lin1."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.output\.dense\.", r"transformer.layer.\1.ffn.lin2."),
    (r"^(?:bert\.)?encoder\.layer\.(\d+)\.output\.LayerNorm\.", r"transformer.layer.\1.output_layer_norm."),
    (r"^cls\.predictions\.transform\.dense\.", "vocab_transform."),
    (r"^cls\.predictions\.transform\.LayerNorm\.", "vocab_layer_norm."),
    (r"^cls\.predictions\.decoder\.weight$", "vocab_projector.weight"),
    (r"^cls\.predictions\.(?:decoder\.)?bias$", "vocab_projector.bias"),
]
# BERT tensors we knowingly drop: the pooler (unused for embeddings), the NSP head, and a
# position-id buffer that older checkpoints saved.
BERT_DROPPED = re.compile(r"^((bert\.)?pooler\.|cls\.seq_relationship\.|(bert\.)?embeddings\.position_ids$)")
DISTILBERT_DROPPED = re.compile(r"^(distilbert\.)?embeddings\.position_ids$")
MLM_HEAD_KEYS = ("vocab_transform.", "vocab_layer_norm.", "vocab_projector.")
# Attention pooling's learned query (core/encoder/model.py AttentionPooling): in the body, so under
# "distilbert." when the checkpoint has an MLM head. Neither DistilBERT nor BERT has a place for it.
ATTENTION_POOLING_KEYS = ("attention_pooling.query", "distilbert.attention_pooling.query")
# Checkpoints converted from the original TensorFlow BERT (bert-base-uncased among them) name
# LayerNorm parameters gamma/beta; transformers renames them on load, and so do we.
# A stored sinusoid may differ from ours by float rounding; a learned table differs by far more.
SINUSOID_TOLERANCE = 1e-3
LEGACY_LAYER_NORM = re.compile(r"(LayerNorm|layer_norm)\.(gamma|beta)$")


class WeightsError(ModelUnavailable):
    """The weights do not fit the architecture: names the missing/unexpected keys."""


def config_from_hf(cfg: dict) -> tuple[EncoderConfig, str]:
    """A transformers config.json -> (our config, layout 'distilbert' | 'bert')."""
    try:
        return _config_from_hf(cfg)
    except KeyError as e:
        raise ModelUnavailable(f"config.json of this {cfg.get('model_type')} model lacks the field {e}") from None
    except (TypeError, ValueError) as e:
        raise ModelUnavailable(f"config.json has a value the encoder cannot use: {e}") from None


def _config_from_hf(cfg: dict) -> tuple[EncoderConfig, str]:
    kind = cfg.get("model_type")
    if kind == "distilbert":
        act = cfg.get("activation", "gelu")
        return EncoderConfig(
            vocab_size=cfg["vocab_size"], max_position_embeddings=cfg.get("max_position_embeddings", 512),
            dim=cfg["dim"], n_layers=cfg["n_layers"], n_heads=cfg["n_heads"], hidden_dim=cfg["hidden_dim"],
            dropout=cfg.get("dropout", 0.1), attention_dropout=cfg.get("attention_dropout", 0.1),
            activation=_activation(act), positions="sinusoidal" if cfg.get("sinusoidal_pos_embds") else "learned",
            type_vocab_size=0, norm="post", layer_norm_eps=1e-12, pad_token_id=cfg.get("pad_token_id") or 0,
        ), "distilbert"
    if kind == "bert":
        if cfg.get("position_embedding_type", "absolute") != "absolute":
            raise ModelUnavailable(f"BERT with {cfg['position_embedding_type']!r} positions is not supported "
                                   "by the from-scratch encoder; run it with the transformers encoder",
                                   fix=settings_fix(backend="hf"))
        return EncoderConfig(
            vocab_size=cfg["vocab_size"], max_position_embeddings=cfg.get("max_position_embeddings", 512),
            dim=cfg["hidden_size"], n_layers=cfg["num_hidden_layers"], n_heads=cfg["num_attention_heads"],
            hidden_dim=cfg["intermediate_size"], dropout=cfg.get("hidden_dropout_prob", 0.1),
            attention_dropout=cfg.get("attention_probs_dropout_prob", 0.1),
            activation=_activation(cfg.get("hidden_act", "gelu")), positions="learned",
            type_vocab_size=cfg.get("type_vocab_size", 2), norm="post",
            layer_norm_eps=cfg.get("layer_norm_eps", 1e-12), pad_token_id=cfg.get("pad_token_id") or 0,
        ), "bert"
    raise ModelUnavailable(f"model type {kind!r} is not supported by the from-scratch encoder "
                           "(it reads DistilBERT and BERT layouts); try the transformers encoder",
                           fix=settings_fix(backend="hf"))


def _activation(name: str) -> str:
    if name == "gelu":
        return "gelu"
    if name in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
        return "gelu_tanh"
    raise ModelUnavailable(f"activation {name!r} is not supported by the from-scratch encoder")


class UnsafeWeights(WeightsError):
    """A pytorch_model.bin whose pickle asks for more than tensors: refused, never run."""


def read_state_dict(folder: Path) -> dict[str, torch.Tensor]:
    st, pt = folder / "model.safetensors", folder / "pytorch_model.bin"
    try:
        if st.is_file():
            return load_file(str(st))
        if pt.is_file():
            return _load_bin(pt)
    except WeightsError:
        raise
    except Exception as e:
        raise WeightsError(f"cannot read the weights in {folder}: {e}") from None
    raise WeightsError(f"{folder} holds no model.safetensors or pytorch_model.bin")


def check_weights(folder: Path) -> None:
    """Raise WeightsError unless the folder's weights can be read safely; cheap: a safetensors
    header, or a .bin's pickle memory-mapped (its tensors are not read)."""
    st, pt = folder / "model.safetensors", folder / "pytorch_model.bin"
    try:
        if st.is_file():
            with safe_open(str(st), framework="pt") as f:
                f.keys()
        elif pt.is_file():
            _load_bin(pt, mmap=True)
    except WeightsError:
        raise
    except Exception as e:
        raise WeightsError(f"cannot read the weights in {folder}: {e}") from None


@contextmanager
def quiet_pickle_notes():
    """torch's UserWarnings about a pickle it reads under weights_only ("Detected pickle protocol
    4..."): a file it refuses gets our one error line, with no torch warning printed before it."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
        yield


def _load_bin(path: Path, mmap: bool = False) -> dict[str, torch.Tensor]:
    """A .bin is a pickle: weights_only lets it build tensors and nothing else, so a file that
    asks for anything more (code to run) is refused, with a message that says so."""
    try:
        try:
            with quiet_pickle_notes():
                return torch.load(str(path), map_location="cpu", weights_only=True, mmap=mmap)
        except RuntimeError as e:
            if mmap and "mmap" in str(e):     # the legacy (non-zip) format cannot be mapped
                with quiet_pickle_notes():
                    return torch.load(str(path), map_location="cpu", weights_only=True)
            raise
    except Exception as e:
        # pickle.UnpicklingError, matched by name: this package never imports pickle (tests/project/test_layering.py)
        if type(e).__name__ != "UnpicklingError":
            raise
        wanted = re.search(r"GLOBAL (\S+)", str(e))
        raise UnsafeWeights(
            f"{path} was refused for safety: it is pickle data that asks to run Python code when "
            f"loaded ({'it calls ' + wanted.group(1) if wanted else 'more than plain tensors'}), and "
            "Encoderscope only reads tensors. Use a model.safetensors file of these weights instead: "
            "most model pages offer one, or whoever made this file can write one from the model in "
            "memory: python -c \"from safetensors.torch import save_file; "
            "save_file(model.state_dict(), 'model.safetensors')\"") from None


def legacy_names(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """LayerNorm.gamma/beta -> LayerNorm.weight/bias (TF-converted checkpoints)."""
    rename = {"gamma": "weight", "beta": "bias"}
    return {LEGACY_LAYER_NORM.sub(lambda m: f"{m[1]}.{rename[m[2]]}", k): v for k, v in state.items()}


def bert_to_ours(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    out, unknown = {}, []
    for key, tensor in state.items():
        if BERT_DROPPED.match(key):
            continue
        for pattern, repl in BERT_KEY_MAP:
            new, n = re.subn(pattern, repl, key)
            if n:
                out[new] = tensor
                break
        else:
            unknown.append(key)
    if unknown:
        raise WeightsError(f"unexpected keys in a BERT checkpoint: {', '.join(unknown[:10])}")
    return out


def nest_mlm(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], bool]:
    """Our-named flat state (body keys + optional head) -> (state for the right class, has_head).

    A body-only state is an ``Encoder``'s; with head keys it's an ``EncoderForMaskedLM``'s, whose
    body lives under ``distilbert.`` (already there for DistilBERT, added for BERT).
    """
    has_head = any(k.startswith(MLM_HEAD_KEYS) for k in state)
    if not has_head:
        return state, False
    nested = {}
    for k, v in state.items():
        nested[k if k.startswith(MLM_HEAD_KEYS) or k.startswith("distilbert.") else "distilbert." + k] = v
    return nested, True


def build_model(cfg: EncoderConfig, state: dict[str, torch.Tensor] | None, mlm_head: bool, where: str = ""):
    # BERT's random initialisation is skipped when a checkpoint follows (0.18 s of CPU for
    # minilm, on the way to a cold start's first result): every weight must come from `state`,
    # which the missing-keys check below makes sure of.
    model = (EncoderForMaskedLM if mlm_head else Encoder)(cfg, init=state is None)
    if state is None:
        return model
    words = state.get("distilbert.embeddings.word_embeddings.weight")
    if mlm_head and words is not None:
        projector = state.get("vocab_projector.weight")
        if projector is None:
            # The projection is tied to the word embeddings; checkpoints omit the copy.
            state = dict(state, **{"vocab_projector.weight": words})
        elif projector.shape != words.shape or not torch.equal(projector, words):
            # Tying would silently replace it: these weights are not this architecture's.
            raise WeightsError(f"the weights {where} have an output projection (vocab_projector / "
                               "cls.predictions.decoder) that is not tied to the word embeddings; "
                               "the encoder's MLM head ties them, so these weights cannot be loaded "
                               "into it (try the transformers encoder)", fix=settings_fix(backend="hf"))
    if cfg.positions == "sinusoidal":
        # Fixed encodings: our table is the closed form whatever the checkpoint stored.
        key = ("distilbert." if mlm_head else "") + "embeddings.position_embeddings.weight"
        if key in state:
            closed = model.state_dict()[key]
            _check_sinusoidal_table(state[key], closed, where)
            state = dict(state, **{key: closed})
    _check_shapes(model.state_dict(), state, where)
    result = model.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        parts = []
        if result.missing_keys:
            parts.append(f"missing keys: {', '.join(result.missing_keys[:10])}")
        if result.unexpected_keys:
            parts.append(f"unexpected keys: {', '.join(result.unexpected_keys[:10])}")
        raise WeightsError(f"the weights {where} do not fit the encoder: " + "; ".join(parts))
    if mlm_head:
        model.tie_weights()
    return model


def _check_shapes(expected: dict, state: dict, where: str) -> None:
    """Tensors whose shape the config contradicts (a width, FFN size, vocabulary or position
    table changed in config.json): one error naming them, not torch's report."""
    wrong = [f"{k} is {tuple(v.shape)}, the config makes it {tuple(expected[k].shape)}"
             for k, v in state.items() if k in expected and tuple(v.shape) != tuple(expected[k].shape)]
    if wrong:
        more = f" (and {len(wrong) - 3} more)" if len(wrong) > 3 else ""
        raise WeightsError(f"the config of {where} does not fit its weights: "
                           + "; ".join(wrong[:3]) + more + ": the config was changed or belongs "
                           "to other weights")


def _check_sinusoidal_table(stored: torch.Tensor, closed: torch.Tensor, where: str) -> None:
    """A config that says sinusoidal over weights that learned their positions: refused, since
    replacing the learned table would give other vectors without a word."""
    if stored.shape != closed.shape:
        raise WeightsError(f"the weights {where} hold a position table of shape "
                           f"{tuple(stored.shape)}, but the config asks for {tuple(closed.shape)}")
    if float((stored.float() - closed.float()).abs().max()) > SINUSOID_TOLERANCE:
        raise WeightsError(f"the config in {where} says sinusoidal positions, but the weights "
                           "hold learned ones: the config does not belong to these weights "
                           "(set sinusoidal_pos_embds back to false)")


def load_folder(folder: Path):
    """A model folder (HF DistilBERT/BERT or our checkpoint) -> (model in eval mode, config, layout)."""
    marker = folder / CHECKPOINT_MARKER
    if marker.is_file():
        meta = read_json(marker)
        if meta.get("format") != CHECKPOINT_FORMAT:
            raise WeightsError(f"{marker} is not an Encoderscope checkpoint file")
        cfg = EncoderConfig.from_dict(meta["config"])
        state, has_head = nest_mlm(read_state_dict(folder))
        return build_model(cfg, state, has_head, str(folder)).eval(), cfg, "encoderscope"
    cfg, layout = config_from_hf(read_json(folder / "config.json"))
    state, has_head = _ours(legacy_names(read_state_dict(folder)), layout)
    return build_model(cfg, state, has_head, str(folder)).eval(), cfg, layout


def _ours(raw: dict, layout: str) -> tuple[dict, bool]:
    """A transformers folder's tensors (or anything keyed like them) under our names."""
    if layout == "bert":
        raw = bert_to_ours(raw)
    else:
        raw = {k: v for k, v in raw.items() if not DISTILBERT_DROPPED.match(k)}
        if not any(k.startswith(MLM_HEAD_KEYS) for k in raw):
            # A DistilBertModel saved from inside a ForMaskedLM wrapper keeps the prefix.
            raw = {k.removeprefix("distilbert."): v for k, v in raw.items()}
    return nest_mlm(raw)


class _Shape:
    def __init__(self, shape):
        self.shape = tuple(shape)


def check_fits(folder: Path) -> None:
    """WeightsError unless the safetensors weights have the shapes the config makes, read
    from the file's header and a model built on the meta device (no tensor is loaded)."""
    st = folder / "model.safetensors"
    if not st.is_file():
        return
    try:
        with safe_open(str(st), framework="pt") as f:
            shapes = {k: _Shape(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as e:
        raise WeightsError(f"cannot read the weights in {folder}: {e}") from None
    if (folder / CHECKPOINT_MARKER).is_file():
        cfg = EncoderConfig.from_dict(read_json(folder / CHECKPOINT_MARKER)["config"])
        state, has_head = nest_mlm(shapes)
    else:
        cfg, layout = config_from_hf(read_json(folder / "config.json"))
        state, has_head = _ours(legacy_names(shapes), layout)
    with torch.device("meta"):
        expected = (EncoderForMaskedLM if has_head else Encoder)(cfg, init=False).state_dict()
    _check_shapes(expected, state, str(folder))
    # what loading would find missing or left over (a changed layer count or norm placement);
    # the MLM head's projection is tied to the word embeddings, so it may be absent
    missing = [k for k in expected if k not in state and not k.endswith("vocab_projector.weight")]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        parts = [f"{what} keys: {', '.join(keys[:3])}" + (f" (and {len(keys) - 3} more)" if len(keys) > 3 else "")
                 for what, keys in (("missing", missing), ("unexpected", unexpected)) if keys]
        raise WeightsError(f"the weights {folder} do not fit the encoder its config makes: "
                           + "; ".join(parts) + ": the config was changed or belongs to other weights")
    if cfg.positions == "sinusoidal":      # a learned table relabelled sinusoidal: refused on load too
        key = next((k for k in shapes if k.endswith("position_embeddings.weight")), None)
        if key is not None:
            with safe_open(str(st), framework="pt") as f:
                stored = f.get_tensor(key)
            _check_sinusoidal_table(stored, sinusoidal_table(cfg.max_position_embeddings, cfg.dim), str(folder))


def save_checkpoint(model, tokenizer, folder: Path, extra: dict | None = None) -> Path:
    """Weights as safetensors + our config as JSON + the tokenizer's own files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().contiguous().cpu() for k, v in model.state_dict().items()
             if k != "vocab_projector.weight"}          # tied to the word embeddings
    tmp = folder / "model.safetensors.tmp"
    with writing(folder / "model.safetensors"):
        save_file(state, str(tmp), metadata={"format": "pt"})
        readable_as_umask_allows(tmp)
        tmp.replace(folder / "model.safetensors")
    if tokenizer is not None:
        with writing(folder / "tokenizer.json"):     # an error of open() names its own file
            tokenizer.save_pretrained(str(folder))
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
            "config": model.config.to_dict(), "mlm_head": isinstance(model, EncoderForMaskedLM)}
    meta.update(extra or {})
    with writing(folder / CHECKPOINT_MARKER):
        (folder / CHECKPOINT_MARKER).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    return folder
