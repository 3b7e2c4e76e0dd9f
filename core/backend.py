"""One API over two encoders: ours (``scratch``) and Hugging Face transformers (``hf``).

The app, the CLI and the store all go through ``get_backend(...)``. Each backend only knows how
to run its network (``_forward`` / ``_mlm``); tokenising, batching, pooling, inspection and
fill-mask are written once here and in ``core.fillmask``.
"""
from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import fillmask
from .device import autocast, describe_device, pick_device
from .errors import Cancelled, InputError, ModelUnavailable
from .model import pack_for_cpu_inference
from .pooling import POOLINGS, l2_normalize, pool
from .sources import PACKAGED, DEFAULT_HUB_MODEL, ModelSource, resolve

log = logging.getLogger(__name__)
BACKENDS = ("scratch", "hf")
MAX_TEXT_CHARS = 1_000_000   # beyond this a "sentence" is a mistake (a whole file pasted in)


@dataclass
class EmbedStats:
    total: int = 0                       # texts embedded
    truncated: int = 0                   # texts cut to the model's maximum length
    truncated_indices: list = field(default_factory=list)
    seconds: float = 0.0


@dataclass(frozen=True)
class Fingerprint:
    """What a vector means: which weights, pooled how, how long, normalised or not."""
    model: str
    weights_sha256: str
    pooling: str
    dim: int
    normalized: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Fingerprint":
        return cls(model=d["model"], weights_sha256=d["weights_sha256"], pooling=d["pooling"],
                   dim=int(d["dim"]), normalized=bool(d.get("normalized", True)))

    def compatible(self, other: "Fingerprint") -> bool:
        # The name is for people; the same weights under another name are the same model.
        return (self.weights_sha256, self.pooling, self.dim, self.normalized) == \
               (other.weights_sha256, other.pooling, other.dim, other.normalized)

    def describe(self) -> str:
        return f"{self.model} ({self.pooling} pooling, {self.dim}-d, weights {self.weights_sha256[:12]})"


@dataclass
class Inspection:
    tokens: list                 # as the tokenizer writes them, specials included
    attentions: np.ndarray       # (L, H, T, T) float32
    hidden_states: np.ndarray    # (L + 1, T, D) float32: embeddings output, then each layer
    device: str
    truncated: int = 0           # tokens cut beyond the model's maximum


def _is_cancelled(cancel) -> bool:
    if cancel is None:
        return False
    return cancel.is_set() if hasattr(cancel, "is_set") else bool(cancel())


_hash_cache: dict = {}


