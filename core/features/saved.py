"""An SAE on disk: SAELens's layout (``cfg.json`` + ``sae_weights.safetensors`` with W_enc, b_enc,
W_dec, b_dec) plus ``encoderscope_sae.json``, what Encoderscope needs besides: the model it was
trained on (by weights hash), the site, the seed and the held-out split.

    save_sae(folder, sae, meta)
    sae, meta = load_sae(folder)        # one InputError for a damaged, foreign or odd folder
    check_model(meta, backend)          # refuses an SAE trained on another model

Weights are safetensors (no pickle); every file is written atomically.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import torch

from core.errors import InputError
from core.features.sae import SparseAutoencoder
from core.files.atomic import atomic_write

WEIGHTS_FILE = "sae_weights.safetensors"
SAELENS_CFG = "cfg.json"
META_FILE = "encoderscope_sae.json"
FORMAT = 1
WEIGHT_NAMES = ("W_enc", "b_enc", "W_dec", "b_dec")
SAELENS_VERSION = "6.0.0"     # the cfg.json format written (SAELens >= 6 reads it as it is)


@dataclass(frozen=True)
class SaeMeta:
    """What an SAE folder says about its SAE, besides the weights."""
    site: str                    # "L3.resid": the residual stream after layer 3 (as `patch --site`)
    model: str                   # the model's name or folder, for people
    model_sha256: str            # its weights' hash (core.encoder.fingerprint): what check_model compares
    d_in: int
    width: int
    k: int
    seed: int
    tokens_trained: int = 0
    held_out_fraction: float = 0.1
    n_sentences: int = 0         # sentences in the training corpus (the held-out split is over them)
    corpus_sha256: str = ""      # hash of the training sentences, in order
    scale: float = 1.0           # activations were divided by this while training (folded into the weights)
    created: str = ""            # ISO time, UTC
    precision: str = "fp32"      # what the model ran in while activations were collected
    extra: dict = field(default_factory=dict)

    @property
    def layer(self) -> int:
        """0-based block index of the site."""
        from core.features.collect import parse_feature_site
        return parse_feature_site(self.site).layer

    def to_dict(self) -> dict:
        return {"format": FORMAT, **asdict(self)}

    @classmethod
    def from_dict(cls, d: dict) -> SaeMeta:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


def saelens_cfg(meta: SaeMeta) -> dict:
    """cfg.json as SAELens 6 writes a TopK SAE's: raw activations in (no b_dec subtracted, no
    normalisation), so its encode is ours."""
    return {"architecture": "topk", "d_in": meta.d_in, "d_sae": meta.width, "k": meta.k,
            "dtype": "float32", "device": "cpu", "apply_b_dec_to_input": False,
            "normalize_activations": "none", "reshape_activations": "none",
            "rescale_acts_by_decoder_norm": False,
            "metadata": {"sae_lens_version": SAELENS_VERSION, "sae_lens_training_version": SAELENS_VERSION,
                         "model_name": meta.model, "hook_name": meta.site, "hook_head_index": None,
                         "prepend_bos": True, "context_size": None, "dataset_path": None,
                         "encoderscope": True}}


def save_sae(folder, sae: SparseAutoencoder, meta: SaeMeta) -> Path:
    """Write the SAE's three files into ``folder`` (created if needed); returns the folder."""
    from safetensors.torch import save
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tensors = {n: getattr(sae, n).detach().to("cpu", torch.float32).contiguous() for n in WEIGHT_NAMES}
    atomic_write(folder / WEIGHTS_FILE, save(tensors, metadata={"format": "pt"}))
    atomic_write(folder / SAELENS_CFG, json.dumps(saelens_cfg(meta), indent=1).encode())
    atomic_write(folder / META_FILE, json.dumps(meta.to_dict(), indent=1).encode())
    return folder


def _read_json(path: Path, what: str) -> dict:
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} ({what}) cannot be read: {e}; train the SAE again") from None
    if not isinstance(d, dict):
        raise InputError(f"{path} ({what}) is not a JSON object; train the SAE again")
    return d


