"""The files shipped beside the code: the sample corpus, the paraphrase pairs, the search
examples and the evaluation set (scored pairs, queries). In the repository they are the folder
assets/; an installed package holds them as
the package ``encoderscope_assets`` (pyproject.toml maps one to the other)."""
from __future__ import annotations

import importlib.resources
from pathlib import Path

from core.errors import EncoderscopeError

PACKAGE = "encoderscope_assets"
SAMPLE_CORPUS = "sample_corpus.txt"
PARAPHRASE_PAIRS = "paraphrase_pairs.tsv"
EVAL_PAIRS = "eval_pairs.tsv"        # sentence pairs scored 0-5 for similarity (`eval --pairs`)
EVAL_QUERIES = "eval_queries.tsv"    # queries and their relevant sample-corpus sentence (`eval --queries`)


def assets_dir() -> Path:
    # A source checkout reads its own assets/ first: an editable install of another checkout
    # (a second worktree) would otherwise hand it that checkout's files.
    local = Path(__file__).resolve().parents[1] / "assets"
    if (local / "__init__.py").is_file() and (local / SAMPLE_CORPUS).is_file():
        return local
    try:
        return Path(str(importlib.resources.files(PACKAGE)))
    except ModuleNotFoundError:      # a source checkout run without installing it
        return local


def asset(name: str) -> Path:
    """The shipped file ``name``; an error (never a silent empty corpus) when it is missing."""
    path = assets_dir() / name
    if not path.is_file():
        raise EncoderscopeError(f"the bundled file {name} is missing from {path.parent}: the "
                                "installation is incomplete; reinstall encoderscope")
    return path


def sample_corpus() -> Path:
    return asset(SAMPLE_CORPUS)


def paraphrase_pairs() -> Path:
    return asset(PARAPHRASE_PAIRS)


def eval_pairs() -> Path:
    return asset(EVAL_PAIRS)


def eval_queries() -> Path:
    return asset(EVAL_QUERIES)