def weights_hash(folder: Path) -> str:
    """sha256 of the weight file: the same folder gives the same identity on either backend."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        path = folder / name
        if path.is_file():
            st = path.stat()
            key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
            if key not in _hash_cache:
                h = hashlib.sha256()
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 22), b""):
                        h.update(chunk)
                _hash_cache[key] = h.hexdigest()
            return _hash_cache[key]
    raise ModelUnavailable(f"{folder} holds no weights to fingerprint")


class Backend:
    """Shared logic. Subclasses set: tokenizer, device, dim, n_layers, n_heads, max_length,
    has_mlm, and implement _forward and _mlm."""

    backend = "?"

    def __init__(self, source: ModelSource, device: torch.device, precision: str):
        self.source = source
        self.model_name = source.name
        self.device = device
        self.device_name = describe_device(device)
        self.precision = precision
        self._lock = threading.Lock()   # one forward at a time per model object

    # -- implemented by each backend ------------------------------------------------------
    def _forward(self, input_ids, attention_mask, token_type_ids, hidden=False, attentions=False):
        """-> (last_hidden (B,T,D), hidden_states tuple or None, attentions tuple or None)"""
        raise NotImplementedError

    def _mlm(self, input_ids, attention_mask, per_layer=False):
        """-> (logits (B,T,V), per-layer logits list or None)"""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def fingerprint(self, pooling: str = "mean") -> "Fingerprint":
        check_pooling(pooling)
        return Fingerprint(self.model_name, self.weights_sha256, pooling, self.dim, True)

    def encode_ids(self, texts: list[str]) -> tuple[list[list[int]], list[int]]:
        """Token ids with specials, cut to max_length; and the indices of texts that were cut."""
        for i, t in enumerate(texts):
            if not isinstance(t, str) or not t.strip():
                raise InputError(f"text {i + 1} is empty: every text needs at least one visible character")
            if len(t) > MAX_TEXT_CHARS:
                raise InputError(f"text {i + 1} is {len(t):,} characters long; the limit is "
                                 f"{MAX_TEXT_CHARS:,} (split long documents into sentences)")
        enc = self.tokenizer(texts, add_special_tokens=True, truncation=True, max_length=self.max_length,
                             return_overflowing_tokens=True)
        # A text longer than max_length comes back as several rows; its first row is the cut text.
        sample = enc["overflow_to_sample_mapping"]
        ids, cut = [None] * len(texts), []
        for row, i in enumerate(sample):
            if ids[i] is None:
                ids[i] = enc["input_ids"][row]
            elif not cut or cut[-1] != i:
                cut.append(i)
        return ids, cut

    def _batch(self, ids: list[list[int]]):
        T = max(len(x) for x in ids)
        pad = self.tokenizer.pad_token_id or 0
        input_ids = torch.full((len(ids), T), pad, dtype=torch.long)
        mask = torch.zeros((len(ids), T), dtype=torch.long)
        for row, x in enumerate(ids):
            input_ids[row, : len(x)] = torch.tensor(x)
            mask[row, : len(x)] = 1
        return input_ids.to(self.device), mask.to(self.device)

    def embed(self, texts, pooling: str = "mean", batch_size: int = 32, progress=None, cancel=None,
              stats: EmbedStats | None = None) -> np.ndarray:
        check_pooling(pooling)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InputError(f"batch size must be a whole number of at least 1, not {batch_size!r}")
        texts = list(texts)
        t0 = time.perf_counter()
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        ids, cut = self.encode_ids(texts)
        if cut:
            log.warning("%d of %d texts were longer than %d tokens and were truncated",
                        len(cut), len(texts), self.max_length)
        # Length-bucketed batches: sort by length so padding (wasted compute) is minimal.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        done = 0
        with self._lock, torch.inference_mode(), autocast(self.device, self.precision):
            for start in range(0, len(order), batch_size):
                if _is_cancelled(cancel):
                    raise Cancelled(f"embedding cancelled after {done} of {len(texts)} texts")
                rows = order[start: start + batch_size]
                input_ids, mask = self._batch([ids[i] for i in rows])
                hidden, _, _ = self._forward(input_ids, mask, None)
                vec = l2_normalize(pool(hidden.float(), mask, pooling))
                out[rows] = vec.cpu().numpy()
                done += len(rows)
                if progress is not None:
                    progress(done, len(texts))
        if stats is not None:
            stats.total += len(texts)
            stats.truncated += len(cut)
            stats.truncated_indices.extend(cut)
            stats.seconds += time.perf_counter() - t0
        return out

    def inspect(self, text: str, pair: str | None = None) -> Inspection:
        """Tokens, every layer's attentions and hidden states for one text, or for a sentence
        pair read the BERT way: [CLS] text [SEP] pair [SEP], with token types 0 then 1."""
        if pair is None or not pair.strip():
            ids, cut = self.encode_ids([text])
            ids, types = ids[0], None
            # verbose=False: counting the full length is not running it (no "indexing errors" warning)
            full = len(self.tokenizer(text, truncation=False, verbose=False)["input_ids"]) if cut else len(ids)
        else:
            for t in (text, pair):
                if not t.strip():
                    raise InputError("both texts of a pair need at least one visible character")
            enc = self.tokenizer(text, pair, truncation="longest_first", max_length=self.max_length,
                                 return_token_type_ids=True)
            ids, types = enc["input_ids"], enc["token_type_ids"]
            full = len(self.tokenizer(text, pair, truncation=False, verbose=False)["input_ids"])
        with self._lock, torch.inference_mode(), autocast(self.device, self.precision):
            input_ids, mask = self._batch([ids])
            type_ids = None if types is None else torch.tensor([types], device=self.device)
            _, hidden, att = self._forward(input_ids, mask, type_ids, hidden=True, attentions=True)
        return Inspection(
            tokens=self.tokenizer.convert_ids_to_tokens(ids),
            attentions=torch.stack([a[0] for a in att]).float().cpu().numpy(),
            hidden_states=torch.stack([h[0] for h in hidden]).float().cpu().numpy(),
            device=self.device_name, truncated=full - len(ids))

    def fill_mask(self, text: str, top_k: int = 5, targets=None, per_layer: bool = False):
        return fillmask.fill_mask(self, text, top_k=top_k, targets=targets, per_layer=per_layer)

    def describe(self) -> dict:
        return {"model": self.model_name, "backend": self.backend, "device": self.device_name,
                "dim": self.dim, "layers": self.n_layers, "heads": self.n_heads,
                "max_length": self.max_length, "mlm_head": self.has_mlm, "source": self.source.kind,
                "precision": self.precision}


def check_pooling(pooling: str):
    if pooling not in POOLINGS:
        raise InputError(f"pooling must be one of {', '.join(POOLINGS)}, not {pooling!r}")


# A folder needs one of these for AutoTokenizer to read a real vocabulary: without them
# transformers 5 quietly builds an empty tokenizer that turns every word into [UNK].
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "tokenizer.model",
                   "sentencepiece.bpe.model")


def _load_tokenizer(folder: Path, vocab_size: int | None = None):
    from transformers import AutoTokenizer
    if not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise ModelUnavailable(f"{folder} has no tokenizer files (tokenizer.json or vocab.txt); "
                               "copy them from the model the weights came from")
    try:
        tok = AutoTokenizer.from_pretrained(str(folder), use_fast=True, trust_remote_code=False)
    except Exception as e:
        raise ModelUnavailable(f"cannot load the tokenizer in {folder}: {e}") from None
    if not tok.is_fast:
        raise ModelUnavailable(f"the tokenizer in {folder} has no fast (Rust) version")
    if vocab_size is not None and len(tok) > vocab_size:
        raise ModelUnavailable(f"the tokenizer in {folder} has {len(tok):,} tokens but the model's "
                               f"vocabulary has {vocab_size:,}: they belong to different models")
    return tok


def _max_length(model_max: int, tok) -> int:
    tmax = getattr(tok, "model_max_length", None) or model_max
    return int(min(model_max, tmax))       # tokenizers say 1e30 when they don't know


class ScratchBackend(Backend):
    """Our from-scratch encoder (core/model.py)."""
    backend = "scratch"

    def __init__(self, source: ModelSource, device, precision="fp32"):
        from .weights import load_folder
        super().__init__(source, device, precision)
        self.model, cfg, self.layout = load_folder(source.folder)
        self.model.to(device).eval()
        if device.type == "cpu":
            pack_for_cpu_inference(self.model, bf16=precision == "bf16")
        self.tokenizer = _load_tokenizer(source.folder, cfg.vocab_size)
        self.config = cfg
        self.dim, self.n_layers, self.n_heads = cfg.dim, cfg.n_layers, cfg.n_heads
        self.max_length = _max_length(cfg.max_position_embeddings, self.tokenizer)
        self.has_mlm = hasattr(self.model, "head")
        self.encoder = self.model.distilbert if self.has_mlm else self.model
        self.weights_sha256 = weights_hash(source.folder)

    def _forward(self, input_ids, attention_mask, token_type_ids, hidden=False, attentions=False):
        out = self.encoder(input_ids, attention_mask, token_type_ids, hidden, attentions)
        return out.last_hidden_state, out.hidden_states, out.attentions

    def _mlm(self, input_ids, attention_mask, per_layer=False):
        logits, out = self.model(input_ids, attention_mask, output_hidden_states=per_layer)
        return logits, (self.model.layer_logits(out.hidden_states) if per_layer else None)


class RandomScratchBackend(ScratchBackend):
    """Our encoder with freshly initialised weights of a given config ("random:dim=64,layers=2"),
    and minilm's WordPiece tokenizer: what a model knows before any training."""

    def __init__(self, spec: str, device, precision="fp32"):
        from .model import EncoderForMaskedLM
        cfg, seed = parse_random_spec(spec)
        Backend.__init__(self, ModelSource(spec, Path("."), "random"), device, precision)
        self.tokenizer = _load_tokenizer(resolve("minilm").folder)
        cfg.vocab_size = len(self.tokenizer)
        torch.manual_seed(seed)
        self.model = EncoderForMaskedLM(cfg).to(device).eval()
        if device.type == "cpu":
            pack_for_cpu_inference(self.model, bf16=precision == "bf16")
        self.config, self.layout = cfg, "random"
        self.dim, self.n_layers, self.n_heads = cfg.dim, cfg.n_layers, cfg.n_heads
        self.max_length = _max_length(cfg.max_position_embeddings, self.tokenizer)
        self.has_mlm, self.encoder = True, self.model.distilbert
        h = hashlib.sha256()
        for k, v in sorted(self.model.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().cpu().numpy().tobytes())
        self.weights_sha256 = h.hexdigest()