def load_sae(folder, device="cpu") -> tuple[SparseAutoencoder, SaeMeta]:
    """(SAE on ``device``, its meta) from a folder save_sae wrote, checked: every file there,
    every weight of the shape the meta says, finite, decoder rows unit length."""
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(f"no SAE folder at {folder}: train one on a corpus first")
    if not (folder / META_FILE).is_file():
        foreign = (folder / SAELENS_CFG).is_file()
        raise InputError(f"{folder} has no {META_FILE}: " + (
            "it is an SAE from another tool, which does not say which model and site it reads; "
            "train one here on a corpus" if foreign else "it is not an SAE folder; train one on a corpus first"))
    raw = _read_json(folder / META_FILE, "the SAE's description")
    if raw.get("format") != FORMAT:
        raise InputError(f"{folder / META_FILE} is format {raw.get('format')!r}, not {FORMAT}: "
                         "written by another version; train the SAE again")
    try:
        meta = SaeMeta.from_dict(raw)
        meta.layer  # noqa: B018 - the site parses
        d_in, width, k = int(meta.d_in), int(meta.width), int(meta.k)
        ok = d_in > 0 and 0 < k <= width
    except (TypeError, ValueError) as e:
        raise InputError(f"{folder / META_FILE} is damaged ({e}); train the SAE again") from None
    if not ok:
        raise InputError(f"{folder / META_FILE} says d_in {d_in}, width {width}, k {k}: not an SAE; "
                         "train the SAE again")
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    try:
        tensors = load_file(str(folder / WEIGHTS_FILE))
    except (OSError, SafetensorError) as e:
        raise InputError(f"{folder / WEIGHTS_FILE} cannot be read ({e}); train the SAE again") from None
    shapes = {"W_enc": (d_in, width), "b_enc": (width,), "W_dec": (width, d_in), "b_dec": (d_in,)}
    for name, shape in shapes.items():
        t = tensors.get(name)
        if t is None or tuple(t.shape) != shape or not t.is_floating_point():
            got = "missing" if t is None else f"{tuple(t.shape)} {t.dtype}"
            raise InputError(f"{folder / WEIGHTS_FILE}: {name} should be {shape} floats, is {got}; "
                             "train the SAE again")
        if not bool(torch.isfinite(t).all()):
            raise InputError(f"{folder / WEIGHTS_FILE}: {name} holds NaN or infinite values; train the SAE again")
    norms = tensors["W_dec"].float().norm(dim=1)
    if not bool(((norms - 1).abs() < 1e-3).all()):
        raise InputError(f"{folder / WEIGHTS_FILE}: the decoder's rows are not unit vectors "
                         f"(norms {float(norms.min()):.3g} to {float(norms.max()):.3g}); train the SAE again")
    sae = SparseAutoencoder(d_in, width, k)
    with torch.no_grad():
        for name in WEIGHT_NAMES:
            getattr(sae, name).copy_(tensors[name].float())
    return sae.to(device).eval(), meta


def check_model(meta: SaeMeta, model) -> None:
    """An InputError unless ``model`` (a backend) is the model the SAE was trained on."""
    sha = getattr(model, "weights_sha256", "")
    if meta.model_sha256 and sha and sha != meta.model_sha256:
        raise InputError(f"this SAE was trained on {meta.model} (weights {meta.model_sha256[:12]}), not on "
                         f"{getattr(model, 'model_name', 'this model')} (weights {sha[:12]}): "
                         "load that model, or train an SAE for this one")
    if getattr(model, "dim", meta.d_in) != meta.d_in:
        raise InputError(f"this SAE reads {meta.d_in}-number activations; the model's are {model.dim}")
    n_layers = getattr(model, "n_layers", None)
    if n_layers is not None and meta.layer >= n_layers:
        raise InputError(f"this SAE reads {meta.site}; the model has {n_layers} layers")


