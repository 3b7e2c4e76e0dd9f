"""The model catalogue: packaged models, the default hub model, trained checkpoints, folders.

Describes each without loading it (config files only), for `encoderscope models` and the app's
model menus.
"""
from __future__ import annotations

from pathlib import Path

from core.encoder.sources import DEFAULT_HUB_MODEL, PACKAGED
from core.errors import ModelUnavailable

TRAINED_DEPTH = 3     # models/<run>, models/experiments/<experiment>/<run> and one level more


def trained_models() -> list[Path]:
    """Checkpoints saved under the user-data models folder (where the Train panel writes its runs,
    and the experiments theirs, under experiments/<experiment>/)."""
    from core.encoder.sources import CHECKPOINT_MARKER
    from core.paths import models_dir
    root = models_dir()
    found = []
    for depth in range(1, TRAINED_DEPTH + 1):
        pattern = "/".join(["*"] * depth) + "/" + CHECKPOINT_MARKER
        found += [m.parent for m in root.glob(pattern) if m.is_file()]
    return sorted(set(found))


def trained_pooling(name: str) -> str | None:
    """The pooling the checkpoint folder ``name`` was trained for (its encoderscope.json config),
    read without loading the model; None for anything that is not a readable checkpoint."""
    from core.encoder.sources import CHECKPOINT_MARKER, read_json
    marker = Path(name).expanduser() / CHECKPOINT_MARKER
    try:
        if not marker.is_file():
            return None
        pooling = read_json(marker).get("config", {}).get("pooling")
    except (OSError, ValueError, AttributeError, ModelUnavailable):
        return None
    return pooling if isinstance(pooling, str) else None


def list_models(extra_folders=(), include_trained: bool = True) -> list[dict]:
    """Known models: packaged, the default hub model, trained checkpoints in the user-data
    folder, and any folders given."""
    from core.encoder.model import EncoderConfig
    from core.encoder.sources import CHECKPOINT_MARKER, check_folder, read_json
    from core.encoder.tokenizer import check_has_tokenizer
    from core.encoder.weights import UnsafeWeights, check_fits, check_weights, config_from_hf

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
                           attention=cfg.attention, pooling=cfg.pooling, folder=str(folder))
                check_weights(folder)      # "available" only if its weights can be read safely
                check_fits(folder)         # ... and have the shapes its config makes
                check_has_tokenizer(folder)  # ... and it can read text
            except Exception as e:
                row.update(available=False, error=str(e))
                if isinstance(e, UnsafeWeights):
                    row["refused"] = "unsafe pickle"
        return row

    from core.encoder.sources import packaged_folder
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

    from core.encoder.sources import HUB_FILES
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:
        raise ModelUnavailable(f"{repo_id} is not cached") from None