RANDOM_KEYS = {"dim": int, "layers": "n_layers", "heads": "n_heads", "ffn": "hidden_dim",
               "positions": str, "norm": str, "activation": str, "max_len": "max_position_embeddings"}


def parse_random_spec(spec: str):
    """'random' or 'random:dim=128,layers=2,heads=4,ffn=512,positions=sinusoidal,norm=pre,seed=0'."""
    from .model import EncoderConfig
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


class HFBackend(Backend):
    """Hugging Face transformers: the reference, and the app's "DistilBERT" choice."""
    backend = "hf"

    def __init__(self, source: ModelSource, device, precision="fp32"):
        from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM
        super().__init__(source, device, precision)
        folder = str(source.folder)
        try:
            cfg = AutoConfig.from_pretrained(folder, trust_remote_code=False)
        except Exception as e:
            raise ModelUnavailable(f"transformers cannot read the config in {folder}: {e}") from None
        archs = cfg.architectures or []
        self.has_mlm = any(a.endswith("ForMaskedLM") for a in archs)
        cls = AutoModelForMaskedLM if self.has_mlm else AutoModel
        # The folder is local by now (downloads show their progress in core.sources): hide
        # transformers' per-tensor "Loading weights" bar, noise on every CLI call.
        from transformers.utils import logging as hf_logging
        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            self.model = cls.from_pretrained(folder, attn_implementation="eager",
                                             trust_remote_code=False).to(device).eval()
        except Exception as e:
            raise ModelUnavailable(f"transformers cannot load the model in {folder}: {e}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.tokenizer = _load_tokenizer(source.folder, getattr(cfg, "vocab_size", None))
        self.dim = cfg.hidden_size
        self.n_layers, self.n_heads = cfg.num_hidden_layers, cfg.num_attention_heads
        self.max_length = _max_length(cfg.max_position_embeddings, self.tokenizer)
        self.weights_sha256 = weights_hash(source.folder)

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


_cache: dict = {}
_cache_lock = threading.Lock()


def get_backend(model: str = "minilm", backend: str = "scratch", device=None, precision: str = "fp32",
                progress=None) -> Backend:
    """The loaded model, cached: one object per (model, backend, device, precision)."""
    if backend not in BACKENDS:
        raise InputError(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    dev = pick_device(device if isinstance(device, str) or device is None else str(device))
    autocast(dev, precision)   # validates the precision on this device
    if model == "random" or model.startswith("random:"):
        if backend != "scratch":
            raise InputError("random weights exist only for the from-scratch encoder (--backend scratch)")
        key = (model, backend, str(dev), precision)
        with _cache_lock:
            if key not in _cache:
                _cache[key] = RandomScratchBackend(model, dev, precision)
            return _cache[key]
    source = resolve(model, progress=progress)
    # The weights' mtime is part of the key: a model retrained in place is loaded afresh.
    key = (str(source.folder.resolve()), _weights_mtime(source.folder), backend, str(dev), precision)
    with _cache_lock:
        if key not in _cache:
            cls = ScratchBackend if backend == "scratch" else HFBackend
            _cache[key] = cls(source, dev, precision)
        return _cache[key]


def _weights_mtime(folder: Path) -> int:
    for name in ("model.safetensors", "pytorch_model.bin"):
        if (folder / name).is_file():
            return (folder / name).stat().st_mtime_ns
    return 0


def clear_cache():
    with _cache_lock:
        _cache.clear()


def trained_models() -> list[Path]:
    """Checkpoints saved under the user-data models folder (where the Train panel writes)."""
    from .paths import models_dir
    from .sources import CHECKPOINT_MARKER
    return sorted(p for p in models_dir().iterdir() if (p / CHECKPOINT_MARKER).is_file())


def list_models(extra_folders=(), include_trained: bool = True) -> list[dict]:
    """Known models: packaged, the default hub model, trained checkpoints in the user-data
    folder, and any folders given."""
    from .sources import CHECKPOINT_MARKER, check_folder, read_json
    from .weights import UnsafeWeights, check_weights, config_from_hf
    from .model import EncoderConfig

    rows = []

    def describe(name, kind, folder):
        row = {"name": name, "source": kind, "available": folder is not None}
        if folder is not None:
            try:
                if (folder / CHECKPOINT_MARKER).is_file():
                    meta = read_json(folder / CHECKPOINT_MARKER)
                    cfg, mlm = EncoderConfig.from_dict(meta["config"]), bool(meta.get("mlm_head"))
                else:
                    raw = read_json(folder / "config.json")
                    cfg, _ = config_from_hf(raw)
                    mlm = any(a.endswith("ForMaskedLM") for a in raw.get("architectures") or [])
                row.update(dim=cfg.dim, layers=cfg.n_layers, heads=cfg.n_heads, mlm_head=mlm,
                           folder=str(folder))
                check_weights(folder)      # "available" only if its weights can be read safely
            except Exception as e:
                row.update(available=False, error=str(e))
                if isinstance(e, UnsafeWeights):
                    row["refused"] = "unsafe pickle"
        return row

    from .sources import packaged_folder
    for name in PACKAGED:
        rows.append(describe(name, "packaged", packaged_folder(name)))
    try:
        hub = resolve_cached(DEFAULT_HUB_MODEL)
    except ModelUnavailable:
        hub = None
    row = describe(DEFAULT_HUB_MODEL, "hub", hub)
    if hub is None:
        # What users get once it downloads: DistilBERT base, with its MLM head.
        row.update(dim=768, layers=6, heads=12, mlm_head=True,
                   note="not in the Hugging Face cache; downloads on first use when online")
    rows.append(row)
    extra = [Path(f) for f in extra_folders]
    if include_trained:
        extra += [p for p in trained_models() if p not in extra]
    for f in extra:
        path = Path(f)
        try:
            check_folder(path)
            kind = "trained" if (path / CHECKPOINT_MARKER).is_file() else "folder"
            rows.append(describe(str(path), kind, path))
        except ModelUnavailable as e:
            rows.append({"name": str(path), "source": "folder", "available": False, "error": str(e)})
    return rows


def resolve_cached(repo_id: str) -> Path:
    """The hub model's cached folder, without touching the network."""
    from huggingface_hub import snapshot_download
    from .sources import HUB_FILES
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:
        raise ModelUnavailable(f"{repo_id} is not cached") from None
